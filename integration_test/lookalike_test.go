//go:build linux

package integration

import (
	"encoding/json"
	"strings"
	"testing"
)

// The tests in this file pin the requests that only look like permissions
// (the README's "What is decided"): a question, a plan review or a mode
// switch in the shape of a permission request goes to the editor whatever
// the rules, the remembered answers and the mode allow (what they deny
// stays denied), the human's answer reaches the agent as for any request
// (as chosen for a mode switch), and nothing is remembered of it.

// allowEverythingRules allows every kind, fetch, URL, command and title.
const allowEverythingRules = `
[[rule]]
id = "fetches"
decision = "allow"
kind = "fetch"
url = ["https://*", "http://*"]

[[rule]]
id = "every-kind"
decision = "allow"
kind = ["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"]

[[rule]]
id = "every-command"
decision = "allow"
command_regex = ".*"

[[rule]]
id = "every-title"
decision = "allow"
title = "*"
`

// The option lists of the lookalikes, as the adapters build them.
const (
	// codex-acp 2.x's MCP elicitation fallback (buildMcpPermissionOptions)
	// for a URL, with the server's session persistence on.
	codexConsentOptions = `[{"optionId":"accept","name":"Allow","kind":"allow_once"},{"optionId":"allow_session","name":"Allow for this session","kind":"allow_always"},{"optionId":"decline","name":"Deny","kind":"reject_once"},{"optionId":"cancel","name":"Cancel","kind":"reject_once"}]`
	// codex-acp 2.x's PlanReviewReporter.
	codexPlanOptions = `[{"optionId":"implement_plan","name":"Yes, implement this plan","kind":"allow_once"},{"optionId":"revise_plan","name":"No, and tell Codex what to do differently","kind":"reject_once"}]`
	// claude-agent-acp 0.101's buildExitPlanModePermissionOptions.
	claudeExitPlanOptions = `[{"optionId":"exit-plan-clear-auto","name":"Yes, clear context (12% used) and use auto mode","kind":"allow_always"},{"optionId":"exit-plan-auto","name":"Yes, and use auto mode","kind":"allow_always"},{"optionId":"exit-plan-bypass","name":"Yes, and bypass permissions","kind":"allow_always"},{"optionId":"exit-plan-default","name":"Yes, manually approve edits","kind":"allow_once"},{"optionId":"reject","name":"No, keep planning","kind":"reject_once"}]`
)

// codexConsent is codex-acp 2.x's MCP OAuth consent as a permission
// (ElicitationReporter.permission, URL mode).
func codexConsent(id string) string {
	return `{"toolCallId":"` + id + `","kind":"fetch","status":"pending","title":"MCP server requests to open a URL","rawInput":{"serverName":"linear","description":"Sign in to Linear","url":"https://mcp.linear.app/authorize?state=x"},"content":[{"type":"content","content":{"type":"text","text":"Sign in to Linear"}}]}`
}

