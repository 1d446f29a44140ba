//go:build linux

package integration

import (
	"fmt"
	"strings"
	"testing"
)

// The tests in this file pin that no answer a human gives through the
// broker takes later requests out of its sight: an "always" the human
// chooses (kind allow_always, or an option whose reach goes beyond the
// request) reaches the agent as the request's own once-option, and the
// broker remembers the answer itself. Relayed as chosen, it would make the
// agent remember it (Codex writes prefix_rule(...) to its rules file,
// Claude Code a rule to .claude/settings.local.json, Gemini CLI stops asking
// for the session) and its later requests would never reach the broker's
// deny and ask rules.

// answeredAs forwards req to the editor, has the editor choose chosen, and
// requires the agent to get sent instead.
func (d *decider) answeredAs(req, chosen, sent string) {
	d.t.Helper()
	d.forwarded(req)
	id := requestID(d.t, d.expand(req))
	d.EditorSend(answer(id, chosen))
	d.AgentExpect(answer(id, sent))
}

// requireSentAudit requires the audit line of a tool call to say what the
// human chose and what the agent was sent.
func requireSentAudit(t *testing.T, audit, toolCallID, chosen, sent string) {
	t.Helper()
	line := auditLine(t, audit, toolCallID)
	wantChosen := chosen
	if chosen == sent {
		wantChosen = "<nil>" // no chosen member: what was chosen was sent
	}
	if fmt.Sprint(line["option"]) != sent || fmt.Sprint(line["chosen"]) != wantChosen {
		t.Errorf("audit line of %s: option %v, chosen %v; want option %s, chosen %s", toolCallID, line["option"], line["chosen"], sent, wantChosen)
	}
}

const (
	codexMCPOptions = `[{"optionId":"allow_once","name":"Allow","kind":"allow_once"},{"optionId":"allow_session","name":"Allow for this session","kind":"allow_always"},{"optionId":"allow_always","name":"Always allow","kind":"allow_always"},{"optionId":"cancel","name":"Cancel","kind":"reject_once"}]`
	// geminiSaveOptions is gemini-cli's exec list with permanent tool
	// approval enabled.
	geminiSaveOptions = `[{"optionId":"proceed_always","name":"Allow for this session","kind":"allow_always"},{"optionId":"proceed_always_and_save","name":"Allow this command for all future sessions","kind":"allow_always"},{"optionId":"proceed_once","name":"Allow","kind":"allow_once"},{"optionId":"cancel","name":"Reject","kind":"reject_once"}]`
)

