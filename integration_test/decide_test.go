//go:build linux

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The tests in this file pin the broker's live permission decisions, as the
// README's "Deciding live" promises them, with the request shapes real agents
// send: a request the rules allow or deny is answered by the broker with the
// option of the right kind and never reaches the editor; everything else
// reaches the editor byte for byte, and the editor's answer reaches the agent
// byte for byte.

// decideRules is the rule file most decision tests load with --config: some
// commands, paths and MCP tools allowed, others denied.
const decideRules = `# rules for the live-decision tests
[[rule]]
id = "git-read"
decision = "allow"
command = ["git status", "git log *", "git diff *"]

[[rule]]
id = "read-tools"
decision = "allow"
command = ["cat *", "ls *"]

[[rule]]
id = "no-force-push"
decision = "deny"
reason = "force pushes rewrite shared history"
command = ["git push --force *", "git push -f *"]

[[rule]]
id = "no-installs"
decision = "deny"
reason = "dependencies come from the lock file"
command = ["npm install *", "pip install *"]

[[rule]]
id = "edit-src"
decision = "allow"
kind = "edit"
path = "./src/**"

[[rule]]
id = "no-generated-edits"
decision = "deny"
reason = "generated code is rebuilt, not edited"
path = "./gen/**"

[[rule]]
id = "github-read"
decision = "allow"
mcp = "github/get_*"
`

// decider is one broker with rules in front of the fake agent, with one ACP
// session ("sess_1") open in a directory of its own.
type decider struct {
	*session
	root   string // holds everything below
	cwd    string // the session's working directory (root/project)
	lib    string // the session's additionalDirectories entry (root/lib)
	config string // the --config file, if any
	audit  string // the --audit file
	state  string // XDG_STATE_HOME (root/state) unless deciderOptions.env sets one
	marks  int
	// noisy is set by tests that expect warnings or errors on stderr.
	noisy bool
	// setup is session/new as the agent received it, when it had MCP servers.
	setup string

	// The dry-run cross-check (explainAgrees): how explain is run like
	// this broker, and the named opt-outs for decisions that depend on
	// what explain cannot know.
	env         []string
	explainArgs []string
	explainOff  string // the whole conversation is not cross-checked, and why
	skipNext    string // the next request is not cross-checked, and why
	explained   int

	// tell is the [ask] tell of the --config file ("denials" unless it
	// says otherwise): which of the broker's own answers decided expects
	// the broker to tell the editor of, first; told holds those lines.
	tell string
	told []string
}

type deciderOptions struct {
	rules   string   // content of a --config file; none if empty
	project string   // content of .acp-broker.toml in the session's directory; none if empty
	args    []string // more broker flags
	env     []string // more environment
	// mcpServers is the session's mcpServers list (JSON, expanded); the
	// agent's copy of session/new, rewritten by the broker, is then in
	// decider.setup. Empty means [], which the broker passes unchanged.
	mcpServers string
	// inProject starts the broker in the session's directory, so that its
	// project file is the one loaded at start-up too.
	inProject bool
	// prepare, if set, runs once the directories and files exist, before
	// the broker starts.
	prepare func(d *decider)
	// envFor, if set, is more environment that names the decider's
	// directories.
	envFor func(d *decider) []string
	// initialize, if set, is the editor's initialize params (JSON), sent
	// and answered by the agent (with the protocolVersion asked for)
	// before the session is opened.
	initialize string
	// open, if set, opens the session instead of the plain session/new:
	// for tests that script initialize or the agent's answer.
	open func(d *decider)
}

// startDecider writes the rule files, starts the broker in front of the fake
// agent, and opens session sess_1 in root/project. The broker itself runs in
// root, so the only project layer is the one of the session's directory.
func startDecider(t *testing.T, o deciderOptions) *decider {
	t.Helper()
	// Allow rules match a path only if its symlink-resolved form matches
	// too: use the resolved temporary directory in every request.
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := &decider{
		root:  root,
		cwd:   filepath.Join(root, "project"),
		lib:   filepath.Join(root, "lib"),
		audit: filepath.Join(root, "audit.jsonl"),
		state: filepath.Join(root, "state"),
	}
	for _, dir := range []string{d.cwd, filepath.Join(d.cwd, "src"), filepath.Join(d.cwd, "gen"), d.lib} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"--log-level", "warn", "--audit", d.audit}
	d.tell = "denials"
	if m := tellSetting.FindStringSubmatch(o.rules); m != nil {
		d.tell = m[1]
	}
	if o.rules != "" {
		d.config = filepath.Join(root, "rules.toml")
		writeFileAtomic(t, d.config, o.rules)
		args = append(args, "--config", d.config)
	}
	if o.project != "" {
		writeFileAtomic(t, filepath.Join(d.cwd, ".acp-broker.toml"), o.project)
	}
	// A state directory of its own: remembered answers and trust must not
	// leak between tests through the shared home.
	env := append([]string{"XDG_STATE_HOME=" + d.state}, o.env...)
	if o.prepare != nil {
		o.prepare(d)
	}
	if o.envFor != nil {
		env = append(env, o.envFor(d)...)
	}
	dir := root
	if o.inProject {
		dir = d.cwd
	}
	d.env = env
	d.explainArgs = explainArgs(append(args, o.args...))
	d.session = startFake(t, options{broker: true, brokerArgs: append(args, o.args...), env: env, dir: dir})
	if o.initialize != "" {
		d.EditorToAgent(`{"jsonrpc":"2.0","id":"init-1","method":"initialize","params":` + o.initialize + `}`)
		var asked struct{ ProtocolVersion json.RawMessage }
		_ = json.Unmarshal([]byte(o.initialize), &asked)
		d.AgentToEditor(`{"jsonrpc":"2.0","id":"init-1","result":{"protocolVersion":` + string(asked.ProtocolVersion) + `,"agentCapabilities":{}}}`)
	}
	if o.open != nil {
		o.open(d)
		return d
	}
	if o.mcpServers == "" {
		d.EditorToAgent(d.expand(`{"jsonrpc":"2.0","id":"new-1","method":"session/new","params":{"cwd":"$CWD","additionalDirectories":["$LIB"],"mcpServers":[]}}`))
	} else {
		d.EditorSend(d.expand(`{"jsonrpc":"2.0","id":"new-1","method":"session/new","params":{"cwd":"$CWD","additionalDirectories":["$LIB"],"mcpServers":` + o.mcpServers + `}}`))
		d.setup = d.AgentRecv()
	}
	d.AgentToEditor(`{"jsonrpc":"2.0","id":"new-1","result":{"sessionId":"sess_1","modes":{"currentModeId":"default","availableModes":[]}}}`)
	return d
}

