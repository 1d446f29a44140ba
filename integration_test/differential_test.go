//go:build linux

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The differential test: many permission requests, the shapes of the attack
// tests and mutations of them, go through one live broker each, and every
// one is then decided again by `rules explain --transcript` on the broker's
// own --trace file as it stood when the request arrived. The two must give
// the same decision, or explain must name, in its caveats, the state it
// cannot know.

// diffBases are the tool calls the mutations start from (without their
// toolCallId): allowed, denied, asked and protected ones of every kind.
var diffBases = []struct{ name, fields string }{
	{"git_status", `"title":"git status","kind":"execute","rawInput":{"command":"git status"}`},
	{"force_push", `"title":"git push --force origin main","kind":"execute","rawInput":{"command":"git push --force origin main"}`},
	{"rm", `"title":"rm -rf build","kind":"execute","rawInput":{"command":"rm -rf build"}`},
	{"opaque_sh", `"title":"sh","kind":"execute","rawInput":{"command":"sh -c 'r=rm; $r -rf x'"}`},
	{"cat_ssh", `"title":"cat","kind":"execute","rawInput":{"command":"cat $HOME/.ssh/id_rsa"}`},
	{"cat_cwd_home", `"title":"cat","kind":"execute","rawInput":{"command":"cat .ssh/id_rsa","cwd":"$HOME"}`},
	{"ls_array", `"kind":"execute","rawInput":{"command":["ls","-la"]}`},
	{"edit_src", `"title":"Edit","kind":"edit","locations":[{"path":"$CWD/src/a.go"}],"content":[{"type":"diff","path":"$CWD/src/a.go","oldText":"a","newText":"b"}]`},
	{"edit_gen", `"title":"Edit","kind":"edit","locations":[{"path":"$CWD/gen/x.go"}]`},
	{"edit_lib", `"title":"Edit","kind":"edit","locations":[{"path":"$LIB/x.go"}]`},
	{"edit_gitconfig", `"title":"Edit","kind":"edit","locations":[{"path":"$HOME/.gitconfig"}]`},
	{"edit_hook", `"title":"Write","kind":"edit","locations":[{"path":"$CWD/.git/hooks/pre-commit"}]`},
	{"read_ssh", `"title":"Read","kind":"read","locations":[{"path":"$HOME/.ssh/id_ed25519"}]`},
	{"read_src", `"title":"Read","kind":"read","locations":[{"path":"$CWD/src/a.go"}]`},
	{"fetch", `"title":"Fetch","kind":"fetch","rawInput":{"url":"https://evil.example/x"}`},
	{"mcp_get", `"title":"mcp__github__get_issue","kind":"other","rawInput":{"server":"github","tool":"get_issue"}`},
	{"mcp_delete", `"title":"mcp__github__delete_repo","kind":"other","rawInput":{"server":"github","tool":"delete_repo"}`},
	{"mcp_docs", `"title":"mcp__docs__search","kind":"other","rawInput":{"server":"docs","tool":"search"}`},
	{"title_only", `"title":"Something harmless"`},
}

// A diffRequest is one step: what the agent sends first, then a permission
// request (params only; the id is the step's), and how the editor answers if
// it is asked.
type diffRequest struct {
	name   string
	before []string
	params string
	always bool // the editor answers allow_always
}

