#!/bin/sh
# An acp-broker exec channel: a dialog on macOS, with osascript (built in).
#
#   [[channel]]
#   name = "mac"
#   type = "exec"
#   command = ["/path/to/osascript.sh"]
#
# The dialog gives up after 10 minutes: no answer. The title and summary are
# the agent's text: the script reads them from the environment itself, so
# they are never arguments of osascript (nor AppleScript source).
set -eu
# A question (an agent's elicitation: ACP_BROKER_MODE is set) is not for these
# buttons: no answer, so it stays open in the editor and for `acp-broker answer`.
if [ -n "${ACP_BROKER_MODE:-}" ]; then
	echo "questions are answered in the editor or with acp-broker answer" >&2
	exit 2
fi
choice=$(osascript -e 'on run
	set agentName to do shell script "printf %s \"$ACP_BROKER_AGENT\""
	set requestTitle to do shell script "printf %s \"$ACP_BROKER_TITLE\""
	set requestSummary to do shell script "printf %s \"$ACP_BROKER_SUMMARY\"" without altering line endings
	display dialog requestSummary with title (agentName & " asks: " & requestTitle) buttons {"Reject", "Allow once"} default button "Reject" giving up after 600
	return button returned of result
end run')
case "$choice" in
"Allow once") echo '{"decision":"allow_once"}' ;;
Reject) echo '{"decision":"reject_once"}' ;;
*) exit 1 ;;
esac