// brokerRecheck is how often, at most, a running broker checks its rule
// files, the trust store and the remembered answers for changes (the
// README's Hot reload).
const brokerRecheck = 5 * time.Millisecond

// afterChange waits until a change just made to one of those files is seen
// by the broker's next request.
func afterChange() { time.Sleep(brokerRecheck) }

// writeFileAtomic replaces path with content through a rename, so the file
// gets a new inode and the broker's change check always sees it, and waits
// until it does (afterChange).
func writeFileAtomic(t testing.TB, path, content string) {
	t.Helper()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmp.WriteString(content); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		t.Fatal(err)
	}
	afterChange()
}

// jsonText is s as it appears inside a JSON string literal.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// expand replaces $CWD, $LIB, $ROOT, $HOME and $MCPSERVER in a message
// template.
func (d *decider) expand(s string) string {
	return strings.NewReplacer(
		"$CWD", jsonText(d.cwd),
		"$LIB", jsonText(d.lib),
		"$ROOT", jsonText(d.root),
		"$HOME", jsonText(homeDir),
		"$MCPSERVER", jsonText(mcpServerBin),
	).Replace(s)
}

// step runs one named step of the conversation as a subtest, so a failure
// names the step. It reports whether the step passed; the caller stops at the
// first failure, since the conversation's state is then unknown.
func (d *decider) step(t *testing.T, name string, f func()) bool {
	t.Helper()
	parent := d.session.t
	defer func() { d.session.t = parent }()
	return t.Run(name, func(t *testing.T) {
		d.session.t = t
		f()
	})
}

// marker is a notification the agent sends right after a request the broker
// should answer itself: the editor's next line must be the marker, so the
// request never reached the editor.
func (d *decider) marker() string {
	d.marks++
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"marker %d"}}}}`, d.marks)
}

// requestID returns the raw id of a request, as it must be echoed.
func requestID(t testing.TB, req string) string {
	t.Helper()
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal([]byte(req), &m); err != nil || m.ID == nil {
		t.Fatalf("test bug: not a request with an id: %s", req)
	}
	return string(m.ID)
}

// selected is the exact answer the broker sends when it picks an option.
func selected(id, optionID string) string {
	opt, _ := json.Marshal(optionID)
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":%s}}}`, id, opt)
}

// tellSetting finds the [ask] tell of a rule file.
var tellSetting = regexp.MustCompile(`(?m)^tell\s*=\s*"(\w+)"`)

// decided requires the broker to answer the (expanded) request itself with
// optionID, byte for byte, and the editor never to see the request, only,
// where [ask] tell says so, the broker telling it what it answered (kept in
// told); and the dry run to decide it the same (see explainAgrees).
func (d *decider) decided(req, optionID string) {
	d.t.Helper()
	req = d.expand(req)
	mark := d.marker()
	before := d.sentSoFar()
	d.AgentSend(req, mark)
	decision := decisionOfOption(req, optionID)
	defer d.explainAgrees(req, before, decision, optionID)
	// In sess_1 the broker tells what [ask] tell says; in a session the
	// editor did not open it cannot, in a subagent's it may.
	verb := map[string]string{"allow": "allowed", "deny": "denied"}[decision]
	tells := d.tell == "all" || (d.tell == "denials" && decision == "deny")
	var m struct {
		Params struct{ SessionID string } `json:"params"`
	}
	_ = json.Unmarshal([]byte(req), &m)
	got := d.EditorRecv()
	if title, _ := toldTitle(got); isTold(got) {
		if !tells || !strings.HasPrefix(title, "acp-broker "+verb+": ") {
			d.t.Fatalf("the broker told the editor\n  %s\nof a request it %s with [ask] tell = %q", clip(got), verb, d.tell)
		}
		d.told = append(d.told, got)
		got = d.EditorRecv()
	} else if tells && m.Params.SessionID == "sess_1" {
		d.t.Fatalf("editor received\n  %s\nwant the broker telling it that it %s the request, then the marker", clip(got), verb)
	}
	// The editor gets either the request (forwarded) or only the marker.
	if got != mark {
		if got == req {
			d.t.Fatalf("the broker forwarded the request to the editor instead of answering %q itself", optionID)
		}
		d.t.Fatalf("editor received\n  %s\nwant the marker\n  %s", clip(got), mark)
	}
	d.AgentExpect(selected(requestID(d.t, req), optionID))
}