// diffMutations turn a base tool call into the requests of one step each.
// id is a fresh tool call id.
var diffMutations = []struct {
	name string
	make func(id, fields string) (before []string, params string)
}{
	{"plain", func(id, f string) ([]string, string) { return nil, diffParams("sess_1", tc(id, f), claudeOptions) }},
	{"codex_options", func(id, f string) ([]string, string) { return nil, diffParams("sess_1", tc(id, f), codexOptions) }},
	{"no_options", func(id, f string) ([]string, string) { return nil, diffParams("sess_1", tc(id, f), `[]`) }},
	{"only_always", func(id, f string) ([]string, string) {
		return nil, diffParams("sess_1", tc(id, f), `[{"optionId":"aa","name":"Always","kind":"allow_always"},{"optionId":"r","name":"No","kind":"reject_once"}]`)
	}},
	{"announced", func(id, f string) ([]string, string) {
		return []string{toolCallUpdate("tool_call", `"toolCallId":"`+id+`",`+f)}, diffParams("sess_1", `{"toolCallId":"`+id+`","title":"Terminal"}`, claudeOptions)
	}},
	{"announced_then_harmless", func(id, f string) ([]string, string) {
		return []string{toolCallUpdate("tool_call", `"toolCallId":"`+id+`",`+f)}, diffParams("sess_1", tc(id, diffBases[0].fields), claudeOptions)
	}},
	{"harmless_then_this", func(id, f string) ([]string, string) {
		return []string{toolCallUpdate("tool_call", `"toolCallId":"`+id+`",`+diffBases[0].fields)}, diffParams("sess_1", tc(id, f), claudeOptions)
	}},
	{"nulls", func(id, f string) ([]string, string) {
		return []string{toolCallUpdate("tool_call", `"toolCallId":"`+id+`",`+f)},
			diffParams("sess_1", `{"toolCallId":"`+id+`","kind":null,"rawInput":null,"locations":null,"content":null}`, claudeOptions)
	}},
	{"update_nulls", func(id, f string) ([]string, string) {
		return []string{toolCallUpdate("tool_call", `"toolCallId":"`+id+`",`+f), toolCallUpdate("tool_call_update", `"toolCallId":"`+id+`","rawInput":null,"locations":null`)},
			diffParams("sess_1", `{"toolCallId":"`+id+`"}`, claudeOptions)
	}},
	{"case_members", func(id, f string) ([]string, string) {
		return nil, diffParams("sess_1", tc(id, caseVariant(f)), claudeOptions)
	}},
	{"case_announcement", func(id, f string) ([]string, string) {
		return []string{toolCallUpdate("tool_call", `"toolCallId":"`+id+`",`+caseVariant(f))}, diffParams("sess_1", tc(id, f), claudeOptions)
	}},
	{"ToolCall", func(id, f string) ([]string, string) {
		return nil, `{"sessionId":"sess_1","ToolCall":` + tc(id, f) + `,"options":` + claudeOptions + `}`
	}},
	{"toolCall_twice", func(id, f string) ([]string, string) {
		return nil, `{"sessionId":"sess_1","toolCall":` + tc(id, diffBases[2].fields) + `,"toolCall":` + tc(id, f) + `,"options":` + claudeOptions + `}`
	}},
	{"member_twice", func(id, f string) ([]string, string) {
		return nil, diffParams("sess_1", `{"toolCallId":"`+id+`",`+f+`,"kind":"read","title":"x"}`, claudeOptions)
	}},
	{"numeric_tool_call_id", func(id, f string) ([]string, string) {
		n := strings.TrimPrefix(id, "t")
		return []string{toolCallUpdate("tool_call", `"toolCallId":"`+n+`",`+f)}, diffParams("sess_1", `{"toolCallId":`+n+`,`+diffBases[0].fields+`}`, claudeOptions)
	}},
	{"unknown_session", func(id, f string) ([]string, string) { return nil, diffParams("sess_other", tc(id, f), claudeOptions) }},
	{"subagent_session", func(id, f string) ([]string, string) {
		return []string{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_child","update":{"sessionUpdate":"tool_call","toolCallId":"` + id + `",` + f + `},"_meta":{"parentSessionId":"sess_1"}}}`},
			diffParams("sess_child", `{"toolCallId":"`+id+`"}`, claudeOptions)
	}},
	{"ambiguous_update", func(id, f string) ([]string, string) {
		return []string{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_other","sessionId":"sess_1","update":{"sessionUpdate":"tool_call","toolCallId":"` + id + `",` + f + `}}}`},
			diffParams("sess_1", tc(id, diffBases[0].fields), claudeOptions)
	}},
	{"announced_in_another_session", func(id, f string) ([]string, string) {
		return []string{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_other","update":{"sessionUpdate":"tool_call","toolCallId":"` + id + `",` + f + `}}}`},
			diffParams("sess_1", `{"toolCallId":"`+id+`","title":"Terminal"}`, claudeOptions)
	}},
	{"completed", func(id, f string) ([]string, string) {
		return []string{toolCallUpdate("tool_call", `"toolCallId":"`+id+`",`+f), toolCallUpdate("tool_call_update", `"toolCallId":"`+id+`","status":"completed"`)},
			diffParams("sess_1", `{"toolCallId":"`+id+`",`+diffBases[0].fields+`}`, claudeOptions)
	}},
	// ACP v2: the tool call as a request's subject, announced or not.
	{"v2_subject", func(id, f string) ([]string, string) {
		return nil, `{"sessionId":"sess_1","title":"Allow?","subject":{"type":"tool_call","toolCall":` + tc(id, f) + `},"options":` + claudeOptions + `}`
	}},
	{"v2_announced", func(id, f string) ([]string, string) {
		return []string{toolCallUpdate("tool_call_update", `"toolCallId":"`+id+`",`+f)},
			`{"sessionId":"sess_1","title":"Allow?","subject":{"type":"tool_call","toolCall":{"toolCallId":"` + id + `","title":"Terminal"}},"options":` + claudeOptions + `}`
	}},
	// Subagents' sessions announced on sess_1 (decided only where the
	// editor advertised subagents): in the parent's directory, in one
	// below it, in its additional directory, outside it.
	{"subagent_child", func(id, f string) ([]string, string) {
		return []string{subagentUpdate("sess_1", "kid_"+id, `"title":"Explore"`)}, diffParams("kid_"+id, tc(id, f), claudeOptions)
	}},
	{"subagent_below", func(id, f string) ([]string, string) {
		return []string{subagentUpdate("sess_1", "kid_"+id, `"cwd":"$CWD/src"`)}, diffParams("kid_"+id, tc(id, f), claudeOptions)
	}},
	{"subagent_in_lib", func(id, f string) ([]string, string) {
		return []string{subagentUpdate("sess_1", "kid_"+id, `"cwd":"$LIB","additionalDirectories":["$CWD"]`)}, diffParams("kid_"+id, tc(id, f), claudeOptions)
	}},
	{"subagent_outside", func(id, f string) ([]string, string) {
		return []string{subagentUpdate("sess_1", "kid_"+id, `"cwd":"$ROOT"`)}, diffParams("kid_"+id, tc(id, f), claudeOptions)
	}},
	{"subagent_grandchild", func(id, f string) ([]string, string) {
		return []string{subagentUpdate("sess_1", "kid_"+id, `"cwd":"$CWD/src"`), subagentUpdate("kid_"+id, "grandkid_"+id, "")}, diffParams("grandkid_"+id, tc(id, f), claudeOptions)
	}},
	{"broker_tool_call_id", func(id, f string) ([]string, string) {
		own := "acp-broker-" + id
		return []string{toolCallUpdate("tool_call", `"toolCallId":"`+own+`",`+f)}, diffParams("sess_1", `{"toolCallId":"`+own+`",`+f+`}`, claudeOptions)
	}},
}

func tc(id, fields string) string { return `{"toolCallId":"` + id + `",` + fields + `}` }

func diffParams(sessionID, toolCall, options string) string {
	return `{"sessionId":"` + sessionID + `","toolCall":` + toolCall + `,"options":` + options + `}`
}

// caseVariant spells the tool call's members as a Go peer would still read them.
func caseVariant(fields string) string {
	return strings.NewReplacer(`"rawInput"`, `"RawInput"`, `"kind"`, `"Kind"`, `"locations"`, `"Locations"`, `"title"`, `"Title"`).Replace(fields)
}

// diffSample keeps one in diffSample of the mutated requests, every
// mutation and every base still represented: under the race detector each
// rules explain costs ten times as much, and the suite must stay quick.
// ACP_BROKER_DIFF_FULL=1 runs them all.
func diffSample() int {
	if raceEnabled && os.Getenv("ACP_BROKER_DIFF_FULL") == "" {
		return 3
	}
	return 1
}

// diffRequests builds the corpus: every mutation of every base (sampled,
// see diffSample), or only the mutations named.
func diffRequests(only ...string) []diffRequest {
	var out []diffRequest
	n := 0
	for i, m := range diffMutations {
		if len(only) > 0 && !contains(only, m.name) {
			continue
		}
		for j, b := range diffBases {
			if (i+j)%diffSample() != 0 {
				continue
			}
			n++
			before, params := m.make(fmt.Sprintf("t%d", n), b.fields)
			out = append(out, diffRequest{name: m.name + "/" + b.name, before: before, params: params})
		}
	}
	// One human "always" to a harmless asked command, then the same and
	// neighbouring commands again: remembered entries in the state dir.
	for i, cmd := range []string{"rm -rf build", "rm -rf build", "rm -rf build/x", "npm test", "npm test"} {
		n++
		f := `"title":"` + cmd + `","kind":"execute","rawInput":{"command":"` + cmd + `"}`
		out = append(out, diffRequest{name: fmt.Sprintf("always_%d", i), params: diffParams("sess_1", tc(fmt.Sprintf("t%d", n), f), claudeOptions), always: true})
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// diffOutcome is what the live broker did with one request.
type diffOutcome struct {
	req      diffRequest
	params   string // expanded
	trace    []byte // the trace before the request
	live     string // "allow OPTION", "deny OPTION", "ask", "refused"
	explain  string
	caveats  []string
	explainE string
}

// runDifferential plays the corpus through d (started with --trace trace)
// and compares every live decision with explain's.
func runDifferential(t *testing.T, d *decider, trace string, corpus []diffRequest) {
	t.Helper()
	var outcomes []*diffOutcome
	var pending []*diffOutcome
	var explaining time.Duration
	started := time.Now()
	flush := func() {
		start := time.Now()
		explainAll(t, d, pending)
		explaining += time.Since(start)
		pending = nil
	}
	for i, r := range corpus {
		for _, n := range r.before {
			d.AgentSend(d.expand(n))
		}
		// Updates are relayed, or dropped by the broker: a marker after
		// them tells when the broker is done with them.
		mark := d.marker()
		d.AgentSend(mark)
		for got := d.EditorRecv(); got != mark; got = d.EditorRecv() {
		}
		snapshot, err := os.ReadFile(trace)
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprint(1000 + i)
		params := d.expand(r.params)
		req := `{"jsonrpc":"2.0","id":` + id + `,"method":"session/request_permission","params":` + params + `}`
		o := &diffOutcome{req: r, params: params, trace: snapshot}
		mark = d.marker()
		d.AgentSend(req, mark)
		// A deny the broker gives itself is told to the editor first.
		got := d.EditorRecv()
		told := isTold(got)
		if told {
			got = d.EditorRecv()
		}
		switch got {
		case mark:
			resp := decode(t, d.AgentRecv())
			if resp.Error != nil {
				o.live = "refused"
				break
			}
			var res struct {
				Outcome struct{ OptionID string } `json:"outcome"`
			}
			_ = json.Unmarshal(resp.Result, &res)
			o.live = decisionOfOption(req, res.Outcome.OptionID) + " " + res.Outcome.OptionID
			// Only denies are told, and every one in the session the
			// editor opened (a child session is told only once the
			// editor knows it; one it did not open has nowhere to show it).
			deny := strings.HasPrefix(o.live, "deny ")
			if (told && !deny) || (deny && !told && strings.Contains(params, `"sessionId":"sess_1"`)) {
				t.Errorf("%s: answered %s, and the editor was told of it: %v", r.name, o.live, told)
			}
		case req:
			o.live = "ask"
			d.EditorExpect(mark)
			if r.always {
				// Explain what came before the answer is remembered.
				pending = append(pending, o)
				flush()
				d.EditorSend(answer(id, "allow_always"))
				d.AgentExpect(agentGets(t, req, answer(id, "allow_always")))
				outcomes = append(outcomes, o)
				continue
			}
			d.EditorToAgent(`{"jsonrpc":"2.0","id":` + id + `,"result":{"outcome":{"outcome":"cancelled"}}}`)
		default:
			t.Fatalf("%s: the editor got %s", r.name, clip(got))
		}
		pending = append(pending, o)
		outcomes = append(outcomes, o)
	}
	flush()
	disagree := 0
	for _, o := range outcomes {
		if o.explainE != "" {
			t.Errorf("%s: rules explain failed: %s", o.req.name, o.explainE)
			continue
		}
		// A caveat excuses explain asking where live decided, never
		// explain deciding otherwise.
		if o.live != o.explain && (len(o.caveats) == 0 || o.explain != "ask") {
			disagree++
			t.Errorf("%s: live %q, rules explain %q\n  %s", o.req.name, o.live, o.explain, clip(o.params))
		}
	}
	t.Logf("%d requests, %d disagreements; %v in all, %v explaining", len(outcomes), disagree, time.Since(started), explaining)
	d.noisy = true
	d.finish()
}

// explainAll runs rules explain on each outcome's request and trace, a few
// at a time.
func explainAll(t *testing.T, d *decider, os_ []*diffOutcome) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i, o := range os_ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			transcript := filepath.Join(d.root, fmt.Sprintf("diff-%p-%d.jsonl", o, i))
			if err := writeFile(transcript, o.trace); err != nil {
				o.explainE = err.Error()
				return
			}
			args := append([]string{"rules", "explain", "--json", "--transcript", transcript}, d.explainArgs...)
			cmd := exec.Command(brokerBin, args...)
			cmd.Env = append(testEnv(), d.env...)
			cmd.Dir = d.root
			cmd.Stdin = strings.NewReader(o.params)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				o.explainE = fmt.Sprintf("%v: %s", err, stderr.String())
				return
			}
			var v struct {
				Decision, Option string
				Caveats          []string
			}
			if err := json.Unmarshal(out, &v); err != nil {
				o.explainE = fmt.Sprintf("%v: %s", err, out)
				return
			}
			o.explain, o.caveats = v.Decision, v.Caveats
			if v.Decision == "allow" || v.Decision == "deny" {
				o.explain += " " + v.Option
			}
		}()
	}
	wg.Wait()
}

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o600) }

