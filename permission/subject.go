package permission

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/acp-broker/acp-broker/jsonrpc"
)

// ACP v2 asks permission about a subject instead of a tool call:
// {type: "tool_call", toolCall} (the only one claude-agent-acp 0.101 sends),
// {type: "command", command, cwd, toolCallId?, terminalId?}, or a type
// newer than this code. Both known subjects read as the tool call a v1
// request would carry, so the rules decide v1 and v2 alike; any other
// subject is not understood, and so goes to the human, never decided.

// subjectToolCall returns the tool call a v2 request's subject describes.
func subjectToolCall(subject json.RawMessage) (json.RawMessage, error) {
	m, err := jsonrpc.ExactMembers(subject, "type", "toolCall", "command", "cwd", "toolCallId", "terminalId", "_meta")
	if err != nil {
		return nil, fmt.Errorf(`"subject": %v`, err)
	}
	kind, ok := stringOf(m["type"])
	if !ok {
		return nil, errors.New(`the "subject" has no "type"`)
	}
	switch kind {
	case "tool_call":
		tc, ok := m["toolCall"]
		if !ok || tc[0] != '{' {
			return nil, errors.New(`the "tool_call" subject has no "toolCall" object`)
		}
		return tc, nil
	case "command":
		// A shell command run in cwd: read as a Bash tool call whose
		// rawInput names its directory, so cwd is anchored as Codex's
		// rawInput.cwd is (the session's directories, else an access of
		// its own).
		command, ok1 := stringOf(m["command"])
		cwd, ok2 := stringOf(m["cwd"])
		if !ok1 || !ok2 {
			return nil, errors.New(`the "command" subject needs a "command" and a "cwd" string`)
		}
		input, _ := json.Marshal(map[string]string{"command": command, "cwd": cwd})
		tc := map[string]json.RawMessage{"kind": json.RawMessage(`"execute"`), "rawInput": input}
		if id, ok := m["toolCallId"]; ok && !jsonrpc.IsNull(id) {
			// Kept so the request is audited under its tool call; the
			// command is judged on what the subject says.
			tc["toolCallId"] = id
		}
		return json.Marshal(tc)
	}
	return nil, fmt.Errorf("the subject type %q is not one the broker knows (ACP v2 knows tool_call and command), so it cannot tell what is asked", kind)
}
