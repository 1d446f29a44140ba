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
# A question (an agent's elicitation: ACP_BROKER_MODE is set) is not for these
# buttons: no answer, so it stays open in the editor and for `acp-broker answer`.
if [ -n "${ACP_BROKER_MODE:-}" ]; then
	echo "questions are answered in the editor or with acp-broker answer" >&2
	exit 2
fi
choice=$(printf '%s\n%s' "$ACP_BROKER_TITLE" "$ACP_BROKER_SUMMARY" |
	alerter -title "acp-broker: $ACP_BROKER_AGENT asks" -actions "Allow once" -closeLabel Reject -timeout 600)
case "$choice" in
"Allow once") echo '{"decision":"allow_once"}' ;;
Reject | @CLOSED) echo '{"decision":"reject_once"}' ;;
*) exit 1 ;; # @TIMEOUT, @CONTENTCLICKED: no answer
esac
