//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// explainParams runs `acp-broker rules explain --json` on a permission
// request's params with the decider's config and state, and returns the
// decision and the option it chose.
func (d *decider) explainParams(t testing.TB, params string, args ...string) (decision, option string) {
	t.Helper()
	cmd := exec.Command(brokerBin, append([]string{"rules", "explain", "--json", "--config", d.config, "--cwd", d.cwd}, args...)...)
	cmd.Env = append(testEnv(), d.env...)
	cmd.Dir = d.root
	cmd.Stdin = strings.NewReader(d.expand(params))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rules explain: %v\n%s", err, out)
	}
	var v struct{ Decision, Option string }
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("rules explain printed %s: %v", out, err)
	}
	return v.Decision, v.Option
}

// TestExplainDecidesAsTheLiveBroker: the requests the dry run used to allow
// while the live broker asks (no allow_once option to choose, a repeated
// toolCall, toolCall beside ToolCall, a toolCall only in another case) are
// asked by both; the same request with the options real agents send is
// allowed by both, with the same option. Live, each is checked by the
// decider's cross-check; here explain is also run by hand, without a
// transcript, as a user would.
func TestExplainDecidesAsTheLiveBroker(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules})
	allowed := `{"toolCallId":"t","title":"git status","kind":"execute","rawInput":{"command":"git status"}}`
	other := `{"toolCallId":"t","title":"rm -rf build","kind":"execute","rawInput":{"command":"rm -rf build"}}`
	asks := []struct{ name, params string }{
		{"options_empty", `{"sessionId":"sess_1","toolCall":` + allowed + `,"options":[]}`},
		{"options_missing", `{"sessionId":"sess_1","toolCall":` + allowed + `}`},
		{"only_allow_always", `{"sessionId":"sess_1","toolCall":` + allowed + `,"options":[{"optionId":"aa","name":"Always","kind":"allow_always"}]}`},
		{"toolCall_twice", `{"sessionId":"sess_1","toolCall":` + other + `,"toolCall":` + allowed + `,"options":` + claudeOptions + `}`},
		{"toolCall_and_ToolCall", `{"sessionId":"sess_1","toolCall":` + allowed + `,"ToolCall":` + other + `,"options":` + claudeOptions + `}`},
		{"ToolCall_only", `{"sessionId":"sess_1","ToolCall":` + allowed + `,"options":` + claudeOptions + `}`},
	}
	for i, c := range asks {
		id := fmt.Sprint(i + 1)
		if !d.step(t, c.name, func() {
			if got, _ := d.explainParams(t, c.params); got != "ask" {
				t.Errorf("rules explain says %s, want ask", got)
			}
			d.asked(`{"jsonrpc":"2.0","id":`+id+`,"method":"session/request_permission","params":`+c.params+`}`,
				`{"jsonrpc":"2.0","id":`+id+`,"result":{"outcome":{"outcome":"cancelled"}}}`)
		}) {
			return
		}
	}
	d.step(t, "allowed_with_the_agents_options", func() {
		params := `{"sessionId":"sess_1","toolCall":` + allowed + `,"options":` + codexOptions + `}`
		if got, opt := d.explainParams(t, params); got != "allow" || opt != "approved" {
			t.Errorf("rules explain says %s %s, want allow approved", got, opt)
		}
		d.decided(`{"jsonrpc":"2.0","id":50,"method":"session/request_permission","params":`+params+`}`, "approved")
	})
	d.step(t, "mode_and_directories_from_flags", func() {
		// accept-edits allows an edit in an additional directory, and only
		// there; explain takes both from its flags.
		edit := `{"sessionId":"sess_1","toolCall":{"toolCallId":"e","title":"Edit x","kind":"edit","locations":[{"path":"$LIB/x.go"}],"content":[{"type":"diff","path":"$LIB/x.go","oldText":"a","newText":"b"}]},"options":` + claudeOptions + `}`
		if got, _ := d.explainParams(t, edit, "--mode", "accept-edits", "--additional-directory", d.lib); got != "allow" {
			t.Errorf("with --mode accept-edits and the directory, rules explain says %s, want allow", got)
		}
		if got, _ := d.explainParams(t, edit, "--mode", "accept-edits"); got != "ask" {
			t.Errorf("with --mode accept-edits and no directory, rules explain says %s, want ask", got)
		}
		if got, _ := d.explainParams(t, edit); got != "ask" {
			t.Errorf("in the default mode, rules explain says %s, want ask", got)
		}
	})
	d.finish()
}

// recordingTB takes a test's errors instead of failing it, for a test of a
// test helper.
type recordingTB struct {
	testing.TB
	errors []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recordingTB) Failed() bool { return false }
