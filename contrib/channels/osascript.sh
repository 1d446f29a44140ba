#!/bin/sh
# An acp-broker exec channel: a dialog on macOS, with osascript (built in).
#
#   [[channel]]
#   name = "mac"
#   type = "exec"
#   command = ["/path/to/osascript.sh"]
#
# The dialog gives up after 10 minutes: no answer.
set -eu
choice=$(osascript -e 'on run argv
	display dialog (item 2 of argv) with title (item 1 of argv) buttons {"Reject", "Allow once"} default button "Reject" giving up after 600
	return button returned of result
end run' "$ACP_BROKER_AGENT asks: $ACP_BROKER_TITLE" "$ACP_BROKER_SUMMARY")
case "$choice" in
"Allow once") echo '{"decision":"allow_once"}' ;;
Reject) echo '{"decision":"reject_once"}' ;;
*) exit 1 ;;
esac