// TestLookalikesGoToTheEditor: with rules that allow everything, in the
// default mode and in bypass, each lookalike is the editor's to answer,
// twice over after an "always" answer, while an ordinary fetch of the same
// URL is allowed; the audit line says why it was asked and that nothing was
// remembered.
func TestLookalikesGoToTheEditor(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"default", "bypass"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			d := startDecider(t, deciderOptions{rules: allowEverythingRules, args: []string{"--mode", mode}})
			asIs := func(req, optionID string) {
				d.t.Helper()
				id := requestID(d.t, req)
				d.askedThen(req, selected(id, optionID), selected(id, optionID))
			}
			steps := []struct {
				name string
				f    func()
			}{
				{"an_ordinary_fetch_is_allowed", func() {
					d.decided(permission(`"f1"`, `{"toolCallId":"toolu_f1","kind":"fetch","title":"Fetch https://mcp.linear.app/authorize?state=x","rawInput":{"url":"https://mcp.linear.app/authorize?state=x"}}`, codexConsentOptions), "accept")
				}},
				{"codex_consent_answered_always_relayed_once", func() {
					// Its marks are the agent's to write: an always answer
					// reaches it as the once option, as for any request.
					d.askedThen(permission(`"c1"`, codexConsent("elicitation-e1"), codexConsentOptions), selected(`"c1"`, "allow_session"), selected(`"c1"`, "accept"))
				}},
				{"codex_consent_again_after_always", func() { asIs(permission(`"c2"`, codexConsent("elicitation-e1"), codexConsentOptions), "accept") }},
				{"codex_consent_id_in_another_case", func() { asIs(permission(`"c3"`, codexConsent("ELICITATION-e2"), codexConsentOptions), "decline") }},
				{"codex_message_only_form", func() {
					asIs(permission(`"c4"`, `{"toolCallId":"elicitation:sess_1:linear:1","kind":"other","status":"pending","title":"Question from MCP server","rawInput":{"serverName":"linear","description":"Go on?","schema":null}}`, codexConsentOptions), "accept")
				}},
				{"codex_plan_review", func() {
					asIs(permission(`"p1"`, `{"toolCallId":"plan-review:item_1","kind":"switch_mode","status":"pending","title":"Implement this plan?","rawInput":{"plan":"1. edit src/x.go"}}`, codexPlanOptions), "implement_plan")
				}},
				{"codex_plan_review_kind_in_another_case", func() {
					asIs(permission(`"p2"`, `{"toolCallId":"plan-review:item_2","kind":"SWITCH_MODE","title":"Implement this plan?"}`, codexPlanOptions), "revise_plan")
				}},
				{"claude_exit_plan_named_in_meta_only", func() {
					asIs(permission(`"p3"`, `{"toolCallId":"toolu_p3","title":"Approve Plan","kind":"switch_mode","rawInput":{"plan":"1. edit"},"_meta":{"claudeCode":{"toolName":"ExitPlanMode"}}}`, claudeExitPlanOptions), "exit-plan-auto")
				}},
				{"claude_exit_plan_announced", func() {
					d.AgentToEditor(toolCallUpdate("tool_call", `"toolCallId":"toolu_p4","name":"ExitPlanMode","title":"Approve Plan","kind":"switch_mode","status":"pending","rawInput":{"plan":"1. edit"}`))
					asIs(permission(`"p4"`, `{"toolCallId":"toolu_p4"}`, claudeExitPlanOptions), "exit-plan-bypass")
				}},
			}
			for _, s := range steps {
				if !d.step(t, s.name, s.f) {
					return
				}
			}
			d.finish()
			why := map[string]string{
				"elicitation-e1": "question", "ELICITATION-e2": "question", "elicitation:sess_1:linear:1": "question",
				"plan-review:item_1": "plan review", "plan-review:item_2": "plan review", "toolu_p3": "plan review", "toolu_p4": "plan review",
			}
			for _, line := range strings.Split(strings.TrimSpace(waitFile(t, d.audit)), "\n") {
				var r struct {
					ToolCallID string `json:"tool_call_id"`
					Source     string `json:"source"`
					Asked      string `json:"asked"`
					Reason     string `json:"reason"`
					Remembered string `json:"remembered"`
				}
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatalf("audit line: %v: %s", err, line)
				}
				want, lookalike := why[r.ToolCallID]
				switch {
				case r.ToolCallID == "toolu_f1" && r.Source != "rule":
					t.Errorf("the ordinary fetch was not allowed by the rules: %s", line)
				case !lookalike:
				case r.Source != "editor" || r.Asked != want || r.Reason == "" || r.Remembered != "":
					t.Errorf("audit line %s: want it answered in the editor, asked as %q with a reason, nothing remembered", line, want)
				}
			}
		})
	}
}

