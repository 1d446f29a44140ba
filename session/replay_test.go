package session

import "testing"

// TestReplayReadsATraceAsTheBrokerDid: a --trace file replays into the
// session's directories and the merged tool call; the copy of a forwarded
// request, the broker's own messages and dropped lines change nothing.
func TestReplayReadsATraceAsTheBrokerDid(t *testing.T) {
	r := NewReplay()
	for _, line := range []string{
		`{"time":"t","dir":"editor->agent","message":{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/repo","additionalDirectories":["/lib"],"mcpServers":[]}}}`,
		`{"time":"t","dir":"agent->editor","message":{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}}`,
		`{"time":"t","dir":"agent->editor","message":{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"c1","kind":"execute","rawInput":{"command":"git push --force"}}}}}`,
		// The first request about c1 was intercepted, then forwarded: one merge.
		`{"time":"t","dir":"agent->broker","note":"intercepted","message":{"jsonrpc":"2.0","id":5,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"c1","status":"completed"},"options":[]}}}`,
		`{"time":"t","dir":"agent->editor","message":{"jsonrpc":"2.0","id":5,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"c1","status":"completed"},"options":[]}}}`,
		`{"time":"t","dir":"agent->broker","note":"dropped: not JSON-RPC","text":"banner"}`,
		`{"time":"t","dir":"broker->editor","message":{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"c2","kind":"read"}}}}`,
		`{"dir":"agent","message":{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"c3","kind":"execute","rawInput":{"command":"make"}}}}}`,
		`not json`,
	} {
		r.Record([]byte(line))
	}
	info, tc := r.Intercepted("session/request_permission", []byte(`{"sessionId":"s1","toolCall":{"toolCallId":"c3","title":"make"}}`))
	if info.Cwd != "/repo" || len(info.AdditionalDirectories) != 1 || info.AdditionalDirectories[0] != "/lib" {
		t.Fatalf("info = %+v", info)
	}
	if tc == nil || string(tc.Fields["rawInput"]) != `{"command":"make"}` || tc.String("title") != "make" {
		t.Fatalf("merged tool call = %+v", tc)
	}
	// A request saying c1 completed does not end what the agent announced
	// of it (only the agent's updates do), nor does it fill in what the
	// next request leaves out; its forwarded copy merged nothing.
	if _, tc := r.Intercepted("session/request_permission", []byte(`{"sessionId":"s1","toolCall":{"toolCallId":"c1"}}`)); tc == nil || tc.String("kind") != "execute" || tc.Fields["status"] != nil {
		t.Fatalf("c1 = %+v, want the announcement and only what this request says", tc)
	}
	if _, tc := r.Intercepted("session/request_permission", []byte(`{"sessionId":"s1","toolCall":{"toolCallId":"c2"}}`)); tc == nil || tc.Fields["kind"] != nil {
		t.Fatalf("c2 = %+v: the broker's own update was replayed", tc)
	}
	if info, _ := r.Intercepted("session/request_permission", []byte(`{"sessionId":"unknown","toolCall":{"toolCallId":"x"}}`)); info.Cwd != "" {
		t.Fatalf("an unknown session has a directory: %+v", info)
	}
}

// TestReplaySkipsWhatTheBrokerRefusedOrDropped: an update the broker dropped
// (it names a tool call id of the broker's), and a request it refused, are
// in its trace as agent->broker lines with a note; they reached no tracker
// live, so they change nothing replayed, and neither does the same message
// in a hand-written transcript.
func TestReplaySkipsWhatTheBrokerRefusedOrDropped(t *testing.T) {
	r := NewReplay()
	for _, line := range []string{
		`{"time":"t","dir":"editor->agent","message":{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/repo","mcpServers":[]}}}`,
		`{"time":"t","dir":"agent->editor","message":{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}}`,
		`{"time":"t","dir":"agent->broker","note":"dropped: the tool call id is reserved for the broker","message":{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"acp-broker-1","kind":"execute","rawInput":{"command":"rm -rf /"}}}}}`,
		`{"dir":"agent","message":{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"acp-broker-2","kind":"execute","rawInput":{"command":"rm -rf /"}}}}}`,
		`{"time":"t","dir":"agent->broker","note":"refused: the request id is in use by an unanswered request","message":{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"c9","kind":"execute","rawInput":{"command":"rm -rf /"}},"options":[]}}}`,
	} {
		r.Record([]byte(line))
	}
	for _, id := range []string{"acp-broker-1", "acp-broker-2"} {
		if _, tc := r.Intercepted("session/request_permission", []byte(`{"sessionId":"s1","toolCall":{"toolCallId":"`+id+`"}}`)); tc != nil && tc.Fields["kind"] != nil {
			t.Errorf("%s = %+v: a dropped update was replayed", id, tc)
		}
	}
	if _, tc := r.Intercepted("session/request_permission", []byte(`{"sessionId":"s1","toolCall":{"toolCallId":"c9","title":"x"}}`)); tc != nil && tc.Fields["rawInput"] != nil {
		t.Errorf("c9 = %+v: a refused request was replayed", tc)
	}
}