// TestExplainAgreesWithTheLiveBrokerOnEveryRequest runs the corpus through
// brokers in each mode and with each kind of project file and session set-up.
func TestExplainAgreesWithTheLiveBrokerOnEveryRequest(t *testing.T) {
	t.Parallel()
	core := []string{"plain", "announced", "nulls", "harmless_then_this", "unknown_session"}
	project := "[[rule]]\ndecision = \"allow\"\ncommand = [\"rm *\"]\n\n[[rule]]\ndecision = \"deny\"\npath = \"./src/secret/**\"\n"
	cases := []struct {
		name   string
		o      deciderOptions
		corpus []diffRequest
	}{
		{"default_full", deciderOptions{rules: decideRules}, diffRequests()},
		{"mode_accept_edits", deciderOptions{rules: decideRules, args: []string{"--mode", "accept-edits"}}, diffRequests(core...)},
		{"mode_plan", deciderOptions{rules: decideRules, args: []string{"--mode", "plan"}}, diffRequests(core...)},
		{"mode_dont_ask", deciderOptions{rules: decideRules, args: []string{"--mode", "dont-ask"}}, diffRequests(core...)},
		{"mode_bypass", deciderOptions{rules: decideRules, args: []string{"--mode", "bypass"}}, diffRequests(core...)},
		{"project_untrusted", deciderOptions{rules: decideRules, project: project}, diffRequests(core...)},
		{"project_trusted", deciderOptions{rules: decideRules, project: project, prepare: func(d *decider) { trustProject(t, d, d.cwd) }}, diffRequests(core...)},
		{"project_broken", deciderOptions{rules: decideRules, project: "[[rule]\n"}, diffRequests(core...)},
		{"remember_session", deciderOptions{rules: "remember = \"session\"\n" + decideRules}, diffRequests("plain")},
		{"subagents", deciderOptions{rules: decideRules, project: project, initialize: subagentsInit},
			diffRequests("subagent_child", "subagent_below", "subagent_in_lib", "subagent_outside", "subagent_grandchild", "v2_subject")},
		{"mcp_servers", deciderOptions{rules: decideRules + "\n[mcp.github]\ntrust_annotations = true\n",
			mcpServers: `[{"name":"github","command":"$MCPSERVER","args":[],"env":[]},{"type":"http","name":"docs","url":"https://docs.example/mcp","headers":[]}]`},
			diffRequests("plain", "announced", "case_members")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			trace := filepath.Join(t.TempDir(), "trace.jsonl")
			c.o.args = append(c.o.args, "--trace", trace)
			d := startDecider(t, c.o)
			d.noisy = true
			runDifferential(t, d, trace, c.corpus)
		})
	}
}