// asked requires the (expanded) request to reach the editor unchanged, and
// the editor's answer to reach the agent unchanged, or as agentGets says
// for an "always"; and the dry run to ask too (see explainAgrees).
func (d *decider) asked(req, answer string) {
	d.t.Helper()
	d.askedThen(req, answer, agentGets(d.t, d.expand(req), answer))
}

// askedThen is asked, with the agent's answer given: sent.
func (d *decider) askedThen(req, answer, sent string) {
	d.t.Helper()
	req = d.expand(req)
	mark := d.marker()
	before := d.sentSoFar()
	d.AgentSend(req, mark)
	if got := d.EditorRecv(); got != req {
		if got == mark {
			d.t.Fatalf("the broker did not forward the request; the agent got: %s", d.agentLineSoon())
		}
		d.t.Fatalf("editor received\n  %s\nwant the request unchanged\n  %s", clip(got), clip(req))
	}
	d.EditorExpect(mark)
	// Before the answer, which may be remembered.
	d.explainAgrees(req, before, "ask", "")
	// Had the broker also answered the agent, that answer would be the
	// agent's next line instead of the editor's.
	d.EditorSend(answer)
	d.AgentExpect(sent)
}

// explainArgs are the flags of `acp-broker rules explain` that load the
// rules and mode a broker started with args loads, and protect the files it
// writes (its audit log, trace and log file).
func explainArgs(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		name, value, inline := strings.Cut(args[i], "=")
		if !slices.Contains([]string{"--config", "--mode", "--audit", "--trace", "--log-file"}, name) {
			continue
		}
		if !inline && i+1 < len(args) {
			i++
			value = args[i]
		}
		switch {
		case name == "--config" || name == "--mode":
			out = append(out, name, value)
		case value != "off":
			out = append(out, "--protect", value)
		}
	}
	return out
}

// liveOnly opts the next request out of the dry-run cross-check, visibly:
// for a decision that depends on what explain cannot know (an answer
// remembered for this session only, a channel's answer).
func (d *decider) liveOnly(reason string) { d.skipNext = reason }

// decisionOfOption is the decision an option of req stands for.
func decisionOfOption(req, optionID string) string {
	var m struct {
		Params struct {
			Options []struct {
				OptionID string `json:"optionId"`
				Kind     string `json:"kind"`
			} `json:"options"`
		} `json:"params"`
	}
	_ = json.Unmarshal([]byte(req), &m)
	for _, o := range m.Params.Options {
		if o.OptionID == optionID {
			if strings.HasPrefix(o.Kind, "allow") {
				return "allow"
			}
			return "deny"
		}
	}
	return "option " + optionID + " not offered"
}

