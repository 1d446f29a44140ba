#!/bin/sh
# An acp-broker exec channel: a desktop notification with buttons, on Linux
# (libnotify's notify-send 0.7.10 or newer, which has --action and --wait).
#
#   [[channel]]
#   name = "desktop"
#   type = "exec"
#   command = ["/path/to/notify-send.sh"]
#
# The broker passes the request as JSON on stdin and its gist in ACP_BROKER_*
# variables; this script prints the chosen decision as JSON. Closing the
# notification, or anything unexpected, prints nothing: no answer. The title
# and summary are the agent's text: they come after "--", so that one
# starting with "-" is shown, never read as an option (a forged button).
set -eu
# A question (an agent's elicitation: ACP_BROKER_MODE is set) is not for these
# buttons: no answer, so it stays open in the editor and for `acp-broker answer`.
if [ -n "${ACP_BROKER_MODE:-}" ]; then
	echo "questions are answered in the editor or with acp-broker answer" >&2
	exit 2
fi
set -- --app-name=acp-broker --urgency=critical --wait --action=allow_once="Allow once"
case " $ACP_BROKER_OPTIONS " in *" allow_always "*) set -- "$@" --action=allow_always="Always allow" ;; esac
set -- "$@" --action=reject_once=Reject
choice=$(notify-send "$@" -- "$ACP_BROKER_AGENT asks: $ACP_BROKER_TITLE" "$ACP_BROKER_SUMMARY")
case "$choice" in
allow_once | allow_always | reject_once) printf '{"decision":"%s"}\n' "$choice" ;;
*) exit 1 ;;
esac
