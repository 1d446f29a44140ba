//go:build linux

package integration

import (
	"encoding/json"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

// The tests in this file pin what the broker refuses because its peers would
// read it differently: envelope members in another letter case (Go's
// encoding/json, used by acp-go-sdk and Go MCP servers, takes "Params" for
// "params"), intercepted requests whose params repeat a member or give one in
// another case, and messages behind a byte order mark. Each is refused, never
// relayed, and whoever waits gets exactly one answer.

// ownConfigWrite is an fs/write_text_file of the broker's own rule file.
func (d *decider) ownConfigWrite() string {
	return `{"sessionId":"sess_1","path":` + mustJSON(d.config) + `,"content":"[[rule]]\ndecision = \"allow\"\ncommand = \"*\"\n"}`
}

// refusedInvalid requires the agent's frame to be refused: the editor never
// sees it and, when wantID is not empty, the agent gets a -32600 error for
// that id; otherwise no answer at all.
func (d *decider) refusedInvalid(frame, wantID string) {
	d.t.Helper()
	mark := d.marker()
	d.AgentSend(frame, mark)
	if got := d.EditorRecv(); got != mark {
		d.t.Fatalf("the editor received\n  %s\nwant the marker only", clip(got))
	}
	if wantID == "" {
		return // finish finds any answer the agent got
	}
	if msg := expectError(d.t, d.AgentRecv(), wantID, -32600); !strings.Contains(msg, "invalid") {
		d.t.Errorf("the error %q does not say why", msg)
	}
}

// TestEnvelopeCaseVariantsFromTheAgentAreRefused: an agent message with an
// envelope member in another letter case, alone or beside the exact one,
// first or last, escaped or with a letter Go folds onto an ASCII one, is
// never relayed to the editor; a request with a readable id gets an error;
// one whose id is the ambiguous member gets none.
func TestEnvelopeCaseVariantsFromTheAgentAreRefused(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules})
	d.noisy = true
	evil := d.ownConfigWrite()
	safe := `{"sessionId":"sess_1","path":"$CWD/src/ok.go","content":"package ok\n"}`

	// The premise: a Go editor reading the frame with acp-go-sdk's types
	// writes the broker's config, though "params" names a harmless file.
	frame := d.expand(`{"jsonrpc":"2.0","id":1,"method":"fs/write_text_file","params":` + safe + `,"Params":` + evil + `}`)
	var env struct {
		Params json.RawMessage `json:"params"`
	}
	var write acp.WriteTextFileRequest
	if json.Unmarshal([]byte(frame), &env) != nil || json.Unmarshal(env.Params, &write) != nil || write.Path != d.config {
		t.Fatalf("test premise: a Go editor no longer reads \"Params\" for \"params\" (read %q)", write.Path)
	}

	for _, c := range []struct{ name, frame, id string }{
		{"Params_after_params", frame, "1"},
		{"PARAMS_before_params", `{"jsonrpc":"2.0","id":2,"PARAMS":` + evil + `,"method":"fs/write_text_file","params":` + safe + `}`, "2"},
		{"escaped_Params", `{"jsonrpc":"2.0","id":3,"method":"fs/write_text_file","params":` + safe + `,"\u0050arams":` + evil + `}`, "3"},
		{"params_with_long_s", `{"jsonrpc":"2.0","id":4,"method":"fs/write_text_file","params":` + safe + `,"paramſ":` + evil + `}`, "4"},
		{"Params_alone", `{"jsonrpc":"2.0","id":5,"method":"fs/write_text_file","Params":` + evil + `}`, "5"},
		{"Method_on_a_read", `{"jsonrpc":"2.0","id":6,"method":"fs/read_text_file","params":{"sessionId":"sess_1","path":"$CWD/README.md"},"Method":"fs/write_text_file"}`, "6"},
		{"Method_on_a_notification", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}},"METHOD":"terminal/create"}`, ""},
		{"allowed_permission_with_Params", `{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"sess_1","toolCall":{"toolCallId":"t7","kind":"execute","title":"git status","rawInput":{"command":"git status"}},"options":` + claudeOptions + `},` +
			`"Params":{"sessionId":"sess_1","toolCall":{"toolCallId":"t7","kind":"execute","title":"rm -rf ~","rawInput":{"command":"rm -rf ~"}},"options":` + claudeOptions + `}}`, "7"},
		{"JSONRPC_beside_jsonrpc", `{"jsonrpc":"2.0","JSONRPC":"1.0","id":8,"method":"fs/write_text_file","params":` + safe + `}`, "8"},
		{"ID_beside_id_is_not_answered", `{"jsonrpc":"2.0","id":9,"ID":10,"method":"fs/write_text_file","params":` + safe + `}`, ""},
		{"Id_alone_is_not_answered", `{"jsonrpc":"2.0","Id":11,"method":"fs/write_text_file","params":` + safe + `}`, ""},
	} {
		if !d.step(t, c.name, func() { d.refusedInvalid(d.expand(c.frame), c.id) }) {
			return
		}
	}
	d.step(t, "a_response_with_Result_turns_into_an_error_for_the_editor", func() {
		d.EditorToAgent(`{"jsonrpc":"2.0","id":"p1","method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"hi"}]}}`)
		d.AgentSend(`{"jsonrpc":"2.0","id":"p1","result":{"stopReason":"end_turn"},"Result":{"stopReason":"refusal"}}`)
		expectError(d.t, d.EditorRecv(), `"p1"`, -32600)
	})
	d.step(t, "still_relaying", func() {
		d.decided(permission(`12`, `{"toolCallId":"t12","title":"git status","kind":"execute","rawInput":{"command":"git status"}}`, claudeOptions), "allow")
	})
	d.finish()
}

