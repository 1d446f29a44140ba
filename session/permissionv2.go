package session

import (
	"encoding/json"

	"github.com/acp-broker/acp-broker/jsonrpc"
)

// PermissionToolCall returns the tool call a session/request_permission asks
// about, in either version of ACP: v1's params.toolCall, or v2's
// params.subject.toolCall when the subject is {type: "tool_call"}. A v2
// request with another subject (a command, a future type) asks about no
// tool call the broker tracks.
func PermissionToolCall(params json.RawMessage) (json.RawMessage, bool) {
	if tc, ok := jsonrpc.Field(params, "toolCall"); ok {
		return tc, true
	}
	if kind, ok := jsonrpc.String(params, "subject", "type"); ok && kind == "tool_call" {
		return jsonrpc.Field(params, "subject", "toolCall")
	}
	return nil, false
}