// TestLookalikesGoToTheEditorInACPv2: the lookalikes in ACP v2 subjects.
func TestLookalikesGoToTheEditorInACPv2(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: allowEverythingRules, initialize: v2Init})
	d.noisy = true
	for _, c := range []struct{ name, req, option string }{
		{"tool_call_subject", v2Permission(`"v1"`, `"MCP server requests to open a URL"`, `{"type":"tool_call","toolCall":`+codexConsent("elicitation-v1")+`}`, codexConsentOptions), "accept"},
		{"plan_review_subject", v2Permission(`"v3"`, `"Implement this plan?"`, `{"type":"tool_call","toolCall":{"toolCallId":"plan-review:item_3","kind":"switch_mode","title":"Implement this plan?"}}`, codexPlanOptions), "implement_plan"},
	} {
		if !d.step(t, c.name, func() {
			id := requestID(d.t, c.req)
			d.askedThen(c.req, selected(id, c.option), selected(id, c.option))
		}) {
			return
		}
	}
	// A command wearing a question's id is a command: the rules decide it.
	if !d.step(t, "command_subject", func() {
		d.decided(v2Permission(`"v2"`, `"ls"`, `{"type":"command","command":"ls","cwd":"$CWD","toolCallId":"elicitation-v2"}`, codexConsentOptions), "accept")
	}) {
		return
	}
	d.finish()
}

// TestLookalikeAlwaysRemembersNothing: an "always" answer to an MCP server's
// consent page is consent, not a rule: the next ordinary fetch of that host
// is still asked, and so is the next consent.
func TestLookalikeAlwaysRemembersNothing(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{})
	consent := permission(`"c1"`, codexConsent("elicitation-e1"), codexConsentOptions)
	d.askedThen(consent, selected(`"c1"`, "allow_session"), selected(`"c1"`, "accept"))
	fetch := permission(`"f1"`, `{"toolCallId":"toolu_f1","kind":"fetch","title":"Fetch https://mcp.linear.app/issues","rawInput":{"url":"https://mcp.linear.app/issues"}}`, codexConsentOptions)
	d.asked(fetch, selected(`"f1"`, "decline"))
	again := permission(`"c2"`, codexConsent("elicitation-e2"), codexConsentOptions)
	d.askedThen(again, selected(`"c2"`, "accept"), selected(`"c2"`, "accept"))
	d.finish()
}

// TestLookalikeMarksCannotLowerADeny: a lookalike's marks are the agent's to
// write, so they only make a request more guarded: a force push wearing a
// question's or a plan's id is denied by the rule that denies it, and so is
// a consent page's fetch of a URL a rule denies; a command wearing one is a
// command, decided by the rules; a fetch the rules allow wearing one is
// asked, and an always answer reaches the agent as the once option.
func TestLookalikeMarksCannotLowerADeny(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules + `
[[rule]]
id = "no-evil"
decision = "deny"
url = "https://evil.example/*"

[[rule]]
id = "linear-fetch"
decision = "allow"
kind = "fetch"
url = "https://mcp.linear.app/*"
`})
	forcePush := func(id string) string {
		return `{"toolCallId":"` + id + `","title":"git push --force origin main","kind":"execute","rawInput":{"command":"git push --force origin main","description":"Force push"}}`
	}
	steps := []struct {
		name string
		f    func()
	}{
		{"force_push_as_a_question_denied", func() { d.decided(permission(`1`, forcePush("elicitation-1"), claudeNewOptions), "reject") }},
		{"force_push_as_a_plan_review_denied", func() {
			d.decided(permission(`2`, forcePush("plan-review:item_1"), claudeExitPlanOptions), "reject")
		}},
		{"denied_url_as_a_consent_page_denied", func() {
			d.decided(permission(`3`, `{"toolCallId":"elicitation-2","kind":"fetch","title":"MCP server requests to open a URL","rawInput":{"serverName":"linear","url":"https://evil.example/upload"}}`, claudeNewOptions), "reject")
		}},
		{"allowed_command_as_a_question_is_a_command", func() {
			d.decided(permission(`4`, `{"toolCallId":"elicitation-3","title":"git status","kind":"execute","rawInput":{"command":"git status"}}`, claudeNewOptions), "allow-once")
		}},
		{"allowed_fetch_as_a_question_asked_always_relayed_once", func() {
			d.askedThen(permission(`5`, codexConsent("elicitation-4"), claudeNewOptions), selected(`5`, "allow-with-updates"), selected(`5`, "allow-once"))
		}},
	}
	for _, s := range steps {
		if !d.step(t, s.name, s.f) {
			return
		}
	}
	d.finish()
}
