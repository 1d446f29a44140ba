#!/bin/sh
# An acp-broker exec channel: a push to your phone through ntfy, with curl
# alone. (The built-in ntfy channel does the same with signed answers and
# updates the notification once decided; use this where you want a script.)
#
#   [[channel]]
#   name = "phone"
#   type = "exec"
#   command = ["/path/to/ntfy-curl.sh"]
#   timeout = "10m"
#
# NTFY_TOPIC must be a long random name: whoever knows it can read your
# prompts. Answers come back on "$NTFY_TOPIC-reply", carrying a one-time
# nonce, so a stale or made-up answer does not match.
#
# The summary is the agent's text: it goes to curl on stdin, never as an
# argument (curl -d "@.env" would read and publish the file .env).
set -eu
# A question (an agent's elicitation: ACP_BROKER_MODE is set) is not for these
# buttons: no answer, so it stays open in the editor and for `acp-broker answer`.
if [ -n "${ACP_BROKER_MODE:-}" ]; then
	echo "questions are answered in the editor or with acp-broker answer" >&2
	exit 2
fi
server=${NTFY_SERVER:-https://ntfy.sh}
topic=${NTFY_TOPIC:?set NTFY_TOPIC}
reply="$topic-reply"
nonce=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
since=$(date +%s)
printf '%s' "$ACP_BROKER_SUMMARY" | curl -fsS -H "Title: $ACP_BROKER_AGENT asks" -H "Priority: high" \
	-H "Actions: http, Allow once, $server/$reply, body=allow_once:$nonce, clear=true; http, Reject, $server/$reply, body=reject_once:$nonce, clear=true" \
	--data-binary @- "$server/$topic" >/dev/null
while :; do
	answer=$(curl -fsS "$server/$reply/raw?poll=1&since=$since" | grep -m1 ":$nonce\$" || true)
	case "$answer" in
	allow_once:* | reject_once:*) printf '{"decision":"%s"}\n' "${answer%%:*}"; exit 0 ;;
	esac
	sleep 2
done