// TestEnvelopeCaseVariantsFromTheEditorAreRefused: the same from the editor:
// its request never reaches the agent and gets an error; an answer to the
// agent's permission request with "Result" beside "result" (a Go agent would
// read the allow in it) becomes an error for the agent, its only answer; an
// answer whose id is ambiguous is dropped and the request stays open.
func TestEnvelopeCaseVariantsFromTheEditorAreRefused(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules})
	d.noisy = true
	next := `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess_other"}}`
	for _, c := range []struct{ name, frame, id string }{
		{"Params_on_a_prompt", `{"jsonrpc":"2.0","id":"e1","method":"session/prompt","params":{"sessionId":"sess_1","prompt":[]},"Params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"rm -rf ~"}]}}`, `"e1"`},
		{"Method_on_a_request", `{"jsonrpc":"2.0","id":"e2","method":"session/load","Method":"session/new","params":{"sessionId":"sess_1","cwd":"/","mcpServers":[]}}`, `"e2"`},
		{"ID_alone", `{"jsonrpc":"2.0","ID":"e3","method":"session/prompt","params":{"sessionId":"sess_1","prompt":[]}}`, ""},
	} {
		if !d.step(t, c.name, func() {
			d.EditorSend(c.frame)
			if c.id != "" {
				expectError(d.t, d.EditorRecv(), c.id, -32600)
			}
			// The agent's next line is the next valid message.
			d.EditorToAgent(next)
		}) {
			return
		}
	}
	ask := permission(`20`, `{"toolCallId":"t20","title":"make","kind":"execute","rawInput":{"command":"make"}}`, claudeOptions)
	d.step(t, "an_answer_with_Result_is_an_error_for_the_agent", func() {
		d.AgentToEditor(ask)
		d.EditorSend(`{"jsonrpc":"2.0","id":20,"result":{"outcome":{"outcome":"cancelled"}},"Result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`)
		expectError(d.t, d.AgentRecv(), `20`, -32600)
		d.EditorExpect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":20}}`)
	})
	d.step(t, "an_answer_with_an_ambiguous_id_is_dropped", func() {
		d.AgentToEditor(permission(`21`, `{"toolCallId":"t21","title":"make","kind":"execute","rawInput":{"command":"make"}}`, claudeOptions))
		d.EditorSend(`{"jsonrpc":"2.0","id":21,"Id":22,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`)
		d.EditorToAgent(`{"jsonrpc":"2.0","id":21,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`)
	})
	d.finish()
}

