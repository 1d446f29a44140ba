package session

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/acp-broker/acp-broker/jsonrpc"
)

func msg(t *testing.T, s string) *jsonrpc.Message {
	t.Helper()
	m, err := jsonrpc.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func update(sessionID, body string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"sessionId":%q,"update":%s}`, sessionID, body))
}

func TestTrackerFollowsSessionLifecycle(t *testing.T) {
	tr := newTracker()
	tr.editorRequest(msg(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}}`))
	tr.agentResponse(msg(t, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentInfo":{"name":"claude-agent-acp"}}}`))
	if a := tr.agentInfo(); string(a.AgentInfo) != `{"name":"claude-agent-acp"}` || string(a.ClientCapabilities) != `{"fs":{"readTextFile":true}}` {
		t.Fatalf("agent = %+v", a)
	}

	tr.editorRequest(msg(t, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/repo","additionalDirectories":["/lib"],"mcpServers":[{"name":"gh","command":"gh-mcp","args":[],"env":[]}]}}`))
	tr.agentResponse(msg(t, `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}`))
	info := tr.info("s1")
	if info.Cwd != "/repo" || len(info.AdditionalDirectories) != 1 || len(info.MCPServers) != 1 {
		t.Fatalf("info = %+v", info)
	}

	// A failed session/load changes nothing; a successful one records the session.
	tr.editorRequest(msg(t, `{"jsonrpc":"2.0","id":3,"method":"session/load","params":{"sessionId":"s2","cwd":"/other","mcpServers":[]}}`))
	tr.agentResponse(msg(t, `{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"no"}}`))
	if n, _ := tr.counts(); n != 1 {
		t.Fatalf("sessions after a failed load = %d", n)
	}
	tr.editorRequest(msg(t, `{"jsonrpc":"2.0","id":4,"method":"session/load","params":{"sessionId":"s2","cwd":"/other","mcpServers":[]}}`))
	tr.agentResponse(msg(t, `{"jsonrpc":"2.0","id":4,"result":{}}`))
	if tr.info("s2").Cwd != "/other" {
		t.Fatal("session/load not recorded")
	}

	tr.editorRequest(msg(t, `{"jsonrpc":"2.0","id":5,"method":"session/close","params":{"sessionId":"s1"}}`))
	tr.agentResponse(msg(t, `{"jsonrpc":"2.0","id":5,"result":{}}`))
	if n, _ := tr.counts(); n != 1 || tr.info("s1").Cwd != "" {
		t.Fatal("closed session still tracked")
	}
	if len(tr.requests) != 0 {
		t.Fatalf("%d answered requests still tracked", len(tr.requests))
	}
}

func TestTrackerMergesToolCallsAndDropsFinishedOnes(t *testing.T) {
	tr := newTracker()
	tr.update(update("s1", `{"sessionUpdate":"tool_call","toolCallId":"c1","title":"Run","kind":"execute","rawInput":{"command":"ls"}}`))
	tr.update(update("s1", `{"sessionUpdate":"tool_call_update","toolCallId":"c1","title":"ls -la","status":"in_progress","name":"Bash"}`))
	tc := tr.toolCall("s1", "c1")
	if tc.String("kind") != "execute" || tc.String("title") != "ls -la" || tc.String("name") != "Bash" || string(tc.Fields["rawInput"]) != `{"command":"ls"}` {
		t.Fatalf("merged = %v", tc.Fields)
	}
	if _, ok := tc.Fields["sessionUpdate"]; ok {
		t.Fatal("the update's type leaked into the tool call")
	}
	tr.update(update("s1", `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}`))
	tr.update(update("s1", `{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed"}`))
	if tr.toolCall("s1", "c1") != nil {
		t.Fatal("a completed tool call is still tracked")
	}
}

func TestTrackerMarksAmbiguousToolCalls(t *testing.T) {
	tr := newTracker()
	tr.update(update("s1", `{"sessionUpdate":"tool_call","toolCallId":"c1","kind":"read","kind":"execute"}`))
	if tc := tr.toolCall("s1", "c1"); tc == nil || !tc.Ambiguous {
		t.Fatalf("tool call with a duplicated kind = %+v", tc)
	}
	tr.update(update("s1", `{"sessionUpdate":"tool_call","toolCallId":"c2","kind":"read","Kind":"execute"}`))
	if tc := tr.toolCall("s1", "c2"); tc == nil || !tc.Ambiguous {
		t.Fatalf("tool call with a case-variant kind = %+v", tc)
	}
}

func TestTrackerMemoryIsBounded(t *testing.T) {
	tr := newTracker()
	for i := range MaxToolCallsPerSession + 10 {
		tr.update(update("s1", fmt.Sprintf(`{"sessionUpdate":"tool_call","toolCallId":"c%d","kind":"read"}`, i)))
	}
	if _, calls := tr.counts(); calls != MaxToolCallsPerSession {
		t.Fatalf("tool calls = %d", calls)
	}
	if tr.toolCall("s1", "c0") != nil || tr.toolCall("s1", fmt.Sprintf("c%d", MaxToolCallsPerSession+9)) == nil {
		t.Fatal("the cap did not drop the oldest tool call first")
	}
	for i := range MaxSessions + 5 {
		tr.update(update(fmt.Sprintf("s%d", i+2), `{"sessionUpdate":"tool_call","toolCallId":"x"}`))
	}
	if n, _ := tr.counts(); n != MaxSessions {
		t.Fatalf("sessions = %d", n)
	}
}
