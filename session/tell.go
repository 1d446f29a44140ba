package session

import (
	"strconv"
	"sync/atomic"

	"github.com/acp-broker/acp-broker/jsonrpc"
)

// Tell shows the user, in a session, something the broker did on its own
// (severity "info", "warning" or "error"): a notice where the editor
// advertised clientCapabilities.session.notices, else an agent message
// chunk with the same text on lines of its own, as the ACP schema
// recommends for clients without notices. It never reaches the agent. It
// is written at once, after whatever the relay has queued for the editor,
// so a caller that tells before it answers the agent has the user told
// before anything the agent sends once answered. The caller makes title
// and description plain text of one line each.
func (e *Editor) Tell(sessionID, severity, title, description string) error {
	frame, err := e.b.userMessage(sessionID, severity, title, description, "\n"+title+"\n"+description+"\n")
	if err != nil {
		return err
	}
	return e.b.toEditor("broker->editor", frame)
}

// brokerMessages numbers the messages the broker adds to a session's
// transcript, for the messageId ACP v2 requires of every chunk.
var brokerMessages atomic.Uint64

// userMessage is the session/update that shows the user a message of the
// broker's own: a notice, or where the editor takes none an agent message
// chunk of text (in ACP v2 a message of its own, by id).
func (b *broker) userMessage(sessionID, severity, title, description, text string) ([]byte, error) {
	var update any
	if b.tracker.clientSupportsNotices() {
		update = map[string]string{"sessionUpdate": "notice", "severity": severity, "title": title, "description": description}
	} else {
		chunk := map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]string{"type": "text", "text": text}}
		if b.tracker.protocolVersion() >= 2 {
			chunk["messageId"] = "acp-broker-" + strconv.FormatUint(brokerMessages.Add(1), 10)
		}
		update = chunk
	}
	return jsonrpc.NewNotification("session/update", map[string]any{"sessionId": sessionID, "update": update})
}
