#!/bin/sh
# An acp-broker exec channel: a notification with buttons on macOS, with
# alerter (https://github.com/vjeantet/alerter).
#
#   [[channel]]
#   name = "mac"
#   type = "exec"
#   command = ["/path/to/alerter.sh"]
set -eu
choice=$(alerter -title "$ACP_BROKER_AGENT asks" -subtitle "$ACP_BROKER_TITLE" -message "$ACP_BROKER_SUMMARY" \
	-actions "Allow once" -closeLabel Reject -timeout 600)
case "$choice" in
"Allow once") echo '{"decision":"allow_once"}' ;;
Reject | @CLOSED) echo '{"decision":"reject_once"}' ;;
*) exit 1 ;; # @TIMEOUT, @CONTENTCLICKED: no answer
esac