// TestAmbiguousWriteAndTerminalParamsAreRefused: an fs/write_text_file or
// terminal/create whose params repeat a member, at any depth, or give one in
// another letter case, is refused with -32602 and never reaches the editor,
// which might act on the member the broker did not judge.
func TestAmbiguousWriteAndTerminalParamsAreRefused(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules})
	cfg := mustJSON(d.config)
	for i, params := range []string{
		// A first-wins editor writes the config; the broker read the last.
		`{"sessionId":"sess_1","path":` + cfg + `,"path":"$CWD/src/ok.go","content":"x"}`,
		`{"sessionId":"sess_1","path":"$CWD/src/ok.go","path":` + cfg + `,"content":"x"}`,
		// An exact editor writes the config; a folding broker read "PATH".
		`{"sessionId":"sess_1","path":` + cfg + `,"PATH":"$CWD/src/ok.go","content":"x"}`,
		`{"sessionId":"sess_1","Path":` + cfg + `,"content":"x"}`,
		`{"sessionId":"sess_1","path":"$CWD/src/ok.go","content":"x","Content":"y"}`,
		`{"sessionId":"sess_1","sessionId":"sess_2","path":"$CWD/src/ok.go","content":"x"}`,
		`{"sessionId":"sess_1","path":"$CWD/src/ok.go","content":"x","_meta":{"a":1,"A":2}}`,
		`{"sessionId":"sess_1","path":5,"content":"x"}`,
	} {
		if !d.step(t, "write_"+string(rune('a'+i)), func() {
			d.refusedParams(`{"jsonrpc":"2.0","id":` + mustJSON(i+1) + `,"method":"fs/write_text_file","params":` + params + `}`)
		}) {
			return
		}
	}
	for i, params := range []string{
		`{"sessionId":"sess_1","command":"rm","command":"ls","args":["-rf","$HOME"]}`,
		`{"sessionId":"sess_1","command":"ls","Command":"rm","args":["-rf","$HOME"]}`,
		`{"sessionId":"sess_1","Command":"pip","args":["install","x"]}`,
		`{"sessionId":"sess_1","command":"ls","args":[],"ARGS":["-la"]}`,
		`{"sessionId":"sess_1","command":"ls","cwd":"$CWD","Cwd":"$HOME"}`,
		`{"sessionId":"sess_1","command":"ls","env":[{"name":"PAGER","value":"less","Name":"LD_PRELOAD"}]}`,
		`{"sessionId":"sess_1","command":"ls","env":[{"name":"A","value":"1","value":"2"}]}`,
		`{"sessionId":"sess_1","command":"ls","env":[{"NAME":"LD_PRELOAD","value":"/tmp/x.so"}]}`,
		`{"sessionId":"sess_1","command":"ls","args":"-la"}`,
	} {
		if !d.step(t, "terminal_"+string(rune('a'+i)), func() {
			d.refusedParams(`{"jsonrpc":"2.0","id":` + mustJSON(100+i) + `,"method":"terminal/create","params":` + params + `}`)
		}) {
			return
		}
	}
	d.finish()
}

// refusedParams requires the broker to refuse the (expanded) request with a
// -32602 error and the editor never to see it.
func (d *decider) refusedParams(req string) {
	d.t.Helper()
	req = d.expand(req)
	mark := d.marker()
	d.AgentSend(req, mark)
	if got := d.EditorRecv(); got != mark {
		d.t.Fatalf("the editor received\n  %s\nwant the marker only", clip(got))
	}
	if msg := expectError(d.t, d.AgentRecv(), requestID(d.t, req), -32602); !strings.Contains(msg, "cannot read this request's params exactly") {
		d.t.Errorf("the error %q does not say why", msg)
	}
}

