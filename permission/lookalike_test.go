package permission

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/acp-broker/acp-broker/rules"
	"github.com/acp-broker/acp-broker/session"
)

// allowEverything is a rule file that allows every kind, command, URL and
// MCP tool, in every mode.
const allowEverything = `
[[rule]]
id = "everything"
decision = "allow"
kind = ["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"]
[[rule]]
id = "every-url"
decision = "allow"
url = ["https://*", "http://*"]
[[rule]]
id = "every-command"
decision = "allow"
command_regex = ".*"
[[rule]]
id = "every-title"
decision = "allow"
title = "*"
`

// TestLookalikesAreAlwaysAsked: requests that only look like permissions (a
// question, a plan review, a mode switch) are asked whatever the rules and
// the mode say, in every shape the agents send them, and what the rules
// would allow of the same shape otherwise is allowed.
func TestLookalikesAreAlwaysAsked(t *testing.T) {
	policy, _, err := rules.Load(rules.LoadOptions{Extra: []string{writeRules(t, allowEverything)}})
	if err != nil {
		t.Fatal(err)
	}
	const codexURL = `[{"optionId":"accept","name":"Allow","kind":"allow_once"},{"optionId":"decline","name":"Deny","kind":"reject_once"},{"optionId":"cancel","name":"Cancel","kind":"reject_once"}]`
	const plan = `[{"optionId":"implement_plan","name":"Yes, implement this plan","kind":"allow_once"},{"optionId":"revise_plan","name":"No, and tell Codex what to do differently","kind":"reject_once"}]`
	const exitPlan = `[{"optionId":"exit-plan-auto","name":"Yes, and use auto mode","kind":"allow_always"},{"optionId":"exit-plan-default","name":"Yes, manually approve edits","kind":"allow_once"},{"optionId":"reject","name":"No, keep planning","kind":"reject_once"}]`
	cases := []struct {
		name, params, source string
	}{
		{"codex URL consent", `{"toolCall":{"toolCallId":"elicitation-e1","kind":"fetch","title":"MCP server requests to open a URL","rawInput":{"serverName":"linear","url":"https://mcp.linear.app/authorize"}},"options":` + codexURL + `}`, "question"},
		{"the id in another case", `{"toolCall":{"toolCallId":"ELICITATION-e1","kind":"fetch","rawInput":{"url":"https://mcp.linear.app/authorize"}},"options":` + codexURL + `}`, "question"},
		{"codex message-only form", `{"toolCall":{"toolCallId":"elicitation:sess:linear:1","kind":"other","title":"Question from MCP server","rawInput":{"serverName":"linear","description":"Go on?"}},"options":` + codexURL + `}`, "question"},
		{"v2 tool_call subject", `{"title":"Open a URL","subject":{"type":"tool_call","toolCall":{"toolCallId":"elicitation-e2","kind":"fetch","rawInput":{"url":"https://x.example/"}}},"options":` + codexURL + `}`, "question"},
		{"codex plan review", `{"toolCall":{"toolCallId":"plan-review:item_1","kind":"switch_mode","title":"Implement this plan?","rawInput":{"plan":"1. x"}},"options":` + plan + `}`, "plan review"},
		{"a plan review of no kind", `{"toolCall":{"toolCallId":"Plan-Review:item_2","title":"Implement this plan?"},"options":` + plan + `}`, "plan review"},
		{"the plan's options alone", `{"toolCall":{"toolCallId":"call_1","title":"Implement this plan?"},"options":` + plan + `}`, "plan review"},
		{"claude ExitPlanMode", `{"toolCall":{"toolCallId":"toolu_1","name":"ExitPlanMode","kind":"switch_mode","title":"Approve Plan","rawInput":{"plan":"1. x"}},"options":` + exitPlan + `}`, "plan review"},
		{"ExitPlanMode named in _meta only", `{"toolCall":{"toolCallId":"toolu_2","title":"Approve Plan","_meta":{"claudeCode":{"toolName":"ExitPlanMode"}}},"options":[{"optionId":"yes","kind":"allow_once"},{"optionId":"reject","kind":"reject_once"}]}`, "plan review"},
		{"claude EnterPlanMode", `{"toolCall":{"toolCallId":"toolu_3","name":"EnterPlanMode","title":"EnterPlanMode"},"options":[{"optionId":"allow-once","name":"Yes, enter plan mode","kind":"allow_once"},{"optionId":"reject","name":"No, start implementing now","kind":"reject_once"}]}`, "plan review"},
		{"switch_mode in another case", `{"toolCall":{"toolCallId":"t","kind":"Switch_Mode","title":"Ready?"},"options":` + testOptions + `}`, "switch_mode"},
	}
	for _, mode := range []string{"default", "bypass", "dont-ask", "plan", "accept-edits"} {
		for _, c := range cases {
			ev := Evaluate(Inputs{Params: json.RawMessage(c.params), Session: session.Info{ID: "s", Cwd: "/tmp", Opened: true}, Policy: policy, Mode: mode})
			if mode == "plan" && !strings.Contains(c.params, `"kind":"switch_mode"`) {
				// Plan mode denies what does not read, and a deny stays
				// one, whatever the request's marks.
				if ev.Decision != rules.Deny || ev.Lookalike {
					t.Errorf("%s in mode plan: %s (%s: %s), lookalike %v; want denied", c.name, ev.Decision, ev.Source, ev.Reason, ev.Lookalike)
				}
				continue
			}
			if ev.Decision != rules.Ask || ev.Source != c.source || !ev.Lookalike || ev.Reason == "" {
				t.Errorf("%s in mode %s: %s (%s: %s), lookalike %v; want ask (%s)", c.name, mode, ev.Decision, ev.Source, ev.Reason, ev.Lookalike, c.source)
			}
		}
	}
	// The same shapes that are permissions are allowed by these rules: the
	// lookalikes are asked for what they are, not for their shape.
	for _, params := range []string{
		`{"toolCall":{"toolCallId":"toolu_9","kind":"fetch","title":"Fetch https://mcp.linear.app/authorize","rawInput":{"url":"https://mcp.linear.app/authorize"}},"options":` + codexURL + `}`,
		`{"toolCall":{"toolCallId":"call_elicitation-1","kind":"other","title":"Question from MCP server"},"options":` + codexURL + `}`,
		// The marks in the wrong shape: a command, a read of a file.
		`{"title":"ls","subject":{"type":"command","command":"ls","cwd":"/tmp","toolCallId":"elicitation-e3"},"options":` + codexURL + `}`,
		`{"toolCall":{"toolCallId":"elicitation-e4","kind":"execute","title":"ls","rawInput":{"command":"ls"}},"options":` + codexURL + `}`,
		`{"toolCall":{"toolCallId":"plan-review:item_9","kind":"read","title":"Read x","locations":[{"path":"/tmp/x"}]},"options":` + plan + `}`,
	} {
		ev := Evaluate(Inputs{Params: json.RawMessage(params), Session: session.Info{ID: "s", Cwd: "/tmp", Opened: true}, Policy: policy, Mode: "default"})
		if ev.Decision != rules.Allow || ev.Lookalike {
			t.Errorf("%s: %s (%s: %s), want allowed", params, ev.Decision, ev.Source, ev.Reason)
		}
	}
}