// TestAlwaysReachesTheAgentAsOnce: every agent's "always" options, chosen in
// the editor, reach the agent as that request's allow_once option, and the
// audit line says both. Rejects, "always" ones too, reach it as chosen.
func TestAlwaysReachesTheAgentAsOnce(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{})
	metaOption := func(id, kind, changes string) string {
		return fmt.Sprintf(`{"optionId":%q,"name":"Yes","kind":%q,"_meta":{"permission":{"version":1,"changes":%s}}}`, id, kind, changes)
	}
	cases := []struct {
		name, toolCallID, req, chosen, sent string
	}{
		{"codex26_execpolicy_amendment", "call_e1", permission(`"e1"`, codexCommand("e1", "touch notes.txt"), codex2Options("touch", false)), "accept_execpolicy_amendment", "allow_once"},
		{"codex26_for_the_session", "call_e2", permission(`"e2"`, codexCommand("e2", "cargo build"), codex2Options("cargo build", true)), "allow_for_session", "allow_once"},
		{"codex26_network_amendment", "call_e3", permission(`"e3"`, codexNetwork("e3", "curl https://example.com", "example.com"), codexNetworkOptions), "apply_network_policy_amendment:0", "allow_once"},
		{"codex26_network_for_the_conversation", "call_e4", permission(`"e4"`, codexNetwork("e4", "curl https://example.org", "example.org"), codexNetworkOptions), "allow_for_session", "allow_once"},
		{"codex26_mcp_for_the_session", "toolu_e5", permission(`"e5"`, `{"toolCallId":"toolu_e5","title":"mcp__github__get_issue","kind":"other","rawInput":{"issue_number":7}}`, codexMCPOptions), "allow_session", "allow_once"},
		{"codex26_mcp_always", "toolu_e6", permission(`"e6"`, `{"toolCallId":"toolu_e6","title":"mcp__github__list_issues","kind":"other","rawInput":{"state":"open"}}`, codexMCPOptions), "allow_always", "allow_once"},
		{"codex26_an_allow_once_that_writes_a_rule", "call_e7", permission(`"e7"`, codexCommand("e7", "make lint"), "["+metaOption("allow_rule", "allow_once", `[{"type":"policy_rule"}]`)+","+metaOption("allow_this", "allow_once", `[{"type":"grant"}]`)+","+codexCancel+"]"), "allow_rule", "allow_this"},
		{"codex26_an_always_for_the_turn", "call_e8", permission(`"e8"`, codexCommand("e8", "make test"), "["+codexAllowOnce+","+metaOption("allow_turn", "allow_always", `[{"type":"grant","lifetime":{"scope":"turn"}}]`)+","+codexCancel+"]"), "allow_turn", "allow_once"},
		{"codex_rust_for_the_session", "r1", permission(`"r1"`, `{"toolCallId":"r1","title":"go build ./...","kind":"execute","rawInput":{"command":["/bin/bash","-lc","go build ./..."],"cwd":"$CWD"}}`, codexOptions), "approved-for-session", "approved"},
		{"codex_rust_execpolicy_amendment", "r2", permission(`"r2"`, `{"toolCallId":"r2","title":"go vet ./...","kind":"execute","rawInput":{"command":["/bin/bash","-lc","go vet ./..."],"cwd":"$CWD"}}`, codexOptions), "approved-execpolicy-amendment", "approved"},
		{"claude_allow_with_updates", "c1", permission(`"c1"`, execCall("c1", "make build"), claudeNewOptions), "allow-with-updates", "allow-once"},
		{"claude_older_always", "c2", permission(`"c2"`, execCall("c2", "make check"), claudeOptions), "allow_always", "allow"},
		{"gemini_for_the_session", "run_shell_command-g1", permission(`"g1"`, `{"toolCallId":"run_shell_command-g1","title":"make docs","kind":"execute","status":"pending","content":[]}`, geminiOptions), "proceed_always", "proceed_once"},
		{"gemini_for_all_future_sessions", "run_shell_command-g2", permission(`"g2"`, `{"toolCallId":"run_shell_command-g2","title":"make dist","kind":"execute","status":"pending","content":[]}`, geminiSaveOptions), "proceed_always_and_save", "proceed_once"},
		{"gemini_mcp_server", "github_create_issue-g3", permission(`"g3"`, `{"toolCallId":"github_create_issue-g3","title":"create_issue (github MCP Server)","kind":"other","status":"pending","content":[]}`, geminiMCPOptions), "proceed_always_server", "proceed_once"},
		{"gemini_mcp_tool", "github_close_issue-g4", permission(`"g4"`, `{"toolCallId":"github_close_issue-g4","title":"close_issue (github MCP Server)","kind":"other","status":"pending","content":[]}`, geminiMCPOptions), "proceed_always_tool", "proceed_once"},
		{"a_reject_always_as_chosen", "call_n1", permission(`"n1"`, codexNetwork("n1", "curl https://evil.example", "evil.example"), codexNetworkOptions), "apply_network_policy_amendment:1", "apply_network_policy_amendment:1"},
		{"the_rust_adapters_reject_always_as_chosen", "r3", permission(`"r3"`, `{"toolCallId":"r3","title":"curl https://x.example","kind":"execute","rawInput":{"command":["/bin/bash","-lc","curl https://x.example"],"cwd":"$CWD"}}`, codexOptions), "network-policy-amendment-deny", "network-policy-amendment-deny"},
		{"a_once_as_chosen", "c3", permission(`"c3"`, execCall("c3", "make fmt"), claudeNewOptions), "allow-once", "allow-once"},
	}
	for _, c := range cases {
		if !d.step(t, c.name, func() { d.answeredAs(c.req, c.chosen, c.sent) }) {
			return
		}
	}
	d.finish()
	for _, c := range cases {
		requireSentAudit(t, d.audit, c.toolCallID, c.chosen, c.sent)
	}
}