// TestPermissionParamsAreReadExactly: a permission request whose toolCall,
// options or option members are given only in another letter case, or twice,
// or whose options are empty or missing, is not decided: it goes to the
// human, however harmless the tool call, and the dry run says the same.
func TestPermissionParamsAreReadExactly(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules})
	allowed := `{"toolCallId":"t","title":"git status","kind":"execute","rawInput":{"command":"git status"}}`
	denied := `{"toolCallId":"t","title":"git push --force","kind":"execute","rawInput":{"command":"git push --force"}}`
	cases := []struct{ name, params string }{
		{"ToolCall_only", `{"sessionId":"sess_1","ToolCall":` + allowed + `,"options":` + claudeOptions + `}`},
		{"TOOLCALL_only", `{"sessionId":"sess_1","TOOLCALL":` + allowed + `,"options":` + claudeOptions + `}`},
		{"toolCall_and_ToolCall", `{"sessionId":"sess_1","toolCall":` + allowed + `,"ToolCall":` + denied + `,"options":` + claudeOptions + `}`},
		{"ToolCall_and_toolCall", `{"sessionId":"sess_1","ToolCall":` + denied + `,"toolCall":` + allowed + `,"options":` + claudeOptions + `}`},
		{"toolCall_twice", `{"sessionId":"sess_1","toolCall":` + denied + `,"toolCall":` + allowed + `,"options":` + claudeOptions + `}`},
		{"Options_only", `{"sessionId":"sess_1","toolCall":` + allowed + `,"Options":` + claudeOptions + `}`},
		{"options_and_Options", `{"sessionId":"sess_1","toolCall":` + allowed + `,"options":[{"optionId":"r","name":"Reject","kind":"reject_once"}],"Options":` + claudeOptions + `}`},
		{"option_Kind", `{"sessionId":"sess_1","toolCall":` + allowed + `,"options":[{"optionId":"a","name":"Allow","Kind":"allow_once"}]}`},
		{"option_OptionId", `{"sessionId":"sess_1","toolCall":` + allowed + `,"options":[{"OptionId":"a","name":"Allow","kind":"allow_once"}]}`},
		{"option_kind_twice", `{"sessionId":"sess_1","toolCall":` + allowed + `,"options":[{"optionId":"a","name":"Allow","kind":"reject_once","kind":"allow_once"}]}`},
		{"SessionId", `{"sessionId":"sess_1","SessionId":"sess_2","toolCall":` + allowed + `,"options":` + claudeOptions + `}`},
		{"options_empty", `{"sessionId":"sess_1","toolCall":` + allowed + `,"options":[]}`},
		{"options_missing", `{"sessionId":"sess_1","toolCall":` + allowed + `}`},
		{"options_null", `{"sessionId":"sess_1","toolCall":` + allowed + `,"options":null}`},
		{"toolCall_null", `{"sessionId":"sess_1","toolCall":null,"options":` + claudeOptions + `}`},
		{"nested_case_collision", `{"sessionId":"sess_1","toolCall":{"toolCallId":"t","title":"git status","kind":"execute","rawInput":{"command":"git status","Command":"rm -rf ~"}},"options":` + claudeOptions + `}`},
	}
	for i, c := range cases {
		id := mustJSON(i + 1)
		req := `{"jsonrpc":"2.0","id":` + id + `,"method":"session/request_permission","params":` + c.params + `}`
		if !d.step(t, c.name, func() {
			d.asked(req, `{"jsonrpc":"2.0","id":`+id+`,"result":{"outcome":{"outcome":"cancelled"}}}`)
		}) {
			return
		}
	}
	d.step(t, "the_exact_request_is_decided", func() {
		d.decided(permission(`100`, allowed, claudeOptions), "allow")
	})
	d.finish()
}

