package permission

import (
	"encoding/json"
	"testing"

	"github.com/acp-broker/acp-broker/rules"
	"github.com/acp-broker/acp-broker/session"
)

// TestApprovalsCoverOneMatchingCall pins what an answered ACP request for
// an MCP tool covers: one later call of the same tool in the same session,
// with the same arguments when the request showed them.
func TestApprovalsCoverOneMatchingCall(t *testing.T) {
	notes := rules.MCPTool{Server: "notes", Tool: "write"}
	args := json.RawMessage(`{"name":"n","text":"t"}`)
	reordered := json.RawMessage(`{ "text": "t", "name": "n" }`)

	var a approvals
	a.note("s1", mcpApproval(notes), args, true)
	for _, c := range []struct {
		name    string
		session string
		tool    rules.MCPTool
		args    json.RawMessage
	}{
		{"another session", "s2", notes, args},
		{"another tool", "s1", rules.MCPTool{Server: "notes", Tool: "delete"}, args},
		{"another server", "s1", rules.MCPTool{Server: "other", Tool: "write"}, args},
		{"other arguments", "s1", notes, json.RawMessage(`{"name":"n","text":"other"}`)},
		{"no arguments", "s1", notes, nil},
	} {
		if found, _ := a.take(c.session, mcpApproval(c.tool), c.args); found {
			t.Errorf("%s: covered by the approval", c.name)
		}
	}
	if found, allowed := a.take("s1", mcpApproval(notes), reordered); !found || !allowed {
		t.Fatalf("the same arguments in another order: found %v, allowed %v", found, allowed)
	}
	if found, _ := a.take("s1", mcpApproval(notes), args); found {
		t.Error("one approval covered two calls")
	}

	// A request that showed no arguments covers a call with any, of its
	// session only: a call whose session is not known yet matches none.
	a.note("s1", mcpApproval(notes), nil, true)
	if found, _ := a.take("", mcpApproval(notes), json.RawMessage(`{"anything":1}`)); found {
		t.Error("a call of a session not known yet was covered by another session's answer")
	}
	if found, _ := a.take("s1", mcpApproval(notes), json.RawMessage(`{"anything":1}`)); !found {
		t.Error("an approval without arguments did not cover the call")
	}

	// A rejection is found, and says so.
	a.note("s1", mcpApproval(notes), args, false)
	if found, allowed := a.take("s1", mcpApproval(notes), args); !found || allowed {
		t.Errorf("a rejection: found %v, allowed %v", found, allowed)
	}
}

func TestMCPArgumentsOfAnACPRequest(t *testing.T) {
	for _, c := range []struct{ name, toolCall, want string }{
		{"Claude Code: rawInput is the arguments", `{"toolCallId":"a","rawInput":{"name":"n"}}`, `{"name":"n"}`},
		{"Codex: rawInput.arguments", `{"toolCallId":"a","rawInput":{"server":"notes","tool":"write","arguments":{"name":"n"}}}`, `{"name":"n"}`},
		{"an input that merely has an arguments member", `{"toolCallId":"a","rawInput":{"arguments":[1]}}`, `{"arguments":[1]}`},
		{"Gemini CLI: no rawInput", `{"toolCallId":"a","title":"write (notes MCP Server)"}`, ``},
	} {
		got := mcpArguments(&session.Call{}, permissionParams{ToolCall: json.RawMessage(c.toolCall)})
		if string(got) != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
