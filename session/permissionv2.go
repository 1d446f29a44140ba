package session

import (
	"encoding/json"

	"github.com/acp-broker/acp-broker/jsonrpc"
)

// PermissionToolCall returns the tool call a session/request_permission asks
// about, in either version of ACP: v1's params.toolCall, or v2's
// params.subject.toolCall when the subject is {type: "tool_call"}. A v2
// command subject that names a tool call ({type: "command", command, cwd,
// toolCallId}) asks about that tool call, running the command in cwd: it is
// read as an execute tool call, so that it is checked against what the
// agent announced of it as a v1 request's toolCall is. Any other subject (a
// command of no tool call, a future type) asks about no tool call the
// broker tracks.
func PermissionToolCall(params json.RawMessage) (json.RawMessage, bool) {
	if tc, ok := jsonrpc.Field(params, "toolCall"); ok {
		return tc, true
	}
	switch kind, _ := jsonrpc.String(params, "subject", "type"); kind {
	case "tool_call":
		return jsonrpc.Field(params, "subject", "toolCall")
	case "command":
		return commandToolCall(params)
	}
	return nil, false
}

// commandToolCall is a command subject's tool call: its toolCallId, kind
// execute and rawInput {command, cwd}; false when it names no tool call or
// is not one the broker can read (the request is then not understood).
func commandToolCall(params json.RawMessage) (json.RawMessage, bool) {
	id, ok1 := jsonrpc.String(params, "subject", "toolCallId")
	command, ok2 := jsonrpc.String(params, "subject", "command")
	cwd, ok3 := jsonrpc.String(params, "subject", "cwd")
	if !ok1 || !ok2 || !ok3 || id == "" {
		return nil, false
	}
	input, err1 := json.Marshal(map[string]string{"command": command, "cwd": cwd})
	tc, err2 := json.Marshal(map[string]any{"toolCallId": id, "kind": "execute", "rawInput": json.RawMessage(input)})
	if err1 != nil || err2 != nil {
		return nil, false
	}
	return tc, true
}
