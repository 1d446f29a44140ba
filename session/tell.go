package session

import (
	"github.com/acp-broker/acp-broker/jsonrpc"
)

// Tell shows the user, in a session, something the broker did on its own
// (severity "info", "warning" or "error"): a notice where the editor takes
// notices, else an agent message chunk with the same text on lines of its
// own, as the ACP schema recommends for clients without notices. It never
// reaches the agent. It is written at once, after whatever the relay has
// queued for the editor, so a caller that tells before it answers the agent
// has the user told before anything the agent sends once answered. The
// caller makes title and description plain text of one line each.
func (e *Editor) Tell(sessionID, severity, title, description string) error {
	frame, err := e.b.userMessage(sessionID, severity, title, description, "\n"+title+"\n"+description+"\n")
	if err != nil {
		return err
	}
	return e.b.toEditor("broker->editor", frame)
}

// userMessage is the session/update that shows the user a message of the
// broker's own: a notice where the editor advertised
// clientCapabilities.session.notices or speaks ACP v2 (whose schema needs
// no capability for notices, and a message id for every chunk), else an
// agent message chunk of text.
func (b *broker) userMessage(sessionID, severity, title, description, text string) ([]byte, error) {
	var update any
	if b.tracker.clientSupportsNotices() || b.tracker.protocolVersion() >= 2 {
		update = map[string]string{"sessionUpdate": "notice", "severity": severity, "title": title, "description": description}
	} else {
		update = map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]string{"type": "text", "text": text}}
	}
	return jsonrpc.NewNotification("session/update", map[string]any{"sessionId": sessionID, "update": update})
}
