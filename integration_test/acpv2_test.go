//go:build linux

package integration

import (
	"strings"
	"testing"
)

// The tests in this file pin ACP v2 (draft) permission requests, as
// claude-agent-acp 0.101 serves them to an editor that asks for
// protocolVersion 2: {sessionId, title, description?, subject: {type:
// "tool_call", toolCall} | {type: "command", command, cwd, ...} | a future
// type, options}. Both versions are read into the same request the rules
// decide; an unknown subject is asked; an answer the broker cannot read as
// a choice of an offered option approves nothing; and initialize is relayed
// as it is, whichever version either side asks for.

// v2Init is the initialize of a v2 editor (v2 names the client's members
// info and capabilities).
const v2Init = `{"protocolVersion":2,"info":{"name":"zed","version":"0.300.0"},"capabilities":{"auth":{"terminal":{}}}}`

// claudeV2Options are claude-agent-acp 0.101's options for a Bash request.
const claudeV2Options = `[{"optionId":"allow-once","name":"Yes","kind":"allow_once"},{"optionId":"reject","name":"No","kind":"reject_once"}]`

// v2Permission is a v2 session/request_permission of sess_1.
func v2Permission(id, title, subject, options string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"session/request_permission","params":{"sessionId":"sess_1","title":` + title + `,"subject":` + subject + `,"options":` + options + `}}`
}

// claudeV2Bash is what claude-agent-acp 0.101 sends on v2 for a Bash call:
// the tool call announced with one tool_call_update (v2 has no tool_call),
// then the request whose subject carries the toolCallId, title and
// rawInput, and the decision reason as the description.
func claudeV2Bash(id, toolCallID, command string) (announce, req string) {
	c := jsonQuote(command)
	announce = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"toolCallId":"` + toolCallID + `","name":"Bash","status":"pending","rawInput":{"command":` + c + `,"description":"Run it"},"title":` + c + `,"kind":"execute","content":[],"locations":[],"sessionUpdate":"tool_call_update"}}}`
	req = `{"jsonrpc":"2.0","id":` + id + `,"method":"session/request_permission","params":{"sessionId":"sess_1","title":` + c + `,"description":"Reason: this command needs approval","subject":{"type":"tool_call","toolCall":{"toolCallId":"` + toolCallID + `","title":` + c + `,"rawInput":{"command":` + c + `,"description":"Run it"}}},"options":` + claudeV2Options + `}}`
	return announce, req
}

func jsonQuote(s string) string { return `"` + jsonText(s) + `"` }