func (r *recordingTB) Helper()      {}

// TestExplainCrossCheckCatchesADisagreement: the decider's cross-check fails
// a step whose live decision the dry run does not share, including one that
// depends on the transcript (the command is only in an earlier update), and
// passes one it shares.
func TestExplainCrossCheckCatchesADisagreement(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules})
	d.AgentToEditor(toolCallUpdate("tool_call", `"toolCallId":"merged","kind":"execute","title":"git push --force","status":"pending","rawInput":{"command":"git push --force origin main"}`))
	merged := permission(`1`, `{"toolCallId":"merged","title":"git push --force"}`, claudeOptions)
	allowed := permission(`2`, `{"toolCallId":"a","title":"git status","kind":"execute","rawInput":{"command":"git status"}}`, claudeOptions)
	for _, c := range []struct {
		name, req, live, option string
		disagree                bool
	}{
		{"allowed_taken_for_denied", allowed, "deny", "reject", true},
		{"allowed_taken_for_asked", allowed, "ask", "", true},
		{"allowed_with_another_option", allowed, "allow", "allow_always", true},
		{"allowed", allowed, "allow", "allow", false},
		{"merged_force_push_taken_for_asked", merged, "ask", "", true},
		{"merged_force_push_rejected", merged, "deny", "reject", false},
	} {
		rec := &recordingTB{TB: t}
		parent := d.session.t
		d.session.t = rec
		d.explainAgrees(c.req, d.sentSoFar(), c.live, c.option)
		d.session.t = parent
		if got := len(rec.errors) > 0; got != c.disagree {
			t.Errorf("%s: the cross-check reported %q, want a disagreement: %v", c.name, rec.errors, c.disagree)
		}
	}
	d.liveOnly("a test of the opt-out")
	rec := &recordingTB{TB: t}
	d.session.t = rec
	d.explainAgrees(allowed, d.sentSoFar(), "deny", "reject")
	d.session.t = t
	if len(rec.errors) > 0 || d.skipNext != "" {
		t.Errorf("liveOnly did not skip the next check (errors %q)", rec.errors)
	}
	d.finish()
}

// TestExplainReplaysABrokersTrace: `rules explain --transcript` on a running
// broker's --trace file knows the session's directory from its session/new
// and the command from an earlier tool_call, as the live broker does; without
// the transcript it knows neither.
func TestExplainReplaysABrokersTrace(t *testing.T) {
	t.Parallel()
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	d := startDecider(t, deciderOptions{rules: decideRules, args: []string{"--trace", trace}})
	d.AgentToEditor(toolCallUpdate("tool_call", `"toolCallId":"toolu_1","kind":"execute","title":"Terminal","status":"pending","rawInput":{"command":"git push --force origin main"}`))
	explain := func(params string, args ...string) string {
		t.Helper()
		cmd := exec.Command(brokerBin, append([]string{"rules", "explain", "--json", "--config", d.config}, args...)...)
		cmd.Env = append(testEnv(), d.env...)
		cmd.Dir = d.root // not the session's directory
		cmd.Stdin = strings.NewReader(d.expand(params))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("rules explain: %v\n%s", err, out)
		}
		var v struct{ Decision, Option string }
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("rules explain printed %s", out)
		}
		return v.Decision + " " + v.Option
	}
	push := `{"sessionId":"sess_1","toolCall":{"toolCallId":"toolu_1","title":"Terminal"},"options":` + claudeOptions + `}`
	edit := `{"sessionId":"sess_1","toolCall":{"toolCallId":"toolu_2","title":"Edit","kind":"edit","locations":[{"path":"$CWD/src/a.go"}]},"options":` + claudeOptions + `}`
	for _, c := range []struct{ name, params, want string }{
		{"merged_command_with_the_trace", push, "deny reject"},
		{"session_directory_with_the_trace", edit, "allow allow"},
	} {
		if got := explain(c.params, "--transcript", trace); got != c.want {
			t.Errorf("%s: rules explain says %q, want %q", c.name, got, c.want)
		}
	}
	if got := explain(push); got != "ask " {
		t.Errorf("without the trace, the merged command: %q, want ask", got)
	}
	if got := explain(edit); got != "ask " {
		t.Errorf("without the trace, the edit in the session's src: %q, want ask", got)
	}
	// And live, the same.
	d.decided(permission(`1`, `{"toolCallId":"toolu_1","title":"Terminal"}`, claudeOptions), "reject")
	d.decided(permission(`2`, `{"toolCallId":"toolu_2","title":"Edit","kind":"edit","locations":[{"path":"$CWD/src/a.go"}]}`, claudeOptions), "allow")
	d.finish()
}
