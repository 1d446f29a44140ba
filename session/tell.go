package session

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"

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

// imitatesBrokerNotice reports whether an agent's session/update is a
// notice whose title reads as the broker's own (see Tell): "acp-broker" at
// its start in any letter case, once spaces and characters that show
// nothing are left out. Every spelling of the members a peer may read is
// looked at. Such an update is dropped: the broker's notices are the one
// thing the agent cannot imitate. (An agent message chunk cannot be told
// from the agent's other text, so the text form of a tell can be.)
func imitatesBrokerNotice(params json.RawMessage) bool {
	if !bytes.Contains(params, []byte("otice")) && !bytes.Contains(params, []byte(`\u`)) {
		return false // cheap: no notice spelled in it, escaped or not
	}
	top, nested := jsonrpc.NestedNamesakes(params, []string{"update"}, 0, "sessionUpdate", "title")
	if top == nil {
		return false
	}
	for _, inner := range nested {
		notice := false
		for _, kind := range inner[0] {
			if s, ok := stringValue(kind.Value); ok && strings.EqualFold(strings.TrimSpace(s), "notice") {
				notice = true
			}
		}
		if !notice {
			continue
		}
		for _, title := range inner[1] {
			if s, ok := stringValue(title.Value); ok && strings.HasPrefix(strings.ToLower(visible(s)), "acp-broker") {
				return true
			}
		}
	}
	return false
}

// visible is s without white space at its start and without the
// characters that show nothing (format and control characters, combining
// marks).
func visible(s string) string {
	s = strings.TrimLeftFunc(s, unicode.IsSpace)
	return strings.Map(func(r rune) rune {
		if unicode.In(r, unicode.Cf, unicode.Cc, unicode.Mn, unicode.Me) {
			return -1
		}
		return r
	}, s)
}
