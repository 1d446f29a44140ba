#!/bin/sh
# An acp-broker exec channel: a notification with buttons on macOS, with
# alerter (https://github.com/vjeantet/alerter).
#
#   [[channel]]
#   name = "mac"
#   type = "exec"
#   command = ["/path/to/alerter.sh"]
#
# The title and summary are the agent's text: they go to alerter on stdin
# (its message when -message is not given), never as arguments, which a
# text starting with "-" could turn into options.
set -eu
choice=$(printf '%s\n%s' "$ACP_BROKER_TITLE" "$ACP_BROKER_SUMMARY" |
	alerter -title "acp-broker: $ACP_BROKER_AGENT asks" -actions "Allow once" -closeLabel Reject -timeout 600)
case "$choice" in
"Allow once") echo '{"decision":"allow_once"}' ;;
Reject | @CLOSED) echo '{"decision":"reject_once"}' ;;
*) exit 1 ;; # @TIMEOUT, @CONTENTCLICKED: no answer
esac
