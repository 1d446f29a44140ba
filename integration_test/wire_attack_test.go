//go:build linux

package integration

import (
	"fmt"
	"strings"
	"testing"
)

// The tests in this file attack the broker's reading of the agent's wire
// below the envelope: messages a peer may read differently from the broker.

// TestAmbiguousUpdateIsNeverDecided: a session/update that repeats its
// sessionId, update, sessionUpdate or toolCallId, or gives one in another
// letter case or spelling, may change a tool call for the editor (Go's
// encoding/json and JSON.parse keep the last member, encoding/json folds
// case) that the broker, reading the first, does not see changed: here the
// announced "git status" becomes a denied "npm install". A permission
// request repeating the harmless announcement is then never decided.
func TestAmbiguousUpdateIsNeverDecided(t *testing.T) {
	d := startDecider(t, deciderOptions{rules: decideRules})
	announce := func(id string) string {
		return toolCallUpdate("tool_call", `"toolCallId":"`+id+`","title":"git status","kind":"execute","status":"pending","rawInput":{"command":"git status"}`)
	}
	install := `"rawInput":{"command":"npm install left-pad"},"title":"npm install left-pad"`
	chunk := `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}`
	update := func(params string) string {
		return `{"jsonrpc":"2.0","method":"session/update","params":` + params + `}`
	}
	ask := func(n, id string) string {
		return permission(n, `{"toolCallId":"`+id+`","title":"git status","kind":"execute","rawInput":{"command":"git status"}}`, claudeOptions)
	}
	cases := []struct{ name, id, update string }{
		{"session_update_twice", "w1", update(`{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"},"sessionUpdate":"tool_call_update","toolCallId":"w1",` + install + `}}`)},
		{"session_update_in_another_case", "w2", update(`{"sessionId":"sess_1","update":{"SessionUpdate":"tool_call_update","toolCallId":"w2",` + install + `}}`)},
		{"update_beside_Update", "w3", update(`{"sessionId":"sess_1","update":` + chunk + `,"Update":{"sessionUpdate":"tool_call_update","toolCallId":"w3",` + install + `}}`)},
		{"update_twice", "w4", update(`{"sessionId":"sess_1","update":` + chunk + `,"update":{"sessionUpdate":"tool_call_update","toolCallId":"w4",` + install + `}}`)},
		{"session_id_twice", "w5", update(`{"sessionId":"elsewhere","update":{"sessionUpdate":"tool_call_update","toolCallId":"w5",` + install + `},"sessionId":"sess_1"}`)},
		{"session_id_in_another_case", "w6", update(`{"sessionId":"elsewhere","SessionId":"sess_1","update":{"sessionUpdate":"tool_call_update","toolCallId":"w6",` + install + `}}`)},
		{"tool_call_id_twice", "w7", update(`{"sessionId":"sess_1","update":{"sessionUpdate":"tool_call_update","toolCallId":"decoy7","toolCallId":"w7",` + install + `}}`)},
		{"tool_call_id_in_another_case", "w8", update(`{"sessionId":"sess_1","update":{"sessionUpdate":"tool_call_update","toolCallId":"decoy8","ToolCallId":"w8",` + install + `}}`)},
		{"tool_call_id_escaped_twice", "w9", update(`{"sessionId":"sess_1","update":{"sessionUpdate":"tool_call_update","toolCallId":"decoy9","toolCall\u0049d":"w9",` + install + `}}`)},
		{"tool_call_id_with_the_long_s", "w10", update(`{"ſessionId":"sess_1","sessionId":"elsewhere","update":{"sessionUpdate":"tool_call_update","toolCallId":"w10",` + install + `}}`)},
	}
	var play []decideCase
	for _, c := range cases {
		n := strings.TrimPrefix(c.id, "w")
		play = append(play, decideCase{
			name:   c.name,
			before: []string{announce(c.id), c.update},
			req:    ask(n, c.id),
			answer: answer(n, "reject"),
		})
	}
	// What the editor reads of a plain update is what the broker reads:
	// the same change, unambiguous, is caught as a disagreement.
	play = append(play, decideCase{
		name:   "plain_update_is_read",
		before: []string{announce("w11"), update(`{"sessionId":"sess_1","update":{"sessionUpdate":"tool_call_update","toolCallId":"w11",` + install + `}}`)},
		req:    ask("11", "w11"),
		option: "reject",
	}, decideCase{
		name:   "unchanged_announcement_is_decided",
		before: []string{announce("w12")},
		req:    ask("12", "w12"),
		option: "allow",
	})
	d.play(t, play)
}