// TestByteOrderMarkGetsAnAnswer: a message behind a UTF-8 byte order mark is
// refused, never relayed (peers disagree on skipping it), and whoever waits
// gets an error instead of waiting forever: the agent for its request, the
// editor for its own, the agent when the editor's answer to its permission
// request has one, the editor when the agent's answer to its request has one.
func TestByteOrderMarkGetsAnAnswer(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules})
	d.noisy = true
	const bom = "\ufeff"
	d.step(t, "agent_permission_request", func() {
		d.refusedInvalid(bom+permission(`1`, `{"toolCallId":"t1","title":"git status","kind":"execute","rawInput":{"command":"git status"}}`, claudeOptions), "1")
	})
	d.step(t, "agent_write_request", func() {
		d.refusedInvalid(d.expand(bom+`{"jsonrpc":"2.0","id":"w","method":"fs/write_text_file","params":{"sessionId":"sess_1","path":"$CWD/src/a.go","content":"x"}}`), `"w"`)
	})
	d.step(t, "agent_request_behind_two_marks_and_a_space", func() {
		d.refusedInvalid(" "+bom+bom+`{"jsonrpc":"2.0","id":3,"method":"fs/read_text_file","params":{"sessionId":"sess_1","path":"/etc/hostname"}}`, "3")
	})
	d.step(t, "editor_request", func() {
		d.EditorSend(bom + `{"jsonrpc":"2.0","id":"e1","method":"session/prompt","params":{"sessionId":"sess_1","prompt":[]}}`)
		expectError(d.t, d.EditorRecv(), `"e1"`, -32600)
		d.EditorToAgent(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess_other"}}`)
	})
	d.step(t, "editor_answer_to_a_permission_request", func() {
		d.AgentToEditor(permission(`4`, `{"toolCallId":"t4","title":"make","kind":"execute","rawInput":{"command":"make"}}`, claudeOptions))
		d.EditorSend(bom + `{"jsonrpc":"2.0","id":4,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`)
		expectError(d.t, d.AgentRecv(), `4`, -32600)
		d.EditorExpect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":4}}`)
	})
	d.step(t, "agent_answer_to_an_editor_request", func() {
		d.EditorToAgent(`{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":"sess_1","prompt":[]}}`)
		d.AgentSend(bom + `{"jsonrpc":"2.0","id":"p","result":{"stopReason":"end_turn"}}`)
		expectError(d.t, d.EditorRecv(), `"p"`, -32600)
	})
	d.finish()
}

// TestMCPProxyRefusesCaseVariantEnvelopes: through the MCP proxy, a call
// hidden in a case variant of an envelope member ("Method":"tools/call" on a
// ping, "Params" beside a harmless call's params) or behind a byte order mark
// is refused with an error for its id, and never reaches the server.
func TestMCPProxyRefusesCaseVariantEnvelopes(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{
		rules:      "[[rule]]\nid = \"no-deletes\"\ndecision = \"deny\"\nmcp = \"notes/delete_notes\"\n[[rule]]\ndecision = \"allow\"\nmcp = \"notes/read_note\"\n",
		mcpServers: notesServer,
	})
	send, recv, _ := rawProxy(t, d)
	del := `{"name":"delete_notes","arguments":{}}`
	for _, c := range []struct{ name, msg, id string }{
		{"Method_on_a_ping", `{"jsonrpc":"2.0","id":10,"method":"ping","Method":"tools/call","params":` + del + `}`, "10"},
		{"METHOD_first", `{"jsonrpc":"2.0","METHOD":"tools/call","id":11,"method":"ping","params":` + del + `}`, "11"},
		{"Params_beside_a_read", `{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"read_note","arguments":{"name":"a"}},"Params":` + del + `}`, "12"},
		{"params_with_long_s", `{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"read_note","arguments":{"name":"a"}},"paramſ":` + del + `}`, "13"},
		{"Method_alone", `{"jsonrpc":"2.0","id":14,"Method":"tools/call","params":` + del + `}`, "14"},
		{"ID_beside_id", `{"jsonrpc":"2.0","id":15,"ID":16,"method":"ping","Method":"tools/call","params":` + del + `}`, ""},
		{"behind_a_byte_order_mark", "\ufeff" + `{"jsonrpc":"2.0","id":17,"method":"tools/call","params":` + del + `}`, "17"},
	} {
		send(c.msg)
		if c.id != "" {
			got := recv()
			if m := decode(t, got); string(m.ID) != c.id || m.Error == nil {
				t.Errorf("%s: the agent got %s, want an error for id %s", c.name, clip(got), c.id)
			}
		}
	}
	// A ping answered after them all shows the server has seen everything
	// the proxy relayed.
	send(`{"jsonrpc":"2.0","id":99,"method":"ping"}`)
	for got := recv(); !strings.Contains(got, `"id":99`); got = recv() {
		t.Errorf("an answer the proxy should not have let through: %s", clip(got))
	}
	if calls := d.serverCalls(t); reached(calls, "delete_notes") {
		t.Errorf("the denied tool ran: %v", calls)
	}
}