// explainAgrees runs a permission request the live broker just decided
// (live is "allow", "deny" or "ask"; option the option it chose) through
// `acp-broker rules explain --json`, with this broker's config, mode,
// environment and directory, and a transcript of what both sides were made
// to send before it, and fails the test when the dry run decides otherwise.
// Every decided and asked permission request is checked this way, unless a
// test opted out by name (liveOnly, explainOff). Other methods are not the
// dry run's.
func (d *decider) explainAgrees(req string, before []sentLine, live, option string) {
	d.t.Helper()
	if d.t.Failed() {
		return // the live step already failed: its decision is unknown
	}
	var m map[string]json.RawMessage
	var method string
	if json.Unmarshal([]byte(req), &m) != nil || json.Unmarshal(m["method"], &method) != nil || method != "session/request_permission" {
		return
	}
	switch {
	case d.explainOff != "":
		d.t.Logf("dry-run cross-check off for this conversation: %s", d.explainOff)
		return
	case d.skipNext != "":
		d.t.Logf("dry-run cross-check skipped for this request: %s", d.skipNext)
		d.skipNext = ""
		return
	}
	d.explained++
	transcript := filepath.Join(d.root, fmt.Sprintf("explain-%d.jsonl", d.explained))
	var lines []byte
	for _, l := range before {
		if !json.Valid([]byte(l.line)) {
			continue // the broker drops it; the replay would too
		}
		lines = append(lines, `{"dir":"`+l.from+`","message":`+l.line+"}\n"...)
	}
	if err := os.WriteFile(transcript, lines, 0o600); err != nil {
		d.t.Fatal(err)
	}
	args := append([]string{"rules", "explain", "--json", "--transcript", transcript}, d.explainArgs...)
	cmd := exec.Command(brokerBin, args...)
	cmd.Env = append(testEnv(), d.env...)
	cmd.Dir = d.root
	cmd.Stdin = bytes.NewReader(m["params"])
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		d.t.Errorf("rules explain failed: %v\n%s", err, stderr.String())
		return
	}
	var got struct {
		Decision string   `json:"decision"`
		Option   string   `json:"option"`
		Source   string   `json:"source"`
		Reason   string   `json:"reason"`
		Caveats  []string `json:"caveats"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		d.t.Errorf("rules explain printed no verdict: %v\n%s", err, out)
		return
	}
	if got.Decision == "ask" && live != "ask" && len(got.Caveats) > 0 {
		// Explain names the state only the running broker knows; it
		// never decides otherwise than live, it only asks.
		d.t.Logf("rules explain asks where the live broker decided %s, with the caveats %q", live, got.Caveats)
		return
	}
	if got.Decision != live || (live != "ask" && got.Option != option) {
		d.t.Errorf("the dry run and the live broker disagree on\n  %s\nlive: %s %s; rules explain: %s %s (%s: %s)\ntranscript: %s",
			clip(req), live, option, got.Decision, got.Option, got.Source, got.Reason, transcript)
	}
}

// agentLineSoon describes the agent's next line, for failure messages.
func (d *decider) agentLineSoon() string {
	line, err := d.in.take(5*time.Second, nil)
	if err != nil {
		return fmt.Sprintf("nothing (%v)", err)
	}
	return clip(string(line))
}

// refused requires the broker to answer the (expanded) request with a
// -32000 error whose message starts "acp-broker denied this: ", and the
// editor never to see it. It returns the message.
func (d *decider) refused(req string) string {
	d.t.Helper()
	req = d.expand(req)
	mark := d.marker()
	d.AgentSend(req, mark)
	if got := d.EditorRecv(); got != mark {
		if got == req {
			d.t.Fatalf("the broker forwarded the request to the editor instead of refusing it")
		}
		d.t.Fatalf("editor received\n  %s\nwant the marker\n  %s", clip(got), mark)
	}
	msg := expectError(d.t, d.AgentRecv(), requestID(d.t, req), -32000)
	if !strings.HasPrefix(msg, "acp-broker denied this: ") {
		d.t.Errorf("error message %q does not start with %q", msg, "acp-broker denied this: ")
	}
	return msg
}

// finish ends the conversation cleanly and requires that neither side got a
// line the test did not expect (a stray answer, a $/cancel_request), and,
// unless the test said otherwise, that the broker (at --log-level warn)
// printed nothing.
func (d *decider) finish() {
	d.t.Helper()
	d.Finish()
	if text := d.stderrText(); text != "" && !d.noisy {
		d.t.Errorf("stderr is not empty:\n%s", text)
	}
	if u := d.in.unused(); len(u) > 0 {
		d.t.Errorf("the agent received %d unexpected lines, first: %s", len(u), clip(string(u[0])))
	}
	if u := d.out.unused(); len(u) > 0 {
		d.t.Errorf("the editor received %d unexpected lines, first: %s", len(u), clip(string(u[0])))
	}
}

// A decideCase is one step of a conversation: notifications the agent sends
// first (forwarded unchanged), then a permission request, which the broker
// must answer with option, or, when option is empty, forward to the editor,
// whose answer must reach the agent.
type decideCase struct {
	name   string
	before []string
	req    string
	option string
	answer string
	// asIs says that the editor's answer reaches the agent unchanged
	// where agentGets, which reads the request alone, would expect its
	// once-option (a switch_mode request whose kind only an earlier
	// tool_call names).
	asIs bool
}

func (d *decider) play(t *testing.T, cases []decideCase) {
	t.Helper()
	for _, c := range cases {
		ok := d.step(t, c.name, func() {
			for _, n := range c.before {
				d.AgentToEditor(d.expand(n))
			}
			switch {
			case c.option != "":
				d.decided(c.req, c.option)
			case c.asIs:
				d.askedThen(c.req, c.answer, c.answer)
			default:
				d.asked(c.req, c.answer)
			}
		})
		if !ok {
			return
		}
	}
	d.finish()
}

// The option lists real agents send (see the ACP notes).
const (
	claudeOptions    = `[{"optionId":"allow_always","name":"Always Allow","kind":"allow_always"},{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]`
	claudeNewOptions = `[{"optionId":"allow-with-updates","name":"Yes, and don't ask again for these commands","kind":"allow_always"},{"optionId":"allow-once","name":"Yes","kind":"allow_once"},{"optionId":"reject","name":"No","kind":"reject_once"}]`
	// Codex: the reject_always comes before the reject_once options, and
	// "denied" (continue the turn) before "abort" (stop it).
	codexOptions     = `[{"optionId":"approved-execpolicy-amendment","name":"Yes, and don't ask again for commands that start with this","kind":"allow_always"},{"optionId":"approved-for-session","name":"Yes, for this session","kind":"allow_always"},{"optionId":"approved","name":"Yes","kind":"allow_once"},{"optionId":"network-policy-amendment-deny","name":"No, and block this host","kind":"reject_always"},{"optionId":"denied","name":"No, continue without running it","kind":"reject_once"},{"optionId":"abort","name":"No, and tell Codex what to do differently","kind":"reject_once"}]`
	geminiOptions    = `[{"optionId":"proceed_always","name":"Always Allow","kind":"allow_always"},{"optionId":"proceed_once","name":"Allow","kind":"allow_once"},{"optionId":"cancel","name":"Reject","kind":"reject_once"}]`
	geminiMCPOptions = `[{"optionId":"proceed_always_server","name":"Always Allow All Server Tools","kind":"allow_always"},{"optionId":"proceed_always_tool","name":"Always Allow Tool","kind":"allow_always"},{"optionId":"proceed_once","name":"Allow","kind":"allow_once"},{"optionId":"cancel","name":"Reject","kind":"reject_once"}]`
)

// permission builds a session/request_permission for sess_1.
func permission(id, toolCall, options string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"session/request_permission","params":{"sessionId":"sess_1","toolCall":` + toolCall + `,"options":` + options + `}}`
}

// toolCallUpdate builds a session/update for sess_1 of the given kind
// (tool_call or tool_call_update) with the fields of update.
func toolCallUpdate(kind, fields string) string {
	return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"` + kind + `",` + fields + `}}}`
}

// answer builds the editor's answer choosing optionID.
func answer(id, optionID string) string { return selected(id, optionID) }

// TestDecideClaudeCode: claude-agent-acp's request shapes (Bash with a
// string command, Read, Edit with a diff, MCP tools named mcp__s__t, and
// newer builds whose permission request carries only the toolCallId and
// title) against a rule file.
func TestDecideClaudeCode(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules})
	d.play(t, []decideCase{
		{
			name: "bash_allowed_by_rule_gets_allow_once_not_the_first_option",
			before: []string{toolCallUpdate("tool_call",
				`"toolCallId":"toolu_01","title":"git status","kind":"execute","status":"pending","rawInput":{"command":"git status","description":"Show working tree status"},"_meta":{"claudeCode":{"toolName":"Bash"}}`)},
			req:    permission(`1`, `{"toolCallId":"toolu_01","title":"git status","kind":"execute","rawInput":{"command":"git status","description":"Show working tree status"}}`, claudeOptions),
			option: "allow",
		},
		{
			name:   "bash_denied_by_rule_gets_reject",
			req:    permission(`2`, `{"toolCallId":"toolu_02","title":"git push --force origin main","kind":"execute","rawInput":{"command":"git push --force origin main","description":"Force push"}}`, claudeNewOptions),
			option: "reject",
		},
		{
			name:   "bash_newer_options_allowed_gets_allow-once",
			req:    permission(`3`, `{"toolCallId":"toolu_03","title":"git diff --stat","kind":"execute","rawInput":{"command":"git diff --stat"}}`, claudeNewOptions),
			option: "allow-once",
		},
		{
			name:   "bash_compound_with_unlisted_part_asked",
			req:    permission(`4`, `{"toolCallId":"toolu_04","title":"git status && rm -rf build","kind":"execute","rawInput":{"command":"git status && rm -rf build"}}`, claudeOptions),
			answer: answer(`4`, "reject"),
		},
		{
			name:   "bash_compound_with_denied_part_rejected",
			req:    permission(`5`, `{"toolCallId":"toolu_05","title":"git status; git push -f origin main","kind":"execute","rawInput":{"command":"git status; git push -f origin main"}}`, claudeOptions),
			option: "reject",
		},
		{
			name:   "read_in_project_allowed_by_default",
			req:    permission(`6`, `{"toolCallId":"toolu_06","title":"Read README.md","kind":"read","rawInput":{"file_path":"$CWD/README.md"},"locations":[{"path":"$CWD/README.md","line":1}]}`, claudeOptions),
			option: "allow",
		},
		{
			name:   "read_of_protected_path_asked",
			req:    permission(`7`, `{"toolCallId":"toolu_07","title":"Read ~/.ssh/id_ed25519","kind":"read","rawInput":{"file_path":"$HOME/.ssh/id_ed25519"},"locations":[{"path":"$HOME/.ssh/id_ed25519"}]}`, claudeOptions),
			answer: `{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"cancelled"}}}`,
		},
		{
			name: "edit_in_src_allowed_by_rule",
			req: permission(`8`, `{"toolCallId":"toolu_08","title":"Edit src/app.ts","kind":"edit","rawInput":{"file_path":"$CWD/src/app.ts","old_string":"let x = 1","new_string":"const x = 1"},`+
				`"content":[{"type":"diff","path":"$CWD/src/app.ts","oldText":"let x = 1","newText":"const x = 1"}],"locations":[{"path":"$CWD/src/app.ts"}]}`, claudeOptions),
			option: "allow",
		},
		{
			name: "edit_in_gen_denied_by_rule",
			req: permission(`9`, `{"toolCallId":"toolu_09","title":"Edit gen/api.ts","kind":"edit","rawInput":{"file_path":"$CWD/gen/api.ts","old_string":"a","new_string":"b"},`+
				`"content":[{"type":"diff","path":"$CWD/gen/api.ts","oldText":"a","newText":"b"}],"locations":[{"path":"$CWD/gen/api.ts"}]}`, claudeNewOptions),
			option: "reject",
		},
		{
			name: "edit_elsewhere_asked",
			req: permission(`10`, `{"toolCallId":"toolu_10","title":"Edit package.json","kind":"edit","rawInput":{"file_path":"$CWD/package.json","old_string":"1.0.0","new_string":"1.0.1"},`+
				`"content":[{"type":"diff","path":"$CWD/package.json","oldText":"1.0.0","newText":"1.0.1"}],"locations":[{"path":"$CWD/package.json"}]}`, claudeOptions),
			answer: answer(`10`, "allow_always"),
		},
		{
			name: "mcp_get_issue_allowed_by_rule",
			before: []string{toolCallUpdate("tool_call",
				`"toolCallId":"toolu_11","title":"mcp__github__get_issue","kind":"other","status":"pending","rawInput":{"owner":"acme","repo":"app","issue_number":7},"_meta":{"claudeCode":{"toolName":"mcp__github__get_issue"}}`)},
			req:    permission(`11`, `{"toolCallId":"toolu_11","title":"mcp__github__get_issue","rawInput":{"owner":"acme","repo":"app","issue_number":7}}`, claudeOptions),
			option: "allow",
		},
		{
			name: "mcp_create_issue_asked",
			req: permission(`12`, `{"toolCallId":"toolu_12","title":"mcp__github__create_issue","kind":"other","rawInput":{"owner":"acme","repo":"app","title":"x"},"_meta":{"claudeCode":{"toolName":"mcp__github__create_issue"}}}`,
				claudeOptions),
			answer: answer(`12`, "allow"),
		},
		{
			// Newer builds put kind, command and tool name only on the
			// earlier tool_call; the request says no more than id and title.
			name: "merged_force_push_known_only_from_updates_rejected",
			before: []string{toolCallUpdate("tool_call",
				`"toolCallId":"toolu_13","kind":"execute","title":"git push --force origin main","status":"pending","rawInput":{"command":"git push --force origin main"},"_meta":{"claudeCode":{"toolName":"Bash"}}`)},
			req:    permission(`13`, `{"toolCallId":"toolu_13","title":"git push --force origin main"}`, claudeNewOptions),
			option: "reject",
		},
		{
			name: "merged_command_from_a_later_tool_call_update_rejected",
			before: []string{
				toolCallUpdate("tool_call", `"toolCallId":"toolu_14","kind":"execute","title":"Terminal","status":"pending","rawInput":{},"_meta":{"claudeCode":{"toolName":"Bash"}}`),
				toolCallUpdate("tool_call_update", `"toolCallId":"toolu_14","title":"npm install left-pad","rawInput":{"command":"npm install left-pad"}`),
			},
			req:    permission(`14`, `{"toolCallId":"toolu_14","title":"npm install left-pad"}`, claudeNewOptions),
			option: "reject",
		},
		{
			name: "merged_allowed_command_gets_allow-once",
			before: []string{toolCallUpdate("tool_call",
				`"toolCallId":"toolu_15","kind":"execute","title":"git log --oneline","status":"pending","rawInput":{"command":"git log --oneline"},"_meta":{"claudeCode":{"toolName":"Bash"}}`)},
			req:    permission(`15`, `{"toolCallId":"toolu_15","title":"git log --oneline"}`, claudeNewOptions),
			option: "allow-once",
		},
		{
			// The same request with no earlier update: the broker knows no
			// kind and no command, so it cannot decide and asks.
			name:   "same_shape_without_updates_asked",
			req:    permission(`16`, `{"toolCallId":"toolu_16","title":"git push --force origin main"}`, claudeNewOptions),
			answer: answer(`16`, "reject"),
		},
	})
}

// TestDecideCodex: codex-acp's shapes (argv commands wrapped in bash -lc,
// with cwd and reason; read-only commands marked kind read; patches as
// diffs; MCP tools titled "Tool: s/t") and its six options, of which only
// "approved" is allow_once and "denied" is the first reject_once.
func TestDecideCodex(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules})
	d.play(t, []decideCase{
		{
			name:   "exec_allowed_gets_approved",
			req:    permission(`"req-1"`, `{"toolCallId":"call_1","title":"git status","kind":"execute","status":"pending","rawInput":{"command":["/bin/bash","-lc","git status"],"cwd":"$CWD","reason":"check the tree"}}`, codexOptions),
			option: "approved",
		},
		{
			name:   "exec_denied_gets_denied_not_abort_nor_reject_always",
			req:    permission(`"req-2"`, `{"toolCallId":"call_2","title":"npm install left-pad","kind":"execute","status":"pending","rawInput":{"command":["/bin/bash","-lc","npm install left-pad"],"cwd":"$CWD","reason":"need a dependency"}}`, codexOptions),
			option: "denied",
		},
		{
			name:   "exec_unlisted_asked",
			req:    permission(`"req-3"`, `{"toolCallId":"call_3","title":"make","kind":"execute","status":"pending","rawInput":{"command":["/bin/bash","-lc","make"],"cwd":"$CWD","reason":"build"}}`, codexOptions),
			answer: answer(`"req-3"`, "approved-for-session"),
		},
		{
			name:   "read_kind_command_allowed_as_a_command",
			req:    permission(`"req-4"`, `{"toolCallId":"call_4","title":"cat README.md","kind":"read","status":"pending","rawInput":{"command":["/bin/bash","-lc","cat README.md"],"cwd":"$CWD"}}`, codexOptions),
			option: "approved",
		},
		{
			// kind read says nothing: the command names a protected path.
			name:   "read_kind_command_naming_dotenv_asked",
			req:    permission(`"req-5"`, `{"toolCallId":"call_5","title":"cat .env","kind":"read","status":"pending","rawInput":{"command":["/bin/bash","-lc","cat .env"],"cwd":"$CWD"}}`, codexOptions),
			answer: answer(`"req-5"`, "denied"),
		},
		{
			// A relative argument is resolved against Codex's rawInput.cwd.
			name:   "relative_argument_under_rawInput_cwd_in_ssh_asked",
			req:    permission(`"req-6"`, `{"toolCallId":"call_6","title":"cat id_rsa","kind":"read","status":"pending","rawInput":{"command":["/bin/bash","-lc","cat id_rsa"],"cwd":"$HOME/.ssh"}}`, codexOptions),
			answer: answer(`"req-6"`, "abort"),
		},
		{
			// A shell is seen through only where the system keeps its
			// shells: ./bash is whatever the agent put there.
			name:   "shell_of_the_agents_own_asked",
			req:    permission(`"req-12"`, `{"toolCallId":"call_12","title":"git status","kind":"execute","status":"pending","rawInput":{"command":["./bash","-lc","git status"],"cwd":"$CWD"}}`, codexOptions),
			answer: answer(`"req-12"`, "denied"),
		},
		{
			name:   "shell_in_tmp_asked",
			req:    permission(`"req-13"`, `{"toolCallId":"call_13","title":"git status","kind":"execute","status":"pending","rawInput":{"command":"/tmp/x/sh -c 'git status'","cwd":"$CWD"}}`, codexOptions),
			answer: answer(`"req-13"`, "denied"),
		},
		{
			name:   "plain_argv_without_shell_denied",
			req:    permission(`"req-7"`, `{"toolCallId":"call_7","title":"pip install requests","kind":"execute","rawInput":{"command":["pip","install","requests"],"cwd":"$CWD"}}`, codexOptions),
			option: "denied",
		},
		{
			name: "patch_in_src_allowed",
			req: permission(`"req-8"`, `{"toolCallId":"call_8","title":"Edit src/lib.rs","kind":"edit","status":"pending","content":[{"type":"diff","path":"$CWD/src/lib.rs","oldText":"fn a() {}","newText":"fn a() { b() }"}],"locations":[{"path":"$CWD/src/lib.rs"}]}`,
				codexOptions),
			option: "approved",
		},
		{
			name: "patch_in_gen_denied",
			req: permission(`"req-9"`, `{"toolCallId":"call_9","title":"Edit gen/schema.rs","kind":"edit","status":"pending","content":[{"type":"diff","path":"$CWD/gen/schema.rs","oldText":"","newText":"x"}],"locations":[{"path":"$CWD/gen/schema.rs"}]}`,
				codexOptions),
			option: "denied",
		},
		{
			name:   "mcp_tool_allowed",
			req:    permission(`"req-10"`, `{"toolCallId":"call_10","title":"Tool: github/get_issue","kind":"other","status":"pending","rawInput":{"server":"github","tool":"get_issue","arguments":{"issue_number":7}}}`, codexOptions),
			option: "approved",
		},
		{
			name:   "mcp_tool_not_allowed_asked",
			req:    permission(`"req-11"`, `{"toolCallId":"call_11","title":"Tool: github/merge_pull_request","kind":"other","status":"pending","rawInput":{"server":"github","tool":"merge_pull_request","arguments":{"number":3}}}`, codexOptions),
			answer: `{"jsonrpc":"2.0","id":"req-11","error":{"code":-32603,"message":"editor gave up"}}`,
		},
	})
}

// TestDecideGemini: gemini-cli sends no rawInput: a shell command is only the
// title of an execute request, paths are in locations and diffs, MCP tools
// are titled "tool (server MCP Server)".
func TestDecideGemini(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules})
	d.play(t, []decideCase{
		{
			name:   "shell_title_allowed_gets_proceed_once",
			req:    permission(`1`, `{"toolCallId":"run_shell_command-1","title":"git log --oneline","kind":"execute","status":"pending","content":[]}`, geminiOptions),
			option: "proceed_once",
		},
		{
			name:   "shell_title_with_denied_part_gets_cancel",
			req:    permission(`2`, `{"toolCallId":"run_shell_command-2","title":"git status; git push --force","kind":"execute","status":"pending","content":[]}`, geminiOptions),
			option: "cancel",
		},
		{
			name:   "shell_title_unlisted_asked",
			req:    permission(`3`, `{"toolCallId":"run_shell_command-3","title":"rm -rf build","kind":"execute","status":"pending","content":[]}`, geminiOptions),
			answer: answer(`3`, "proceed_always"),
		},
		{
			name: "write_in_src_allowed",
			req: permission(`4`, `{"toolCallId":"write_file-4","title":"Writing to src/x.go","kind":"edit","status":"pending","locations":[{"path":"$CWD/src/x.go"}],"content":[{"type":"diff","path":"$CWD/src/x.go","oldText":null,"newText":"package x\n"}]}`,
				geminiOptions),
			option: "proceed_once",
		},
		{
			name: "write_in_gen_denied",
			req: permission(`5`, `{"toolCallId":"write_file-5","title":"Writing to gen/x.go","kind":"edit","status":"pending","locations":[{"path":"$CWD/gen/x.go"}],"content":[{"type":"diff","path":"$CWD/gen/x.go","oldText":"a","newText":"b"}]}`,
				geminiOptions),
			option: "cancel",
		},
		{
			name:   "mcp_tool_allowed",
			req:    permission(`6`, `{"toolCallId":"github_get_issue-6","title":"get_issue (github MCP Server)","kind":"other","status":"pending","content":[]}`, geminiMCPOptions),
			option: "proceed_once",
		},
		{
			name:   "mcp_tool_not_allowed_asked",
			req:    permission(`7`, `{"toolCallId":"github_create_issue-7","title":"create_issue (github MCP Server)","kind":"other","status":"pending","content":[]}`, geminiMCPOptions),
			answer: answer(`7`, "cancel"),
		},
	})
}

// TestDecideMissingOptionKind: a decision whose option kind the request does
// not offer goes to the human; a deny falls back to reject_always. (The
// human's allow_always, with no allow_once to send instead, reaches the
// agent as chosen, with a warning: see TestAlwaysWithoutAOnceOption.)
func TestDecideMissingOptionKind(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules})
	d.noisy = true
	d.play(t, []decideCase{
		{
			name: "allowed_without_allow_once_asked",
			req: permission(`1`, `{"toolCallId":"t1","title":"git status","kind":"execute","rawInput":{"command":"git status"}}`,
				`[{"optionId":"allow_always","name":"Always Allow","kind":"allow_always"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]`),
			answer: answer(`1`, "allow_always"),
		},
		{
			name: "allowed_read_with_no_options_asked",
			req: permission(`2`, `{"toolCallId":"t2","title":"Read README.md","kind":"read","rawInput":{"file_path":"$CWD/README.md"}}`,
				`[]`),
			answer: `{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"cancelled"}}}`,
		},
		{
			name: "denied_without_any_reject_asked",
			req: permission(`3`, `{"toolCallId":"t3","title":"git push --force origin main","kind":"execute","rawInput":{"command":"git push --force origin main"}}`,
				`[{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"allow_always","name":"Always Allow","kind":"allow_always"}]`),
			answer: answer(`3`, "allow"),
		},
		{
			name: "denied_with_only_reject_always_gets_it",
			req: permission(`4`, `{"toolCallId":"t4","title":"git push --force origin main","kind":"execute","rawInput":{"command":"git push --force origin main"}}`,
				`[{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"never","name":"Never","kind":"reject_always"},{"optionId":"never-2","name":"Never again","kind":"reject_always"}]`),
			option: "never",
		},
	})
}

// TestDecideOrderAndIDs: decided requests are answered with the agent's own
// id, whatever its type, and decisions do not disturb the order of what the
// agent sends around them.
func TestDecideOrderAndIDs(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules})
	const opts = `[{"optionId":"ok","name":"Allow","kind":"allow_once"},{"optionId":"no","name":"Reject","kind":"reject_once"}]`
	// Three requests in one burst, between notifications: two decided, one
	// forwarded. The editor sees the notifications and the asked request in
	// the agent's order.
	allowed := d.expand(permission(`"x-\u00e9"`, `{"toolCallId":"a","title":"git status","kind":"execute","rawInput":{"command":"git status"}}`, opts))
	asked := d.expand(permission(`-7`, `{"toolCallId":"b","title":"make","kind":"execute","rawInput":{"command":"make"}}`, opts))
	denied := d.expand(permission(`1.5e3`, `{"toolCallId":"c","title":"git push -f","kind":"execute","rawInput":{"command":"git push -f"}}`, opts))
	n1, n2, n3 := d.marker(), d.marker(), d.marker()
	d.AgentSend(n1, allowed, n2, asked, denied, n3)
	d.EditorExpect(n1)
	d.EditorExpect(n2)
	d.EditorExpect(asked)
	d.EditorTold("denied")
	d.EditorExpect(n3)
	d.AgentExpect(selected(`"x-\u00e9"`, "ok"))
	d.AgentExpect(selected(`1.5e3`, "no"))
	d.EditorToAgent(`{"jsonrpc":"2.0","id":-7,"result":{"outcome":{"outcome":"selected","optionId":"no"}}}`)
	d.finish()
}

// TestDecideDuplicateParamsMembersAreAsked: a permission request whose
// params repeat toolCall could be shown one way and judged another; it goes
// to the human even when the first reading is allowed.
func TestDecideDuplicateParamsMembersAreAsked(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "allow.toml")
	if err := os.WriteFile(cfg, []byte("[[rule]]\ndecision = \"allow\"\ncommand = \"git status\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startFake(t, options{broker: true, brokerArgs: []string{"--log-level", "warn", "--audit", "off", "--config", cfg},
		env: []string{"XDG_STATE_HOME=" + t.TempDir()}})
	req := `{"jsonrpc":"2.0","id":3,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"t1","kind":"execute","title":"git status","rawInput":{"command":"git status"}},"toolCall":{"toolCallId":"t1","kind":"execute","title":"rm -rf ~","rawInput":{"command":"rm -rf ~"}},"options":[{"optionId":"a","name":"Allow","kind":"allow_once"},{"optionId":"r","name":"Reject","kind":"reject_once"}]}}`
	s.AgentToEditor(req)
	s.Finish()
}