// TestAlwaysIsRememberedByTheBrokerNotTheAgent: after a human's "always"
// (sent to the agent as once), the broker's own remembered entry answers the
// next request it covers, and a deny rule still denies a request of the same
// prefix: Codex's proposed prefix `touch` let a denied `touch` run without
// asking when the amendment reached Codex.
func TestAlwaysIsRememberedByTheBrokerNotTheAgent(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: "[[rule]]\ndecision = \"deny\"\ncommand = [\"touch codex-denied.txt\", \"git push --force *\"]\n"})
	d.answeredAs(permission(`"a1"`, codexCommand("a1", "touch notes.txt"), codex2Options("touch", false)), "accept_execpolicy_amendment", "allow_once")
	// The broker's entry answers the same command again.
	d.decided(permission(`"a2"`, codexCommand("a2", "touch notes.txt"), codex2Options("touch", false)), "allow_once")
	// The denied command of the same prefix is denied.
	d.decided(permission(`"a3"`, codexCommand("a3", "touch codex-denied.txt"), codex2Options("touch", false)), "cancel")

	d.answeredAs(permission(`"b1"`, execCall("b1", "git push origin main"), claudeNewOptions), "allow-with-updates", "allow-once")
	d.decided(permission(`"b2"`, execCall("b2", "git push origin feature"), claudeNewOptions), "allow-once")
	d.decided(permission(`"b3"`, execCall("b3", "git push --force origin main"), claudeNewOptions), "reject")

	d.answeredAs(permission(`"g1"`, `{"toolCallId":"run_shell_command-g1","title":"make docs","kind":"execute","status":"pending","content":[]}`, geminiOptions), "proceed_always", "proceed_once")
	d.liveOnly("gemini-cli's proceed_always is for the session: remembered for this session only")
	d.decided(permission(`"g2"`, `{"toolCallId":"run_shell_command-g2","title":"make docs","kind":"execute","status":"pending","content":[]}`, geminiOptions), "proceed_once")

	d.answeredAs(permission(`"s1"`, codexCommand("s1", "cargo test --release"), codex2Options("cargo test", true)), "allow_for_session", "allow_once")
	d.liveOnly("an answer remembered for this session only")
	d.decided(permission(`"s2"`, codexCommand("s2", "cargo test --workspace"), codex2Options("cargo test", true)), "allow_once")
	d.finish()
	if r, _ := auditLine(t, d.audit, "call_a1")["remembered"].(string); r == "" || strings.HasPrefix(r, "nothing") {
		t.Errorf("the amendment's audit line remembered %q, want the broker's entry", r)
	}
}

// TestAlwaysWithoutAOnceOption: a request whose options answer nothing for
// this request only (an always and a reject; Codex's sandbox grants, all
// for the turn or the session) is answered with the human's choice as it
// is, so the answer is not lost; the broker warns that the agent may
// remember it, on stderr and in the audit line.
func TestAlwaysWithoutAOnceOption(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{})
	d.noisy = true
	d.answeredAs(permission(`1`, execCall("t1", "make build"), `[{"optionId":"allow_always","name":"Always Allow","kind":"allow_always"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]`), "allow_always", "allow_always")
	d.answeredAs(permission(`"p1"`, `{"toolCallId":"call_p1","name":"request_permissions","kind":"other","status":"pending","title":"Additional sandbox permissions","rawInput":{"permissions":{"fileSystem":{"write":["$CWD/out"]}},"cwd":"$CWD"}}`,
		`[{"optionId":"allow_permissions_turn","name":"Yes, grant these permissions for this turn","kind":"allow_once"},{"optionId":"allow_permissions_session","name":"Yes, grant these permissions for this session","kind":"allow_always"},{"optionId":"reject_permissions","name":"No, continue without permissions","kind":"reject_once"}]`),
		"allow_permissions_turn", "allow_permissions_turn")
	d.finish()
	if text := d.stderrText(); strings.Count(text, "relayed an answer the agent remembers itself") != 2 {
		t.Errorf("stderr does not warn twice that the agent remembers the answer:\n%s", text)
	}
	for _, id := range []string{"t1", "call_p1"} {
		line := auditLine(t, d.audit, id)
		if r := fmt.Sprint(line["agent_remembers"]); !strings.Contains(r, "none offered answers only this one") {
			t.Errorf("audit line of %s: agent_remembers %q", id, r)
		}
	}
}

// TestSwitchModeAlwaysIsRelayedAsChosen: a switch_mode request is answered
// with the human's choice, whatever its kind: the mode it picks is the point
// of the answer (claude-agent-acp's ExitPlanMode offers the modes as
// allow_always options beside "manually approve edits", its allow_once), and
// the agent modes guard watches where the switch leads.
func TestSwitchModeAlwaysIsRelayedAsChosen(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{})
	exitPlan := `[{"optionId":"exit-plan-clear-accept-edits","name":"Yes, clear context and auto-accept edits","kind":"allow_always"},{"optionId":"exit-plan-accept-edits","name":"Yes, auto-accept edits","kind":"allow_always"},{"optionId":"exit-plan-default","name":"Yes, manually approve edits","kind":"allow_once"},{"optionId":"reject","name":"No, keep planning","kind":"reject_once"}]`
	d.answeredAs(permission(`1`, `{"toolCallId":"toolu_plan1","title":"Ready to code?","kind":"switch_mode","rawInput":{"plan":"1. edit"}}`, exitPlan), "exit-plan-accept-edits", "exit-plan-accept-edits")
	d.answeredAs(permission(`2`, `{"toolCallId":"toolu_plan2","title":"Ready to code?","kind":"switch_mode","rawInput":{"plan":"2. edit"}}`, exitPlan), "exit-plan-clear-accept-edits", "exit-plan-clear-accept-edits")
	d.finish()
}
