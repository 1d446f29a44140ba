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
	for i := range MaxUnknownSessions + 5 {
		tr.update(update(fmt.Sprintf("s%d", i+2), `{"sessionUpdate":"tool_call","toolCallId":"x"}`))
	}
	if n, _ := tr.counts(); n != MaxUnknownSessions {
		t.Fatalf("sessions = %d", n)
	}
}

// TestTrackerKeepsOpenedSessionsApart: sessions the editor opened are never
// pushed out by updates for sessions it did not open, however many; those
// are not opened and carry no directory.
func TestTrackerKeepsOpenedSessionsApart(t *testing.T) {
	tr := newTracker()
	tr.editorRequest(msg(t, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/repo","mcpServers":[]}}`))
	tr.agentResponse(msg(t, `{"jsonrpc":"2.0","id":1,"result":{"sessionId":"real"}}`))
	tr.update(update("real", `{"sessionUpdate":"tool_call","toolCallId":"c1","kind":"read"}`))
	for i := range 3 * MaxUnknownSessions {
		tr.update(update(fmt.Sprintf("fake-%d", i), `{"sessionUpdate":"tool_call","toolCallId":"x","kind":"read"}`))
	}
	if info := tr.info("real"); !info.Opened || info.Cwd != "/repo" {
		t.Fatalf("the opened session after a flood = %+v", info)
	}
	if tr.toolCall("real", "c1") == nil {
		t.Fatal("the opened session's tool call was dropped by the flood")
	}
	if info := tr.info("fake-5"); info.Opened || info.Cwd != "" {
		t.Fatalf("a session the editor did not open = %+v", info)
	}
	if n, _ := tr.counts(); n != MaxUnknownSessions+1 {
		t.Fatalf("sessions = %d", n)
	}
	// An agent answering session/new with an error opens nothing, and a
	// session/load opens the session the editor named, not one the agent
	// answers with.
	tr.editorRequest(msg(t, `{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"s2","cwd":"/two","mcpServers":[]}}`))
	tr.agentResponse(msg(t, `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"real"}}`))
	if tr.info("s2").Cwd != "/two" || tr.info("real").Cwd != "/repo" {
		t.Fatalf("session/load opened %+v and changed %+v", tr.info("s2"), tr.info("real"))
	}
	tr.editorRequest(msg(t, `{"jsonrpc":"2.0","id":3,"method":"session/close","params":{"sessionId":"real"}}`))
	tr.agentResponse(msg(t, `{"jsonrpc":"2.0","id":3,"result":{}}`))
	if tr.info("real").Opened {
		t.Fatal("a closed session is still opened")
	}
}

func TestTrackerNullIsUnchanged(t *testing.T) {
	tr := newTracker()
	tr.update(update("s1", `{"sessionUpdate":"tool_call","toolCallId":"c1","kind":"read","locations":[{"path":"/home/u/.ssh/id_ed25519"}],"rawInput":{"file_path":"/home/u/.ssh/id_ed25519"}}`))
	tr.update(update("s1", `{"sessionUpdate":"tool_call_update","toolCallId":"c1","locations":null,"rawInput":null,"kind":null,"title":"Read"}`))
	tc := tr.toolCall("s1", "c1")
	if string(tc.Fields["locations"]) != `[{"path":"/home/u/.ssh/id_ed25519"}]` || tc.String("kind") != "read" || string(tc.Fields["rawInput"]) != `{"file_path":"/home/u/.ssh/id_ed25519"}` {
		t.Fatalf("null erased what was announced: %v", tc.Fields)
	}
}

func TestTrackerFlagsRequestsThatDisagreeWithTheAnnouncement(t *testing.T) {
	announce := `{"sessionUpdate":"tool_call","toolCallId":"c1","kind":"execute","title":"Terminal","rawInput":{"command":"rm -rf ~","description":"x"},"locations":[{"path":"/a"}],"_meta":{"claudeCode":{"toolName":"Bash"}}}`
	for _, tc := range []struct {
		name, request string
		disagree      bool
	}{
		{"repeats", `{"toolCallId":"c1","title":"rm -rf ~","rawInput":{"description":"x","command":"rm -rf ~"}}`, false},
		{"only_the_id", `{"toolCallId":"c1"}`, false},
		{"nulls", `{"toolCallId":"c1","rawInput":null,"kind":null,"locations":null}`, false},
		{"same_with_null_member", `{"toolCallId":"c1","locations":[{"path":"/a","line":null}]}`, false},
		{"input_with_a_member_more", `{"toolCallId":"c1","rawInput":{"command":"rm -rf ~","description":"x","reason":"cleanup"}}`, false},
		{"input_with_a_member_less", `{"toolCallId":"c1","rawInput":{"command":"rm -rf ~"}}`, true},
		{"input_not_an_object", `{"toolCallId":"c1","rawInput":"rm -rf ~"}`, true},
		{"other_command", `{"toolCallId":"c1","rawInput":{"command":"ls"}}`, true},
		{"nested_null", `{"toolCallId":"c1","rawInput":{"command":null,"description":"x"}}`, true},
		{"other_kind", `{"toolCallId":"c1","kind":"read"}`, true},
		{"other_locations", `{"toolCallId":"c1","locations":[{"path":"/b"}]}`, true},
		{"empty_locations", `{"toolCallId":"c1","locations":[]}`, true},
		{"other_tool_name", `{"toolCallId":"c1","name":"Read"}`, true},
		{"meta_drops_the_tool_name", `{"toolCallId":"c1","_meta":{}}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker()
			tr.update(update("s1", announce))
			got := tr.mergeToolCall("s1", json.RawMessage(tc.request), true)
			if (len(got.Disagreements) > 0) != tc.disagree {
				t.Fatalf("disagreements = %q, want some: %v", got.Disagreements, tc.disagree)
			}
			// The next request of the same tool call starts clean.
			if again := tr.mergeToolCall("s1", json.RawMessage(`{"toolCallId":"c1"}`), true); len(again.Disagreements) != 0 {
				t.Fatalf("disagreements stuck: %q", again.Disagreements)
			}
		})
	}
	// A disagreeing request does not become the announcement: the same
	// request again still disagrees.
	tr := newTracker()
	tr.update(update("s1", announce))
	for range 2 {
		if got := tr.mergeToolCall("s1", json.RawMessage(`{"toolCallId":"c1","rawInput":{"command":"ls"}}`), true); len(got.Disagreements) == 0 {
			t.Fatal("a repeated disagreeing request was taken for the announcement")
		}
	}
	// A placeholder announced first may be filled in by the request.
	tr = newTracker()
	tr.update(update("s1", `{"sessionUpdate":"tool_call","toolCallId":"c1","kind":"execute","rawInput":{}}`))
	if got := tr.mergeToolCall("s1", json.RawMessage(`{"toolCallId":"c1","rawInput":{"command":"ls"}}`), true); len(got.Disagreements) != 0 {
		t.Fatalf("filling in a placeholder: %q", got.Disagreements)
	}
	// Updates before the request may change the tool call.
	tr.update(update("s1", `{"sessionUpdate":"tool_call_update","toolCallId":"c1","rawInput":{"command":"git status"}}`))
	if got := tr.mergeToolCall("s1", json.RawMessage(`{"toolCallId":"c1","rawInput":{"command":"git status"}}`), true); len(got.Disagreements) != 0 {
		t.Fatalf("after an update: %q", got.Disagreements)
	}
}

// An update that peers may read as another tool call, another session or
// another kind of update than the broker does leaves every tool call it may
// name, in every session it may name, ambiguous.
func TestTrackerAmbiguousUpdates(t *testing.T) {
	change := `"rawInput":{"command":"npm install x"}`
	for name, params := range map[string]string{
		"sessionUpdate twice":         `{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","sessionUpdate":"tool_call_update","toolCallId":"t",` + change + `}}`,
		"SessionUpdate":               `{"sessionId":"s1","update":{"SessionUpdate":"tool_call_update","toolCallId":"t",` + change + `}}`,
		"Update beside update":        `{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk"},"Update":{"sessionUpdate":"tool_call_update","toolCallId":"t",` + change + `}}`,
		"update twice":                `{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk"},"update":{"sessionUpdate":"tool_call_update","toolCallId":"t",` + change + `}}`,
		"Update alone":                `{"sessionId":"s1","Update":{"sessionUpdate":"tool_call_update","toolCallId":"t",` + change + `}}`,
		"sessionId twice":             `{"sessionId":"other","update":{"sessionUpdate":"tool_call_update","toolCallId":"t",` + change + `},"sessionId":"s1"}`,
		"SessionId":                   `{"sessionId":"other","SessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"t",` + change + `}}`,
		"escaped sessionId twice":     `{"sessionId":"other","session\u0049d":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"t",` + change + `}}`,
		"long s":                      `{"ſessionId":"s1","sessionId":"other","update":{"sessionUpdate":"tool_call_update","toolCallId":"t",` + change + `}}`,
		"toolCallId twice":            `{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"decoy","toolCallId":"t",` + change + `}}`,
		"ToolCallId":                  `{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"decoy","ToolCallId":"t",` + change + `}}`,
		"ToolCallId alone":            `{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","ToolCallId":"t",` + change + `}}`,
		"escaped toolCallId twice":    `{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"decoy","toolCall\u0049d":"t",` + change + `}}`,
		"repeated member of the call": `{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"t","rawInput":{},` + change + `}}`,
		"RawInput":                    `{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"t","RawInput":{"command":"npm install x"}}}`,
		"Kind":                        `{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"t","Kind":"edit"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			tr := newTracker()
			tr.open(Info{ID: "s1", Opened: true, Cwd: "/repo"})
			tr.update(update("s1", `{"sessionUpdate":"tool_call","toolCallId":"t","kind":"execute","rawInput":{"command":"git status"}}`))
			tr.update(json.RawMessage(params))
			_, tc := tr.intercepted("session/request_permission", json.RawMessage(`{"sessionId":"s1","toolCall":{"toolCallId":"t","kind":"execute","rawInput":{"command":"git status"}},"options":[]}`))
			if tc == nil || (!tc.Ambiguous && len(tc.Disagreements) == 0) {
				t.Fatalf("the request is taken for the announcement: %+v", tc)
			}
		})
	}
	// A new session named twice in the agent's answer is not opened.
	tr := newTracker()
	tr.editorRequest(msg(t, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/repo","mcpServers":[]}}`))
	tr.agentResponse(msg(t, `{"jsonrpc":"2.0","id":1,"result":{"sessionId":"mine","sessionId":"s1"}}`))
	if tr.info("mine").Opened || tr.info("s1").Opened {
		t.Fatal("a session the agent named twice was opened")
	}
}

// A request about a tool call whose announcement the tracker dropped
// (finished, pushed out by newer ones) cannot be checked against it.
func TestTrackerRemembersWhatItForgot(t *testing.T) {
	ask := func(tr *tracker, id string) *ToolCall {
		_, tc := tr.intercepted("session/request_permission", json.RawMessage(`{"sessionId":"s1","toolCall":{"toolCallId":"`+id+`","kind":"execute","rawInput":{"command":"git status"}}}`))
		return tc
	}
	announce := func(tr *tracker, id string) {
		tr.update(update("s1", `{"sessionUpdate":"tool_call","toolCallId":"`+id+`","kind":"execute","rawInput":{"command":"npm install x"}}`))
	}
	tr := newTracker()
	tr.open(Info{ID: "s1", Opened: true, Cwd: "/repo"})
	announce(tr, "done")
	tr.update(update("s1", `{"sessionUpdate":"tool_call_update","toolCallId":"done","status":"completed"}`))
	if tc := ask(tr, "done"); len(tc.Disagreements) == 0 {
		t.Error("a request about a finished tool call is taken for a new one")
	}
	announce(tr, "old")
	for i := range MaxToolCallsPerSession {
		announce(tr, fmt.Sprint("new", i))
	}
	if tc := ask(tr, "old"); len(tc.Disagreements) == 0 {
		t.Error("a request about a tool call pushed out is taken for a new one")
	}
	if tc := ask(tr, "never-announced"); len(tc.Disagreements) != 0 {
		t.Errorf("a request about a tool call never announced: %v", tc.Disagreements)
	}
	for i := range MaxForgottenToolCalls {
		announce(tr, fmt.Sprint("more", i))
	}
	if tc := ask(tr, "never-announced-2"); len(tc.Disagreements) == 0 {
		t.Error("after forgetting more than it can remember, a request about an untracked tool call is taken for a new one")
	}
}

// TestTrackerJudgesTheAnnouncedShell: a request whose command is the script
// of the shell command announced for it agrees, and its view keeps the
// announced command (what runs) with the request's other members.
func TestTrackerJudgesTheAnnouncedShell(t *testing.T) {
	tr := newTracker()
	tr.mergeToolCall("s1", json.RawMessage(`{"toolCallId":"c1","kind":"execute","rawInput":{"command":"/bin/zsh -lc 'git status && ls'","cwd":"/repo"}}`), false)
	got := tr.mergeToolCall("s1", json.RawMessage(`{"toolCallId":"c1","rawInput":{"command":"git status && ls","cwd":"/repo","reason":"look"}}`), true)
	if len(got.Disagreements) != 0 {
		t.Fatalf("disagreements: %v", got.Disagreements)
	}
	if want := `{"command":"/bin/zsh -lc 'git status && ls'","cwd":"/repo","reason":"look"}`; string(got.Fields["rawInput"]) != want {
		t.Fatalf("judged rawInput = %s, want %s", got.Fields["rawInput"], want)
	}
	if got := tr.mergeToolCall("s1", json.RawMessage(`{"toolCallId":"c1","rawInput":{"command":"git status","cwd":"/repo"}}`), true); len(got.Disagreements) == 0 {
		t.Fatal("a request with less than the announced script agreed")
	}
}

// An update is merged into what the broker knows of its tool call, and no
// copy of the merged view is made for it: only a request's view is judged.
func TestTrackingAnUpdateMakesNoView(t *testing.T) {
	tr := newTracker()
	if view := tr.mergeToolCall("s1", json.RawMessage(`{"sessionUpdate":"tool_call","toolCallId":"c1","kind":"execute","status":"pending","rawInput":{"command":"ls"}}`), false); view != nil {
		t.Errorf("an update returned a view: %+v", view)
	}
	tr.mergeToolCall("s1", json.RawMessage(`{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"in_progress"}`), false)
	got := tr.toolCall("s1", "c1")
	if got == nil || got.String("status") != "in_progress" || string(got.Fields["rawInput"]) != `{"command":"ls"}` {
		t.Fatalf("the tracked tool call is %+v", got)
	}
	if view := tr.mergeToolCall("s1", json.RawMessage(`{"toolCallId":"c1"}`), true); view == nil || string(view.Fields["rawInput"]) != `{"command":"ls"}` {
		t.Fatalf("a request's view is %+v", view)
	}
}