// TestACPv2PermissionRequests: v2 requests are allowed, denied and asked
// as the same v1 requests are.
func TestACPv2PermissionRequests(t *testing.T) {
	d := startDecider(t, deciderOptions{rules: decideRules, initialize: v2Init})
	d.noisy = true
	bash := func(id, tc, command string) string {
		announce, req := claudeV2Bash(id, tc, command)
		d.AgentToEditor(announce)
		return req
	}
	cmd := func(command, cwd string) string {
		return `{"type":"command","command":` + jsonQuote(command) + `,"cwd":"` + cwd + `"}`
	}
	steps := []struct {
		name string
		f    func()
	}{
		// The shape claude-agent-acp 0.101 sends.
		{"claude_tool_call_allowed", func() { d.decided(bash("1", "toolu_1", "git status"), "allow-once") }},
		{"claude_tool_call_denied", func() { d.decided(bash("2", "toolu_2", "git push --force origin main"), "reject") }},
		{"claude_tool_call_asked", func() { d.asked(bash("3", "toolu_3", "rm -rf build"), answer("3", "allow-once")) }},
		{"subject_disagrees_with_the_announcement", func() {
			announce, _ := claudeV2Bash("0", "toolu_4", "npm install left-pad")
			d.AgentToEditor(announce)
			_, req := claudeV2Bash("4", "toolu_4", "git status")
			d.decided(req, "reject")
		}},
		{"tool_call_subject_edit", func() {
			d.decided(v2Permission("5", `"Edit src/a.go"`, `{"type":"tool_call","toolCall":{"toolCallId":"toolu_5","kind":"edit","title":"Edit","locations":[{"path":"$CWD/src/a.go"}]}}`, claudeV2Options), "allow-once")
			d.decided(v2Permission("6", `"Edit gen/x.go"`, `{"type":"tool_call","toolCall":{"toolCallId":"toolu_6","kind":"edit","title":"Edit","locations":[{"path":"$CWD/gen/x.go"}]}}`, claudeV2Options), "reject")
			d.asked(v2Permission("7", `"Read ~/.ssh/id_rsa"`, `{"type":"tool_call","toolCall":{"toolCallId":"toolu_7","kind":"read","title":"Read","locations":[{"path":"$HOME/.ssh/id_rsa"}]}}`, claudeV2Options), answer("7", "reject"))
		}},
		// claude-agent-acp 0.101's v2 Edit: the diff names its file in
		// changes (v2 form), and every change is a write, whatever the kind.
		{"v2_diff", func() {
			edit := func(id, kind, path string) string {
				d.AgentToEditor(d.expand(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"toolCallId":"toolu_` + id + `","name":"Edit","status":"pending","title":"Edit","kind":"` + kind + `","rawInput":{"file_path":"` + path + `","old_string":"a","new_string":"b"},"content":[{"type":"diff","changes":[{"operation":"modify","path":"` + path + `","fileType":"text"}],"patch":{"format":"git_patch","text":"--- a\n+++ b\n"}}],"sessionUpdate":"tool_call_update"}}}`))
				return v2Permission(id, `"Edit"`, `{"type":"tool_call","toolCall":{"toolCallId":"toolu_`+id+`","title":"Edit","rawInput":{"file_path":"`+path+`","old_string":"a","new_string":"b"}}}`, claudeV2Options)
			}
			d.decided(edit("60", "edit", "$CWD/src/a.go"), "allow-once")
			d.decided(edit("61", "edit", "$CWD/gen/a.go"), "reject")
			d.asked(edit("62", "read", "$HOME/.bashrc"), answer("62", "reject"))
			// A move writes both its paths (moving out of gen/ is denied
			// there); a change without a path is not understood.
			d.decided(v2Permission("63", `"Move"`, `{"type":"tool_call","toolCall":{"toolCallId":"toolu_63","kind":"read","title":"Move","content":[{"type":"diff","changes":[{"operation":"move","oldPath":"$CWD/gen/a.go","path":"$CWD/src/a.go"}]}]}}`, claudeV2Options), "reject")
			d.decided(v2Permission("64", `"Move"`, `{"type":"tool_call","toolCall":{"toolCallId":"toolu_64","kind":"edit","title":"Move","content":[{"type":"diff","changes":[{"operation":"move","oldPath":"$CWD/src/b.go","path":"$CWD/src/a.go"}]}]}}`, claudeV2Options), "allow-once")
			d.asked(v2Permission("65", `"Edit"`, `{"type":"tool_call","toolCall":{"toolCallId":"toolu_65","kind":"read","title":"Edit","content":[{"type":"diff","changes":[{"operation":"_future"}]}]}}`, claudeV2Options), answer("65", "reject"))
		}},
		// The command subject: a shell command run in cwd.
		{"command_subject_allowed", func() {
			d.decided(v2Permission("10", `"Run git status"`, cmd("git status", "$CWD"), claudeV2Options), "allow-once")
		}},
		{"command_subject_in_a_subdirectory", func() {
			d.decided(v2Permission("11", `"Run"`, cmd("git log --oneline", "$CWD/src"), claudeV2Options), "allow-once")
		}},
		{"command_subject_denied", func() {
			d.decided(v2Permission("12", `"Run"`, cmd("git status && git push --force origin main", "$CWD"), claudeV2Options), "reject")
		}},
		{"command_subject_asked", func() {
			d.asked(v2Permission("13", `"Run"`, cmd("rm -rf build", "$CWD"), claudeV2Options), answer("13", "reject"))
		}},
		{"command_subject_opaque", func() {
			d.asked(v2Permission("14", `"Run"`, cmd("sh -c \"$X\"", "$CWD"), claudeV2Options), answer("14", "reject"))
		}},
		{"command_subject_cwd_outside_the_session", func() {
			// A command rule covers the command, not running it in ~.
			d.asked(v2Permission("15", `"Run"`, cmd("git status", "$HOME"), claudeV2Options), answer("15", "reject"))
			d.asked(v2Permission("16", `"Run"`, cmd("cat .ssh/id_rsa", "$HOME"), claudeV2Options), answer("16", "reject"))
		}},
		{"command_subject_relative_cwd", func() {
			d.asked(v2Permission("17", `"Run"`, cmd("git status", "src"), claudeV2Options), answer("17", "reject"))
		}},
		{"command_subject_with_ids", func() {
			d.decided(v2Permission("18", `"Run"`, `{"type":"command","command":"ls -la","cwd":"$CWD","toolCallId":"toolu_18","terminalId":"term_1"}`, claudeV2Options), "allow-once")
		}},
		// What the broker cannot read is asked, never decided.
		{"unknown_subject_type", func() {
			d.asked(v2Permission("20", `"git status"`, `{"type":"_network","host":"example.com","command":"git status","cwd":"$CWD"}`, claudeV2Options), answer("20", "reject"))
			d.asked(v2Permission("21", `"git push --force origin main"`, `{"type":"file_write","path":"$CWD/src/a.go"}`, claudeV2Options), answer("21", "reject"))
		}},
		{"no_subject", func() {
			d.asked(`{"jsonrpc":"2.0","id":22,"method":"session/request_permission","params":{"sessionId":"sess_1","title":"git status","options":`+claudeV2Options+`}}`, answer("22", "reject"))
			d.asked(v2Permission("23", `"git status"`, `null`, claudeV2Options), answer("23", "reject"))
		}},
		{"malformed_subjects", func() {
			for i, subject := range []string{
				`{"toolCall":{"toolCallId":"x1","kind":"read","title":"Read"}}`,
				`{"type":"tool_call"}`,
				`{"type":"tool_call","toolCall":{"toolCallId":"x2","kind":"read"},"Type":"command"}`,
				`{"type":"command","command":"git status"}`,
				`{"type":"command","command":["git","status"],"cwd":"$CWD"}`,
				`{"type":"command","command":"git status","cwd":"$CWD","type":"_x"}`,
				`"tool_call"`,
			} {
				sid := itoa(30 + i)
				d.asked(v2Permission(sid, `"git status"`, subject, claudeV2Options), answer(sid, "reject"))
			}
		}},
		{"v1_and_v2_at_once", func() {
			d.asked(`{"jsonrpc":"2.0","id":40,"method":"session/request_permission","params":{"sessionId":"sess_1","title":"x","toolCall":{"toolCallId":"y1","kind":"read","title":"Read"},"subject":{"type":"command","command":"rm -rf ~","cwd":"$CWD"},"options":`+claudeV2Options+`}}`, answer("40", "reject"))
		}},
		{"a_title_that_is_not_a_string", func() {
			d.asked(v2Permission("41", `{"text":"x"}`, cmd("git status", "$CWD"), claudeV2Options), answer("41", "reject"))
		}},
	}
	for _, s := range steps {
		if !d.step(t, s.name, s.f) {
			return
		}
	}
	// A subject naming one of the broker's own tool calls is refused.
	if !d.step(t, "broker_tool_call_id", func() {
		for i, subject := range []string{
			`{"type":"tool_call","toolCall":{"toolCallId":"acp-broker-terminal-1","kind":"read","title":"Read"}}`,
			`{"type":"command","command":"ls","cwd":"$CWD","toolCallId":"acp-broker-write-2"}`,
		} {
			sid := itoa(50 + i)
			req := d.expand(v2Permission(sid, `"x"`, subject, claudeV2Options))
			mark := d.marker()
			d.AgentSend(req, mark)
			d.EditorExpect(mark)
			expectError(d.t, d.AgentRecv(), sid, -32600)
		}
	}) {
		return
	}
	d.finish()
}

// TestACPv2UnknownOutcomeIsNoApproval: the editor's answer to a v2 request
// is relayed as it is, and one that is not exactly the choice of an offered
// option (a future outcome, a cancelled that v2 may mean as declined) is no
// approval: nothing is remembered from it, and it covers neither the
// terminal nor the write the agent asked about.
func TestACPv2UnknownOutcomeIsNoApproval(t *testing.T) {
	d := startDecider(t, deciderOptions{rules: decideRules, initialize: v2Init})
	d.noisy = true
	options := `[{"optionId":"allow-always","name":"Always","kind":"allow_always"},{"optionId":"allow-once","name":"Yes","kind":"allow_once"},{"optionId":"reject","name":"No","kind":"reject_once"}]`
	rm := func(id string) string {
		return v2Permission(id, `"rm -rf build"`, `{"type":"command","command":"rm -rf build","cwd":"$CWD"}`, options)
	}
	for i, outcome := range []string{
		`{"outcome":"_approved_by_policy","optionId":"allow-always"}`,
		`{"outcome":"approved","optionId":"allow-once"}`,
		`{"outcome":"cancelled"}`,
		`{"outcome":"cancelled","optionId":"allow-always"}`,
		`{"outcome":"selected","optionId":"allow-everything"}`,
		`{"outcome":"selected","optionId":"allow-always","optionId":"reject"}`,
	} {
		id := itoa(10 + i)
		if !d.step(t, "outcome_"+id, func() {
			d.asked(rm(id), `{"jsonrpc":"2.0","id":`+id+`,"result":{"outcome":`+outcome+`}}`)
			// The terminal the agent asked about is not covered: the
			// broker asks about it itself; reject.
			term := d.expand(`{"jsonrpc":"2.0","id":"t` + id + `","method":"terminal/create","params":{"sessionId":"sess_1","command":"rm","args":["-rf","build"],"cwd":"$CWD"}}`)
			d.AgentSend(term)
			if got := d.EditorRecv(); got == term {
				d.t.Fatalf("the terminal was forwarded as approved by %s", outcome)
			}
			d.drainOwnPrompt(`"t` + id + `"`)
		}) {
			return
		}
	}
	// Nothing was remembered: the same request is asked again. Chosen
	// exactly, allow-once covers the terminal that follows.
	if !d.step(t, "nothing_remembered_and_a_real_choice_covers", func() {
		d.asked(rm("30"), answer("30", "allow-once"))
		term := d.expand(`{"jsonrpc":"2.0","id":"t30","method":"terminal/create","params":{"sessionId":"sess_1","command":"rm","args":["-rf","build"],"cwd":"$CWD"}}`)
		d.AgentToEditor(term)
		d.EditorToAgent(`{"jsonrpc":"2.0","id":"t30","result":{"terminalId":"term-30"}}`)
	}) {
		return
	}
	d.finish()
	audit := auditLines(t, d.audit)
	for _, l := range audit {
		if r, ok := l["remembered"].(string); ok && !strings.HasPrefix(r, "nothing") {
			t.Errorf("an answer was remembered: %v", l)
		}
	}
}

// TestInitializeProtocolVersionUntouched: whichever protocolVersion the
// editor asks for and the agent answers with, initialize and its answer
// pass byte for byte; and a v2 connection's children are governed without
// the v1 capability (subagents are baseline in v2).
func TestInitializeProtocolVersionUntouched(t *testing.T) {
	for _, c := range []struct{ name, asked, answered string }{
		{"v2_to_v2", v2Init, `{"protocolVersion":2,"info":{"name":"claude-agent-acp","version":"0.101.0"},"capabilities":{"session":{}},"authMethods":[]}`},
		{"v2_negotiated_down", v2Init, `{"protocolVersion":1,"agentCapabilities":{},"agentInfo":{"name":"claude-agent-acp","version":"0.101.0"}}`},
		{"v1_to_v1", `{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}`, `{"protocolVersion":1,"agentCapabilities":{}}`},
		{"future_version", `{"protocolVersion":3,"info":{"name":"x","version":"1"}}`, `{"protocolVersion":  2.0 ,"info":{"name":"y","version":"1"}}`},
		{"string_version", `{"protocolVersion":"2","info":{"name":"x","version":"1"}}`, `{"protocolVersion":"2"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startFake(t, options{broker: true})
			s.EditorToAgent(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":` + c.asked + `}`)
			s.AgentToEditor(`{"jsonrpc":"2.0","id":0,"result":` + c.answered + `}`)
			s.Finish()
		})
	}
	t.Run("v2_children_are_governed", func(t *testing.T) {
		d := startDecider(t, deciderOptions{rules: decideRules, initialize: v2Init})
		d.AgentToEditor(subagentUpdate("sess_1", "v2kid", ""))
		d.decided(childPermission("v2kid", "1", claudeChildBash("k1", "git status"), claudeOptions), "allow")
		d.decided(`{"jsonrpc":"2.0","id":2,"method":"session/request_permission","params":{"sessionId":"v2kid","title":"git push","subject":{"type":"command","command":"git push --force origin main","cwd":"$CWD"},"options":`+claudeV2Options+`}}`, "reject")
		d.finish()
	})
}