// TestNumericIDSpellings: ids equal as numbers are one id, however the
// agent spells them (2, 2.0, 2e0, 20e-1): a JavaScript editor answers a
// request sent as 2e0 with id 2, and an agent reading numbers takes that
// answer for its request. An editor answer in another spelling is never
// a second answer, and a second request under an id still in use in
// another spelling is refused.
func TestNumericIDSpellings(t *testing.T) {
	for _, spelling := range []string{"2e0", "2.0", "20e-1", "2.000000000000000001"} {
		t.Run("cancel_"+spelling, func(t *testing.T) {
			s, _ := channelBroker(t, "")
			s.AgentToEditor(strings.Replace(testPermission(2, "make build"), `"id":2,`, `"id":`+spelling+`,`, 1))
			// The editor cancels the turn, and its answer, made before
			// it read the cancel, races it: the agent gets cancelled
			// once, and nothing else.
			s.EditorSend(sessCancel, allowAlways)
			s.AgentExpect(sessCancel)
			s.AgentExpect(strings.Replace(cancelled2, `"id":2,`, `"id":`+spelling+`,`, 1))
			noMoreForTheAgent(t, s)
			s.Finish()
		})
	}
	t.Run("reused_while_open", func(t *testing.T) {
		s, _ := channelBroker(t, "")
		s.AgentToEditor(testPermission(2, "make build"))
		second := strings.Replace(testPermission(3, "rm -rf build"), `"id":3,`, `"id":2.0,`, 1)
		s.AgentSend(second, marker)
		expectError(t, s.AgentRecv(), "2.0", -32600)
		s.EditorExpect(marker)
		s.EditorToAgent(rejectOnce)
		noMoreForTheAgent(t, s)
		s.Finish()
	})
}

// TestRepeatedOptionIDNeverAllows: a request offering one optionId twice,
// as "Always allow" and as "Reject", shows the human two buttons with one
// id: whichever the human chose, the answer names that id. The broker must
// not take it for the first option with that id: a "Reject" must not be
// remembered as "always allow", nor cover the terminal the agent then
// creates.
func TestRepeatedOptionIDNeverAllows(t *testing.T) {
	twice := `[{"optionId":"r","name":"Always allow","kind":"allow_always"},{"optionId":"allow-once","name":"Allow","kind":"allow_once"},{"optionId":"r","name":"Reject","kind":"reject_once"}]`
	offered := `[{"optionId":"allow-once","name":"Allow","kind":"allow_once"},{"optionId":"allow-always","name":"Always allow","kind":"allow_always"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]`
	req := strings.Replace(testPermission(2, "make build"), offered, twice, 1)
	if req == testPermission(2, "make build") {
		t.Fatal("test bug: options not replaced")
	}
	reject := `{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"selected","optionId":"r"}}}`
	t.Run("not_remembered", func(t *testing.T) {
		s := rememberSession(t, t.TempDir(), t.TempDir())
		s.AgentToEditor(req)
		s.EditorToAgent(reject)
		again := testPermission(3, "make build")
		s.AgentSend(again, marker)
		if got := s.EditorRecv(); got != again {
			t.Fatalf("the human's Reject was remembered as an allow: the editor got %s, not the request", clip(got))
		}
		s.EditorExpect(marker)
		s.EditorToAgent(strings.Replace(rejectOnce, `"id":2`, `"id":3`, 1))
		s.Finish()
	})
	t.Run("covers_no_terminal", func(t *testing.T) {
		s := rememberSession(t, t.TempDir(), t.TempDir())
		s.AgentToEditor(req)
		s.EditorToAgent(reject)
		term := `{"jsonrpc":"2.0","id":4,"method":"terminal/create","params":{"sessionId":"s1","command":"make","args":["build"]}}`
		s.AgentSend(term, marker)
		if got := s.EditorRecv(); got == term {
			t.Fatal("the human's Reject covered the terminal: it was forwarded")
		}
	})
}

