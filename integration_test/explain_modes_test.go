//go:build linux

package integration

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// liveDecision sends the (expanded) request and reports what the broker did
// with it: the decision and option it answered with itself, or "ask" when it
// forwarded the request to the editor (which then rejects it). The dry run,
// with the conversation so far as its transcript, must agree (see
// explainAgrees).
func (d *decider) liveDecision(req string) (decision, option string) {
	d.t.Helper()
	req = d.expand(req)
	mark := d.marker()
	before := d.sentSoFar()
	d.AgentSend(req, mark)
	got := d.EditorRecv()
	if isTold(got) {
		// The broker answered itself and told the editor why: what it
		// decided is in its answer to the agent, after the marker.
		got = d.EditorRecv()
	}
	switch got {
	case mark:
		var resp struct {
			Result struct {
				Outcome struct {
					OptionID string `json:"optionId"`
				} `json:"outcome"`
			} `json:"result"`
		}
		line := d.AgentRecv()
		if err := json.Unmarshal([]byte(line), &resp); err != nil || resp.Result.Outcome.OptionID == "" {
			d.t.Fatalf("the broker answered the agent %s", clip(line))
		}
		option = resp.Result.Outcome.OptionID
		decision = decisionOfOption(req, option)
		d.explainAgrees(req, before, decision, option)
	case req:
		d.EditorExpect(mark)
		decision = "ask"
		d.explainAgrees(req, before, decision, "")
		reject := answer(requestID(d.t, req), "reject")
		d.EditorSend(reject)
		d.AgentExpect(agentGets(d.t, req, reject))
	default:
		d.t.Fatalf("editor received\n  %s\nwant the request or the marker\n  %s", clip(got), mark)
	}
	return decision, option
}

// TestExplainAgreesWithTheLiveBrokerAcrossModes: in every mode, whether the
// config sets it, --mode overrides the config's, or the agent's own mode
// stands for it, `rules explain` given the same set-up by its flags (no
// transcript: --mode, --agent and --agent-mode, and --protect for the
// broker's audit log) decides each request as the live broker does, option
// included; and with the conversation as its transcript it agrees too (the
// decider's cross-check).
func TestExplainAgreesWithTheLiveBrokerAcrossModes(t *testing.T) {
	t.Parallel()
	requests := []struct{ name, req string }{
		{"command_no_rule", reqMake("1")},
		{"command_allowed", reqGitStatus("2")},
		{"command_denied", reqForcePush("3")},
		{"read", reqRead("4")},
		{"read_protected", reqReadSSH("5")},
		{"edit_in_cwd", reqEdit("6", "$CWD/package.json")},
		{"edit_allowed_by_rule", reqEdit("7", "$CWD/src/app.ts")},
		{"edit_in_additional_directory", reqEdit("8", "$LIB/util.go")},
		{"edit_outside", reqEdit("9", "$ROOT/elsewhere/x.go")},
		{"read_the_audit_log", permission("10", `{"toolCallId":"m10","title":"Read audit.jsonl","kind":"read","rawInput":{"file_path":"$ROOT/audit.jsonl"},"locations":[{"path":"$ROOT/audit.jsonl"}]}`, claudeOptions)},
	}
	type setup struct {
		name, config string
		args         []string // the broker's flags, and explain's
		agentMode    string   // Claude Code's own mode for the session; "" for none
	}
	var setups []setup
	for _, mode := range []string{"default", "accept-edits", "plan", "dont-ask", "bypass"} {
		setups = append(setups, setup{name: "config_" + mode, config: `mode = "` + mode + `"`})
	}
	setups = append(setups,
		setup{name: "flag_plan_over_config_bypass", config: `mode = "bypass"`, args: []string{"--mode", "plan"}},
		setup{name: "flag_default_over_config_dont-ask", config: `mode = "dont-ask"`, args: []string{"--mode", "default"}},
		setup{name: "agent_plan_over_config_bypass", config: `mode = "bypass"`, agentMode: "plan"},
		setup{name: "agent_acceptEdits", agentMode: "acceptEdits"},
		setup{name: "flag_dont-ask_over_agent_acceptEdits", args: []string{"--mode", "dont-ask"}, agentMode: "acceptEdits"},
	)
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			o := deciderOptions{rules: s.config + "\n" + decideRules, args: s.args}
			if s.agentMode != "" {
				o.open = func(d *decider) {
					initializeAs(d, claudeAgent, `{}`, 1)
					d.EditorToAgent(newSessionIn(d))
					d.AgentToEditor(modesResponse(s.agentMode))
				}
			}
			d := startDecider(t, o)
			flags := append([]string{"--additional-directory", d.lib, "--protect", filepath.Join(d.root, "audit.jsonl")}, s.args...)
			if s.agentMode != "" {
				flags = append(flags, "--agent", claudeAgent, "--agent-mode", s.agentMode)
			}
			for _, r := range requests {
				if !d.step(t, r.name, func() {
					var params struct{ Params json.RawMessage }
					if err := json.Unmarshal([]byte(d.expand(r.req)), &params); err != nil {
						d.t.Fatal(err)
					}
					live, liveOption := d.liveDecision(r.req)
					got, option := d.explainParams(d.t, string(params.Params), flags...)
					if got != live || option != liveOption {
						d.t.Errorf("rules explain %q says %s %s; the live broker %s %s", flags, got, option, live, liveOption)
					}
				}) {
					return
				}
			}
			d.finish()
		})
	}
}