// TestOddEditorAnswersAreNoApproval: an editor answer the agent may not
// read as "selected this option" (the outcome in another letter case,
// repeated, unknown, an error, an option not offered) is relayed as it
// is, but is no approval for the broker: nothing is remembered and the
// same request is asked again.
func TestOddEditorAnswersAreNoApproval(t *testing.T) {
	for name, result := range map[string]string{
		"Outcome":          `"result":{"Outcome":{"outcome":"selected","optionId":"allow-always"}}`,
		"inner_Outcome":    `"result":{"outcome":{"Outcome":"selected","optionId":"allow-always"}}`,
		"OptionId":         `"result":{"outcome":{"outcome":"selected","OptionId":"allow-always"}}`,
		"outcome_twice":    `"result":{"outcome":{"outcome":"cancelled"},"outcome":{"outcome":"selected","optionId":"allow-always"}}`,
		"optionId_twice":   `"result":{"outcome":{"outcome":"selected","optionId":"reject","optionId":"allow-always"}}`,
		"unknown_outcome":  `"result":{"outcome":{"outcome":"Selected","optionId":"allow-always"}}`,
		"cancelled_option": `"result":{"outcome":{"outcome":"cancelled","optionId":"allow-always"}}`,
		"not_offered":      `"result":{"outcome":{"outcome":"selected","optionId":"allow-forever"}}`,
		"error":            `"error":{"code":-32000,"message":"no","data":{"outcome":{"outcome":"selected","optionId":"allow-always"}}}`,
		"optionId_number":  `"result":{"outcome":{"outcome":"selected","optionId":1}}`,
		"outcome_is_array": `"result":{"outcome":[{"outcome":"selected","optionId":"allow-always"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			s := rememberSession(t, t.TempDir(), t.TempDir())
			s.AgentToEditor(testPermission(2, "make build"))
			s.EditorToAgent(`{"jsonrpc":"2.0","id":2,` + result + `}`)
			again := testPermission(3, "make build")
			s.AgentSend(again, marker)
			if got := s.EditorRecv(); got != again {
				t.Fatalf("the answer was taken for an approval: the editor got %s, not the request", clip(got))
			}
			s.EditorExpect(marker)
			s.EditorToAgent(strings.Replace(rejectOnce, `"id":2`, `"id":3`, 1))
			s.Finish()
		})
	}
}

// TestCancelReachesAmbiguousSessions: a permission request that names its
// session twice, or in another letter case ("SessionId"), is the editor's
// session's to a Go editor: session/cancel of that session answers it
// cancelled at once, and an allow the editor sent before it read the
// cancel never reaches the agent after it.
func TestCancelReachesAmbiguousSessions(t *testing.T) {
	for name, sessionID := range map[string]string{
		"twice":         `"sessionId":"other","sessionId":"s1"`,
		"another_case":  `"SessionId":"s1"`,
		"escaped_twice": `"sessionId":"other","session\u0049d":"s1"`,
		"long_s":        `"sessionId":"other","ſessionId":"s1"`,
	} {
		t.Run(name, func(t *testing.T) {
			s, _ := channelBroker(t, "")
			s.AgentToEditor(strings.Replace(testPermission(2, "make build"), `"sessionId":"s1"`, sessionID, 1))
			s.EditorSend(sessCancel, allowOnce)
			s.AgentExpect(sessCancel)
			if got := s.AgentRecv(); got != cancelled2 {
				t.Fatalf("after session/cancel the agent got %s, want its request cancelled", clip(got))
			}
			noMoreForTheAgent(t, s)
			s.Finish()
		})
	}
}

// TestEarlierRequestIsNoAnnouncement: what an earlier permission request
// said of a tool call (another command than the agent announced) does not
// stand in for the announcement when a later request about the same tool
// call says less.
func TestEarlierRequestIsNoAnnouncement(t *testing.T) {
	d := startDecider(t, deciderOptions{rules: decideRules})
	install := toolCallUpdate("tool_call", `"toolCallId":"e1","title":"npm install left-pad","kind":"execute","status":"pending","rawInput":{"command":"npm install left-pad"}`)
	d.play(t, []decideCase{
		{
			name:   "disagreeing_request",
			before: []string{install},
			req:    permission(`1`, `{"toolCallId":"e1","title":"git status","kind":"execute","rawInput":{"command":"git status"}}`, claudeOptions),
			option: "reject",
		},
		{
			name:   "then_one_saying_less",
			req:    permission(`2`, `{"toolCallId":"e1","title":"git status"}`, claudeOptions),
			option: "reject",
		},
		{
			name:   "then_only_the_id",
			req:    permission(`3`, `{"toolCallId":"e1"}`, claudeOptions),
			option: "reject",
		},
		{
			// A request saying the tool call completed does not end
			// what the agent announced of it.
			name:   "a_request_saying_completed",
			req:    permission(`4`, `{"toolCallId":"e1","status":"completed"}`, claudeOptions),
			option: "reject",
		},
		{
			name:   "then_another_command",
			req:    permission(`5`, `{"toolCallId":"e1","title":"git status","kind":"execute","rawInput":{"command":"git status"}}`, claudeOptions),
			option: "reject",
		},
	})
}

// TestToolCallIDSpellings: a tool call id given as a number (1 is the
// property "1" to a JavaScript editor) or empty in the request or in the
// announcement never lets a request stand apart from what was announced.
func TestToolCallIDSpellings(t *testing.T) {
	d := startDecider(t, deciderOptions{rules: decideRules})
	install := func(id string) string {
		return toolCallUpdate("tool_call", `"toolCallId":`+id+`,"title":"npm install left-pad","kind":"execute","status":"pending","rawInput":{"command":"npm install left-pad"}`)
	}
	gitStatus := func(n, id string) string {
		return permission(n, `{"toolCallId":`+id+`,"title":"git status","kind":"execute","rawInput":{"command":"git status"}}`, claudeOptions)
	}
	d.play(t, []decideCase{
		{name: "request_id_a_number", before: []string{install(`"1"`)}, req: gitStatus(`1`, `1`), answer: answer(`1`, "reject")},
		{name: "announced_id_a_number", before: []string{install(`2`)}, req: gitStatus(`2`, `"2"`), answer: answer(`2`, "reject")},
		{name: "announced_id_a_float", before: []string{install(`3.0`)}, req: gitStatus(`3`, `"3"`), answer: answer(`3`, "reject")},
		{name: "empty_id", before: []string{install(`""`)}, req: gitStatus(`4`, `""`), answer: answer(`4`, "reject")},
		{name: "plain_id_is_decided", req: gitStatus(`5`, `"fresh"`), option: "allow"},
	})
}

// TestToolCallMembersInAnotherCase: a tool call member in another letter
// case ("RawInput", "Kind", "Locations", "Content") is the member to a Go
// editor (acp-go-sdk folds case) and nothing to the broker: in an
// announcement it would hide what the agent announced, in a request what
// the editor shows. Either way the request is not decided.
func TestToolCallMembersInAnotherCase(t *testing.T) {
	d := startDecider(t, deciderOptions{rules: decideRules})
	gitStatus := func(n, id string) string {
		return permission(n, `{"toolCallId":"`+id+`","title":"git status","kind":"execute","rawInput":{"command":"git status"}}`, claudeOptions)
	}
	edit := `"kind":"edit","title":"Edit src/a.go","locations":[{"path":"$CWD/src/a.go"}],"rawInput":{"file_path":"$CWD/src/a.go"}`
	d.play(t, []decideCase{
		{
			name:   "announced_RawInput",
			before: []string{toolCallUpdate("tool_call", `"toolCallId":"k1","title":"npm install left-pad","kind":"execute","status":"pending","RawInput":{"command":"npm install left-pad"}`)},
			req:    gitStatus(`1`, "k1"),
			answer: answer(`1`, "reject"),
		},
		{
			name:   "updated_Kind_and_Locations",
			before: []string{toolCallUpdate("tool_call", `"toolCallId":"k2",`+edit), toolCallUpdate("tool_call_update", `"toolCallId":"k2","Locations":[{"path":"$HOME/.bashrc"}]`)},
			req:    permission(`2`, `{"toolCallId":"k2",`+edit+`}`, claudeOptions),
			answer: answer(`2`, "reject"),
		},
		{
			name:   "request_Content",
			req:    permission(`3`, `{"toolCallId":"k3",`+edit+`,"Content":[{"type":"diff","path":"$HOME/.bashrc","newText":"x"}]}`, claudeOptions),
			answer: answer(`3`, "reject"),
		},
		{
			name:   "request_without_id_Locations",
			req:    permission(`4`, `{`+edit+`,"Locations":[{"path":"$HOME/.bashrc"}]}`, claudeOptions),
			answer: answer(`4`, "reject"),
		},
		{
			name:   "exact_members_are_decided",
			req:    permission(`5`, `{"toolCallId":"k5",`+edit+`}`, claudeOptions),
			option: "allow",
		},
	})
}

// TestRequestAboutAFinishedToolCall: once the agent reports a tool call
// completed the broker forgets what it announced; a request about it
// afterwards could say anything and is not decided. A new announcement
// under the id is judged as any other.
func TestRequestAboutAFinishedToolCall(t *testing.T) {
	d := startDecider(t, deciderOptions{rules: decideRules})
	install := toolCallUpdate("tool_call", `"toolCallId":"f1","title":"npm install left-pad","kind":"execute","status":"pending","rawInput":{"command":"npm install left-pad"}`)
	gitStatus := func(n string) string {
		return permission(n, `{"toolCallId":"f1","title":"git status","kind":"execute","rawInput":{"command":"git status"}}`, claudeOptions)
	}
	// 1,024 more unfinished tool calls push the oldest out of the
	// tracker.
	flood := []string{toolCallUpdate("tool_call", `"toolCallId":"ev","title":"npm install left-pad","kind":"execute","status":"pending","rawInput":{"command":"npm install left-pad"}`)}
	for i := range 1024 {
		flood = append(flood, toolCallUpdate("tool_call", fmt.Sprintf(`"toolCallId":"x%d","title":"ls","kind":"execute","status":"pending"`, i)))
	}
	d.play(t, []decideCase{
		{name: "completed", before: []string{install, toolCallUpdate("tool_call_update", `"toolCallId":"f1","status":"completed"`)}, req: gitStatus(`1`), answer: answer(`1`, "reject")},
		{name: "failed", before: []string{install, toolCallUpdate("tool_call_update", `"toolCallId":"f1","status":"failed"`)}, req: gitStatus(`2`), answer: answer(`2`, "reject")},
		{name: "asked_again", req: gitStatus(`3`), answer: answer(`3`, "reject")},
		{name: "announced_anew", before: []string{toolCallUpdate("tool_call", `"toolCallId":"f1","title":"git status","kind":"execute","status":"pending","rawInput":{"command":"git status"}`)}, req: gitStatus(`4`), option: "allow"},
		{name: "pushed_out_by_a_flood", before: flood, req: permission(`5`, `{"toolCallId":"ev","title":"git status","kind":"execute","rawInput":{"command":"git status"}}`, claudeOptions), answer: answer(`5`, "reject")},
	})
}
