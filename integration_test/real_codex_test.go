//go:build linux

package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acp-broker/acp-broker/integration_test/internal/responsesapi"
)

// The real codex-acp 2.6 (over the Codex 0.166 App Server) through the
// broker, pointed at responsesapi on loopback. Codex runs every command in
// its sandbox (bubblewrap) without asking; it asks the client only when the
// model requests to run outside it, with exec_command's
// sandbox_permissions "require_escalated": that is what the scripted model
// does, so each command reaches the broker as a session/request_permission.
//
// The models of Codex's catalog (gpt-6.1-sol, the one these tests use) get
// Codex's code mode: the only tool that runs commands is "exec", a free-form
// tool whose input is JavaScript calling tools.exec_command. A model Codex
// has no metadata for gets exec_command itself as a function.
// TestRealCodexClassicTools covers that path.

// codexRules is the rule file every Codex scenario runs with.
const codexRules = `
[[rule]]
id = "codex-allowed"
decision = "allow"
command = "touch codex-allowed.txt"

[[rule]]
id = "codex-denied"
decision = "deny"
reason = "the test forbids this marker"
command = "touch codex-denied.txt"
`

// codexEscalation is what the model asks exec_command for: cmd, run outside
// Codex's sandbox, which Codex asks the client about.
func codexEscalation(cmd string) map[string]any {
	return map[string]any{
		"cmd":                 cmd,
		"sandbox_permissions": "require_escalated",
		"justification":       "The test needs this marker file.",
	}
}

// codeModeExec is the code-mode call that runs cmd escalated: JavaScript
// calling exec_command, as the catalog's models call it.
func codeModeExec(id, cmd string) responsesapi.Call {
	args, err := json.Marshal(codexEscalation(cmd))
	if err != nil {
		panic(err)
	}
	return responsesapi.Call{ID: id, Name: "exec", Input: fmt.Sprintf("const r = await tools.exec_command(%s);\ntext(JSON.stringify(r));\n", args)}
}

// classicExecCommand is the direct exec_command function call that runs cmd
// escalated, as a model without code mode calls it.
func classicExecCommand(id, cmd string) responsesapi.Call {
	return responsesapi.Call{ID: id, Name: "exec_command", Arguments: codexEscalation(cmd)}
}

// codexTurn is a prompt whose turn makes one call and then answers.
func codexTurn(call responsesapi.Call) responsesapi.Turn {
	return responsesapi.Turn{Calls: []responsesapi.Call{call}, Answer: "Done."}
}

// codexRan reports whether the output the model was given says the command
// exited 0, in code mode's words or exec_command's.
func codexRan(out string) bool {
	return strings.Contains(out, `\"exit_code\":0`) || strings.Contains(out, `"exit_code":0`) || strings.Contains(out, "Process exited with code 0")
}

// realCodex is one conversation with codex-acp behind the broker; the test
// is the editor.
type realCodex struct {
	t       *testing.T
	s       *session
	model   *responsesapi.Server
	dir     string // the project, the session's cwd
	trace   string // the broker's --trace file
	session string // the session id
	lastID  int    // the editor's last request id
	started time.Time
}

// startCodex starts the broker with codexRules in front of codex-acp in its
// default configuration, with a home of its own and the model scripted by
// turns, and opens one session: initialize, authenticate with the api-key
// method, session/new.
func startCodex(t *testing.T, turns map[string]responsesapi.Turn) *realCodex {
	t.Helper()
	return startCodexWith(t, codexSetup{}, turns)
}

// codexSetup is what a scenario changes of startCodex's set-up.
type codexSetup struct {
	model     string // Codex's model; gpt-6.1-sol, from Codex's catalog, if ""
	subagents bool   // the editor advertises clientCapabilities.subagents
}

// startCodexWith is startCodex with setup.
func startCodexWith(t *testing.T, setup codexSetup, turns map[string]responsesapi.Turn) *realCodex {
	t.Helper()
	modelName := setup.model
	if modelName == "" {
		modelName = "gpt-6.1-sol"
	}
	node := adapterNode(t)
	script := filepath.Join(requireAdapters(t), "@agentclientprotocol", "codex-acp", "dist", "index.js")
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	codexHome := filepath.Join(home, ".codex")
	proj := filepath.Join(tmp, "project")
	for _, d := range []string{codexHome, proj} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	model, err := responsesapi.Start(turns, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(model.Close)

	// A provider of its own: the built-in "openai" provider (openai_base_url)
	// first tries a WebSocket to /v1/responses and falls back to HTTP only
	// after five retries (~7 s). requires_openai_auth makes the api-key login
	// the credential, as with OpenAI itself; no retries, so a mock that
	// fails fails the test at once. Nothing tries to leave the machine: no
	// update check, no analytics, plugins and apps off (they look up
	// api.github.com and chatgpt.com), the ChatGPT backend on the mock.
	config := fmt.Sprintf(`model = %[3]q
model_provider = "mock"
check_for_update_on_startup = false
chatgpt_base_url = %[2]q

[features]
plugins = false
apps = false

[analytics]
enabled = false

[model_providers.mock]
name = "mock"
base_url = %[1]q
wire_api = "responses"
requires_openai_auth = true
supports_websockets = false
request_max_retries = 0
stream_max_retries = 0
`, model.URL, model.URL+"/chatgpt/", modelName)
	writeFileAtomic(t, filepath.Join(codexHome, "config.toml"), config)
	rules := filepath.Join(tmp, "rules.toml")
	writeFileAtomic(t, rules, codexRules)

	c := &realCodex{t: t, model: model, dir: proj, trace: filepath.Join(tmp, "trace.jsonl")}
	// The adapter's own settings are unset (env -u), so that a developer's
	// environment cannot change its defaults.
	agent := []string{"env"}
	for _, v := range []string{"INITIAL_AGENT_MODE", "CODEX_CONFIG", "MODEL_PROVIDER", "DEFAULT_AUTH_REQUEST", "CODEX_PATH", "APP_SERVER_LOGS"} {
		agent = append(agent, "-u", v)
	}
	agent = append(agent, node, script)
	cmd := exec.Command(brokerBin, append([]string{"--config", rules, "--trace", c.trace, "--shutdown-grace", adapterShutdownGrace, "--"}, agent...)...)
	env := []string{
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		"CODEX_HOME=" + codexHome,
		"CODEX_API_KEY=sk-test-not-a-key",
		"OPENAI_API_KEY=sk-test-not-a-key",
		"NO_BROWSER=1",
	}
	c.started = time.Now()
	c.s = newSession(t, options{broker: true, env: env, dir: proj, wait: adapterWait}, cmd)
	// codex-acp exits about 2 s after its stdin closes; a test that is
	// done stops it with SIGTERM, which the broker passes on to the
	// agent's process group, instead of waiting for that.
	t.Cleanup(func() {
		select {
		case <-c.s.exited:
			return
		default:
		}
		_ = c.s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.s.exited:
		case <-time.After(c.s.wait):
			t.Errorf("the broker did not exit on SIGTERM")
		}
	})

	caps := map[string]any{"fs": map[string]any{"readTextFile": false, "writeTextFile": false}, "terminal": false}
	if setup.subagents {
		caps["subagents"] = map[string]any{}
	}
	c.call("initialize", map[string]any{
		"protocolVersion":    1,
		"clientCapabilities": caps,
		"clientInfo":         map[string]any{"name": "acp-broker-integration-test", "version": "1"},
	})
	c.call("authenticate", map[string]any{"methodId": "api-key"})
	res := c.call("session/new", map[string]any{"cwd": proj, "mcpServers": []any{}})
	if err := json.Unmarshal(res["sessionId"], &c.session); err != nil || c.session == "" {
		t.Fatalf("session/new result without a sessionId: %s", res["sessionId"])
	}
	c.requireMode("workspace-write", res)
	return c
}

// codexMessage is one JSON-RPC message, its members undecoded.
type codexMessage map[string]json.RawMessage

func parseCodexMessage(t testing.TB, line []byte) codexMessage {
	t.Helper()
	var m codexMessage
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("the editor received a line that is not a JSON object: %q: %v", line, err)
	}
	return m
}

func (m codexMessage) str(key string) string {
	var s string
	_ = json.Unmarshal(m[key], &s)
	return s
}

// send sends a request of the editor's and returns its id.
func (c *realCodex) send(method string, params any) int {
	c.t.Helper()
	c.lastID++
	line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.lastID, "method": method, "params": params})
	if err != nil {
		c.t.Fatal(err)
	}
	c.s.EditorSend(string(line))
	return c.lastID
}

// notify sends a notification of the editor's.
func (c *realCodex) notify(method string, params any) {
	c.t.Helper()
	line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	if err != nil {
		c.t.Fatal(err)
	}
	c.s.EditorSend(string(line))
}

// answer answers the agent's request req with the raw result.
func (c *realCodex) answer(req codexMessage, result string) {
	c.t.Helper()
	c.s.EditorSend(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, req["id"], result))
}

// next takes the first message the editor received that match accepts,
// leaving the others in the transcript for later checks.
func (c *realCodex) next(what string, match func(codexMessage) bool) codexMessage {
	c.t.Helper()
	line, err := c.s.out.take(c.s.wait, func(b []byte) bool {
		var m codexMessage
		return json.Unmarshal(b, &m) == nil && match(m)
	})
	if err != nil {
		c.t.Fatalf("editor: waiting for %s: %v\n%s", what, err, c.s.debug())
	}
	return parseCodexMessage(c.t, line)
}

// response waits for the response to the editor's request id and returns
// its result's members; an error response fails the test.
func (c *realCodex) response(id int) map[string]json.RawMessage {
	c.t.Helper()
	want := fmt.Sprint(id)
	m := c.next("the response to request "+want, func(m codexMessage) bool {
		_, isRequest := m["method"]
		return !isRequest && string(m["id"]) == want
	})
	if e, failed := m["error"]; failed {
		c.t.Fatalf("request %s failed: %s\n%s", want, e, c.s.debug())
	}
	var res map[string]json.RawMessage
	if err := json.Unmarshal(m["result"], &res); err != nil {
		c.t.Fatalf("request %s: result %s is not an object", want, m["result"])
	}
	return res
}

// responseError waits for the response to the editor's request id and
// returns its error; a success fails the test.
func (c *realCodex) responseError(id int) json.RawMessage {
	c.t.Helper()
	want := fmt.Sprint(id)
	m := c.next("the response to request "+want, func(m codexMessage) bool {
		_, isRequest := m["method"]
		return !isRequest && string(m["id"]) == want
	})
	e, failed := m["error"]
	if !failed {
		c.t.Errorf("request %s succeeded (%s), want an error", want, m["result"])
	}
	return e
}

// call sends a request and waits for its result.
func (c *realCodex) call(method string, params any) map[string]json.RawMessage {
	c.t.Helper()
	return c.response(c.send(method, params))
}

// requireMode requires the session to end up in mode: as session/new's
// result says, or as the agent's mode updates say after it (the broker
// switches a session out of a mode in which Codex decides by itself before
// the editor sees the result; the agent's own update follows).
func (c *realCodex) requireMode(mode string, newResult map[string]json.RawMessage) {
	c.t.Helper()
	var res struct {
		Modes struct {
			CurrentModeID string `json:"currentModeId"`
		} `json:"modes"`
	}
	_ = json.Unmarshal(codexJSON(c.t, newResult), &res)
	if res.Modes.CurrentModeID == mode {
		return
	}
	deadline := time.Now().Add(c.s.wait)
	for time.Now().Before(deadline) {
		line, err := c.s.out.take(time.Until(deadline), func(b []byte) bool {
			return codexModeUpdate(b) != ""
		})
		if err != nil {
			break
		}
		if codexModeUpdate(line) == mode {
			return
		}
	}
	c.t.Fatalf("the session stayed in Codex's mode %q, in which Codex's own reviewer decides and the broker sees nothing; want %q\n%s",
		res.Modes.CurrentModeID, mode, c.s.debug())
}

// codexModeUpdate is the mode a current_mode_update or config_option_update
// line names, or "".
func codexModeUpdate(line []byte) string {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Update struct {
				SessionUpdate string `json:"sessionUpdate"`
				CurrentModeID string `json:"currentModeId"`
				ConfigOptions []struct {
					Category     string `json:"category"`
					CurrentValue string `json:"currentValue"`
				} `json:"configOptions"`
			} `json:"update"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil || m.Method != "session/update" {
		return ""
	}
	switch u := m.Params.Update; u.SessionUpdate {
	case "current_mode_update":
		return u.CurrentModeID
	case "config_option_update":
		for _, o := range u.ConfigOptions {
			if o.Category == "mode" {
				return o.CurrentValue
			}
		}
	}
	return ""
}

func codexJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// prompt starts a turn with text and returns the request's id.
func (c *realCodex) prompt(text string) int {
	c.t.Helper()
	return c.send("session/prompt", map[string]any{
		"sessionId": c.session,
		"prompt":    []any{map[string]any{"type": "text", "text": text}},
	})
}

// stopReason waits for the prompt's response and returns its stopReason.
func (c *realCodex) stopReason(id int) string {
	c.t.Helper()
	var reason string
	_ = json.Unmarshal(c.response(id)["stopReason"], &reason)
	return reason
}

// permissionRequest waits for the next session/request_permission the
// editor is asked.
func (c *realCodex) permissionRequest() codexMessage {
	c.t.Helper()
	return c.next("a session/request_permission", func(m codexMessage) bool {
		return m.str("method") == "session/request_permission"
	})
}

// editorAsked lists the permission requests the editor received so far.
func (c *realCodex) editorAsked() []string {
	var asked []string
	for _, l := range c.s.out.all() {
		var m codexMessage
		if json.Unmarshal(l, &m) == nil && m.str("method") == "session/request_permission" {
			asked = append(asked, string(l))
		}
	}
	return asked
}

// toolCallStatus is the last status the agent reported to the editor for
// the tool call id.
func (c *realCodex) toolCallStatus(id string) string {
	status := ""
	for _, l := range c.s.out.all() {
		var m struct {
			Params struct {
				Update struct {
					ToolCallID string `json:"toolCallId"`
					Status     string `json:"status"`
				} `json:"update"`
			} `json:"params"`
		}
		if json.Unmarshal(l, &m) == nil && m.Params.Update.ToolCallID == id && m.Params.Update.Status != "" {
			status = m.Params.Update.Status
		}
	}
	return status
}

// codexTraced is one line of the broker's --trace file.
type codexTraced struct {
	Dir     string          `json:"dir"`
	Note    string          `json:"note"`
	Message json.RawMessage `json:"message"`
}

func (c *realCodex) traceLines() []codexTraced {
	c.t.Helper()
	f, err := os.Open(c.trace)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	var out []codexTraced
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var l codexTraced
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			c.t.Fatalf("trace line %q: %v", sc.Bytes(), err)
		}
		out = append(out, l)
	}
	return out
}

// agentRequests are the session/request_permission requests the agent
// sent, as the broker's trace recorded them on arrival.
func (c *realCodex) agentRequests() []codexMessage {
	c.t.Helper()
	var out []codexMessage
	for _, l := range c.traceLines() {
		if l.Dir != "agent->broker" {
			continue
		}
		m := parseCodexMessage(c.t, l.Message)
		if m.str("method") == "session/request_permission" {
			out = append(out, m)
		}
	}
	return out
}

// answersToAgent are the answers that reached the agent for its request
// id, from the broker ("broker->agent") or relayed from the editor
// ("editor->agent"), in order, as "dir outcome".
func (c *realCodex) answersToAgent(id json.RawMessage) []string {
	c.t.Helper()
	var out []string
	for _, l := range c.traceLines() {
		if l.Dir != "broker->agent" && l.Dir != "editor->agent" {
			continue
		}
		m := parseCodexMessage(c.t, l.Message)
		if _, isRequest := m["method"]; isRequest || string(m["id"]) != string(id) {
			continue
		}
		var res struct {
			Outcome struct {
				Outcome  string `json:"outcome"`
				OptionID string `json:"optionId"`
			} `json:"outcome"`
		}
		_ = json.Unmarshal(m["result"], &res)
		out = append(out, strings.TrimSpace(l.Dir+" "+res.Outcome.Outcome+" "+res.Outcome.OptionID))
	}
	return out
}

func (c *realCodex) exists(name string) bool {
	_, err := os.Stat(filepath.Join(c.dir, name))
	return err == nil
}

// codex26CommandOptions is the option list codex-acp 2.6.0 offers for an escalated
// command, as "optionId kind".
var codex26CommandOptions = []string{
	"allow_once allow_once",
	"accept_execpolicy_amendment allow_always",
	"cancel reject_once",
}

// requireCodexCommandRequest checks that req is Codex 2.x's shape of a
// command approval for cmd in the project, with codex26CommandOptions, and
// returns its tool call id. The id is the model's call_id for an
// exec_command function call, and one Codex makes up ("exec-<uuid>") for
// an exec_command that code mode's JavaScript calls.
func (c *realCodex) requireCodexCommandRequest(req codexMessage, cmd string) string {
	c.t.Helper()
	return c.requireCodexCommandRequestOf(req, c.session, cmd)
}

// requireCodexCommandRequestIn is requireCodexCommandRequest for a request
// of a child session of the editor's.
func (c *realCodex) requireCodexCommandRequestIn(req codexMessage, cmd string) string {
	c.t.Helper()
	var p struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(req["params"], &p)
	return c.requireCodexCommandRequestOf(req, p.SessionID, cmd)
}

func (c *realCodex) requireCodexCommandRequestOf(req codexMessage, session, cmd string) string {
	c.t.Helper()
	var p struct {
		SessionID string `json:"sessionId"`
		ToolCall  struct {
			ToolCallID string         `json:"toolCallId"`
			Kind       string         `json:"kind"`
			Status     string         `json:"status"`
			Title      string         `json:"title"`
			RawInput   map[string]any `json:"rawInput"`
		} `json:"toolCall"`
		Options []struct {
			OptionID string `json:"optionId"`
			Kind     string `json:"kind"`
		} `json:"options"`
		Meta json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(req["params"], &p); err != nil {
		c.t.Fatalf("request params %s: %v", req["params"], err)
	}
	var opts []string
	for _, o := range p.Options {
		opts = append(opts, o.OptionID+" "+o.Kind)
	}
	tc := p.ToolCall
	want := map[string]any{"command": cmd, "cwd": c.dir}
	if p.SessionID != session || tc.ToolCallID == "" || tc.Kind != "execute" || tc.Status != "pending" ||
		tc.Title != cmd || !codexJSONEqual(c.t, tc.RawInput, want) || !slices.Equal(opts, codex26CommandOptions) || p.Meta != nil {
		c.t.Errorf("codex-acp 2.6.0's command request changed shape:\n  %s\nwant toolCall {toolCallId, kind execute, status pending, title %q, rawInput %v}, options %q, no _meta",
			req["params"], cmd, want, codex26CommandOptions)
	}
	return tc.ToolCallID
}

func codexJSONEqual(t testing.TB, a, b any) bool {
	return string(codexJSON(t, a)) == string(codexJSON(t, b))
}

// finish closes the editor's side and waits for the broker to exit 0 once
// codex-acp has; it returns how long that took.
func (c *realCodex) finish() time.Duration {
	c.t.Helper()
	start := time.Now()
	c.s.CloseEditor()
	if code := c.s.Wait(); code != 0 {
		c.t.Fatalf("the broker exited with status %d after the editor closed its stdin\n%s", code, c.s.debug())
	}
	return time.Since(start)
}

// askedOrEnded waits for the next permission request the editor is asked
// in the turn of prompt p, and fails the test if the turn ends first.
func (c *realCodex) askedOrEnded(p int, call, marker string) codexMessage {
	c.t.Helper()
	want := fmt.Sprint(p)
	first := c.next("a session/request_permission or the end of the turn", func(m codexMessage) bool {
		_, isRequest := m["method"]
		return m.str("method") == "session/request_permission" || (!isRequest && string(m["id"]) == want)
	})
	if first.str("method") != "session/request_permission" {
		out, _ := c.model.Output(call)
		c.t.Fatalf("the turn ended without asking the editor (%s exists: %v; the model was told %q): %s\n%s",
			marker, c.exists(marker), out, first["result"], c.s.debug())
	}
	return first
}

// TestRealCodexAllowedCommandRunsUnasked: a command a rule allows is
// answered allow_once by the broker, runs, and the editor never sees a
// request.
func TestRealCodexAllowedCommandRunsUnasked(t *testing.T) {
	t.Parallel()
	c := startCodex(t, map[string]responsesapi.Turn{
		"make the allowed marker": codexTurn(codeModeExec("call_allowed", "touch codex-allowed.txt")),
	})
	if got := c.stopReason(c.prompt("make the allowed marker")); got != "end_turn" {
		t.Errorf("stopReason %q, want end_turn", got)
	}
	if !c.exists("codex-allowed.txt") {
		t.Errorf("the allowed command did not run\n%s", c.s.debug())
	}
	if asked := c.editorAsked(); len(asked) != 0 {
		t.Errorf("the editor was asked about an allowed command:\n%s", strings.Join(asked, "\n"))
	}
	reqs := c.agentRequests()
	if len(reqs) != 1 {
		t.Fatalf("the agent sent %d permission requests, want 1", len(reqs))
	}
	c.requireCodexCommandRequest(reqs[0], "touch codex-allowed.txt")
	if got, want := c.answersToAgent(reqs[0]["id"]), []string{"broker->agent selected allow_once"}; !slices.Equal(got, want) {
		t.Errorf("answers to the agent %q, want %q", got, want)
	}
	if out, ok := c.model.Output("call_allowed"); !ok || !codexRan(out) {
		t.Errorf("the model was told %q (reported: %v), want the command's exit code 0", out, ok)
	}
	// Codex started in its default mode, agent; the broker switched it,
	// showed the editor the mode Codex agreed to (the options of its
	// answer) and told the editor (which has no notices) why once, in an
	// agent message.
	var told, shown []string
	for _, l := range c.traceLines() {
		if l.Dir != "broker->editor" {
			continue
		}
		if strings.Contains(string(l.Message), `"config_option_update"`) {
			shown = append(shown, string(l.Message))
			continue
		}
		told = append(told, string(l.Message))
	}
	if len(told) != 1 || !strings.Contains(told[0], `"agent_message_chunk"`) || !strings.Contains(told[0], "workspace-write") {
		t.Errorf("the editor was told %d times what the broker did:\n%s\nwant once, an agent message that it switched Codex to workspace-write", len(told), strings.Join(told, "\n"))
	}
	if len(shown) != 1 || !strings.Contains(shown[0], `"currentValue":"workspace-write"`) {
		t.Errorf("the broker showed the editor %d mode updates:\n%s\nwant one with the mode workspace-write", len(shown), strings.Join(shown, "\n"))
	}
	took := c.finish()
	t.Logf("codex-acp behind the broker exited %v after the editor closed stdin; the test took %v", took.Round(time.Millisecond), time.Since(c.started).Round(time.Millisecond))
}

// codexDeniedTurns are commands codexRules deny: alone, and as one part of
// a compound command whose other part a rule allows.
var codexDeniedTurns = []struct{ prompt, cmd string }{
	{"make the denied marker", "touch codex-denied.txt"},
	{"make both markers", "touch codex-allowed.txt && touch codex-denied.txt"},
	{"make the denied one last", "touch codex-allowed.txt; touch codex-denied.txt"},
	{"make it in a subshell", "(touch codex-denied.txt)"},
}

// TestRealCodexDeniedCommandDoesNotRun: a command a deny rule matches, alone
// or as one part of a compound command whose other part a rule allows, is
// answered by the broker with Codex's only reject option (cancel, which
// ends the turn); nothing of it runs, the editor never sees a request, and
// the model is told on its next request that the call was refused.
func TestRealCodexDeniedCommandDoesNotRun(t *testing.T) {
	t.Parallel()
	script := map[string]responsesapi.Turn{"what happened?": {Answer: "They were refused."}}
	for i, tt := range codexDeniedTurns {
		script[tt.prompt] = codexTurn(codeModeExec(fmt.Sprintf("call_%d", i), tt.cmd))
	}
	c := startCodex(t, script)
	c.requireDenied(codexDeniedTurns)
}

// requireDenied plays turns, each a command codexRules deny, and checks
// that none ran, the editor was asked nothing, the broker answered each
// request with cancel, and the model heard of each refusal.
func (c *realCodex) requireDenied(turns []struct{ prompt, cmd string }) {
	t := c.t
	t.Helper()
	for _, tt := range turns {
		if got := c.stopReason(c.prompt(tt.prompt)); got != "cancelled" {
			t.Errorf("%s: stopReason %q, want cancelled (Codex ends the turn on its cancel option)", tt.cmd, got)
		}
	}
	if got := c.stopReason(c.prompt("what happened?")); got != "end_turn" {
		t.Errorf("the turn after the refusals: stopReason %q, want end_turn", got)
	}
	for _, m := range []string{"codex-denied.txt", "codex-allowed.txt"} {
		if c.exists(m) {
			t.Errorf("%s exists: a denied command ran", m)
		}
	}
	if asked := c.editorAsked(); len(asked) != 0 {
		t.Errorf("the editor was asked about a denied command:\n%s", strings.Join(asked, "\n"))
	}
	reqs := c.agentRequests()
	if len(reqs) != len(turns) {
		t.Fatalf("the agent sent %d permission requests, want %d", len(reqs), len(turns))
	}
	for i, r := range reqs {
		id := c.requireCodexCommandRequest(r, turns[i].cmd)
		if got, want := c.answersToAgent(r["id"]), []string{"broker->agent selected cancel"}; !slices.Equal(got, want) {
			t.Errorf("%s: answers to the agent %q, want %q", turns[i].cmd, got, want)
		}
		if got := c.toolCallStatus(id); got != "failed" {
			t.Errorf("%s: the tool call's last status is %q, want failed", turns[i].cmd, got)
		}
	}
	// The request of the turn after the refusals; Codex also asks the
	// model for a session title, in requests of their own.
	var after *responsesapi.Request
	for _, r := range c.model.Requests() {
		if r.Prompt == "what happened?" {
			after = &r
		}
	}
	if after == nil {
		t.Fatal("the model got no request for the turn after the refusals")
	}
	for id, out := range after.Outputs {
		if !strings.Contains(out, "aborted by user") {
			t.Errorf("the model was told %q for call %s, want Codex's refusal \"aborted by user\"", out, id)
		}
	}
	if n := len(after.Outputs); n != len(turns) {
		t.Errorf("the model's request after the refusals reports %d calls, want %d", n, len(turns))
	}
}

// TestRealCodexAskedCommandIsAnswered: a command no rule decides, alone or
// beside a part a rule allows, goes to the editor as codex-acp sent it, and
// the editor's answer decides: allow_once runs it, cancel does not.
func TestRealCodexAskedCommandIsAnswered(t *testing.T) {
	t.Parallel()
	c := startCodex(t, map[string]responsesapi.Turn{
		"make the asked marker":    codexTurn(codeModeExec("call_asked", "touch codex-asked.txt")),
		"make the rejected marker": codexTurn(codeModeExec("call_rejected", "touch codex-allowed.txt && touch codex-rejected.txt")),
	})
	c.requireAsked("make the asked marker", "call_asked", "make the rejected marker", "call_rejected")
}

// requireAsked plays two turns: allowed, whose command (touch
// codex-asked.txt) the editor allows, and rejected, whose command (touch
// codex-allowed.txt && touch codex-rejected.txt) it rejects.
func (c *realCodex) requireAsked(allowed, allowedCall, rejected, rejectedCall string) {
	t := c.t
	t.Helper()
	before := len(c.agentRequests())
	p := c.prompt(allowed)
	req := c.askedOrEnded(p, allowedCall, "codex-asked.txt")
	c.requireCodexCommandRequest(req, "touch codex-asked.txt")
	if c.exists("codex-asked.txt") {
		t.Fatal("the asked command ran before the editor answered")
	}
	c.answer(req, `{"outcome":{"outcome":"selected","optionId":"allow_once"}}`)
	if got := c.stopReason(p); got != "end_turn" {
		t.Errorf("stopReason %q after the editor allowed, want end_turn", got)
	}
	if !c.exists("codex-asked.txt") {
		t.Errorf("the command the editor allowed did not run\n%s", c.s.debug())
	}
	if out, ok := c.model.Output(allowedCall); !ok || !codexRan(out) {
		t.Errorf("the model was told %q (reported: %v), want the command's exit code 0", out, ok)
	}

	p = c.prompt(rejected)
	req = c.askedOrEnded(p, rejectedCall, "codex-rejected.txt")
	c.requireCodexCommandRequest(req, "touch codex-allowed.txt && touch codex-rejected.txt")
	c.answer(req, `{"outcome":{"outcome":"selected","optionId":"cancel"}}`)
	if got := c.stopReason(p); got != "cancelled" {
		t.Errorf("stopReason %q after the editor rejected, want cancelled", got)
	}
	for _, m := range []string{"codex-rejected.txt", "codex-allowed.txt"} {
		if c.exists(m) {
			t.Errorf("%s exists: the command the editor rejected ran", m)
		}
	}

	reqs := c.agentRequests()[before:]
	if len(reqs) != 2 {
		t.Fatalf("the agent sent %d permission requests, want 2", len(reqs))
	}
	for i, want := range []string{"editor->agent selected allow_once", "editor->agent selected cancel"} {
		if got := c.answersToAgent(reqs[i]["id"]); !slices.Equal(got, []string{want}) {
			t.Errorf("answers to the agent's request %s: %q, want %q", reqs[i]["id"], got, want)
		}
	}
	// Each request reached the editor byte for byte as the agent sent it.
	traced := map[string]bool{}
	for _, l := range c.traceLines() {
		if l.Dir == "agent->broker" {
			traced[string(l.Message)] = true
		}
	}
	asked := c.editorAsked()
	if len(asked) != 2 {
		t.Errorf("the editor was asked %d times, want 2:\n%s", len(asked), strings.Join(asked, "\n"))
	}
	for _, a := range asked {
		if !traced[a] {
			t.Errorf("the editor got a request the agent did not send:\n  %s", a)
		}
	}
}

// TestRealCodexCancelMidRequest: the editor cancels the turn while Codex
// waits for its answer. The broker answers the pending request cancelled
// itself, Codex ends the turn cancelled, and an answer the editor sends
// after its cancel (here a late allow_once) never reaches the agent:
// nothing runs.
func TestRealCodexCancelMidRequest(t *testing.T) {
	t.Parallel()
	c := startCodex(t, map[string]responsesapi.Turn{
		"make the cancelled marker": codexTurn(codeModeExec("call_cancelled", "touch codex-cancelled.txt")),
		"are you there?":            {Answer: "Yes."},
	})
	p := c.prompt("make the cancelled marker")
	req := c.askedOrEnded(p, "call_cancelled", "codex-cancelled.txt")
	c.requireCodexCommandRequest(req, "touch codex-cancelled.txt")
	c.notify("session/cancel", map[string]any{"sessionId": c.session})
	c.answer(req, `{"outcome":{"outcome":"selected","optionId":"allow_once"}}`)
	if got := c.stopReason(p); got != "cancelled" {
		t.Errorf("stopReason %q after session/cancel, want cancelled", got)
	}
	// A turn that needs no permission, so that everything of the cancelled
	// one has reached the agent and the command has had its chance to run.
	if got := c.stopReason(c.prompt("are you there?")); got != "end_turn" {
		t.Errorf("the turn after the cancel: stopReason %q, want end_turn", got)
	}
	if c.exists("codex-cancelled.txt") {
		t.Error("the command ran after the editor cancelled the turn")
	}
	reqs := c.agentRequests()
	if len(reqs) != 1 {
		t.Fatalf("the agent sent %d permission requests, want 1", len(reqs))
	}
	if got, want := c.answersToAgent(reqs[0]["id"]), []string{"broker->agent cancelled"}; !slices.Equal(got, want) {
		t.Errorf("answers to the agent %q, want %q", got, want)
	}
}

// TestRealCodexClassicTools: with a model Codex has no metadata for, Codex
// offers exec_command as a plain function (no code mode), and the model's
// call's own id is the request's tool call id. Denied and asked commands
// are decided the same way.
func TestRealCodexClassicTools(t *testing.T) {
	t.Parallel()
	script := map[string]responsesapi.Turn{
		"what happened?":           {Answer: "They were refused."},
		"make the asked marker":    codexTurn(classicExecCommand("call_asked", "touch codex-asked.txt")),
		"make the rejected marker": codexTurn(classicExecCommand("call_rejected", "touch codex-allowed.txt && touch codex-rejected.txt")),
	}
	denied := codexDeniedTurns[:2]
	for i, tt := range denied {
		script[tt.prompt] = codexTurn(classicExecCommand(fmt.Sprintf("call_%d", i), tt.cmd))
	}
	c := startCodexWith(t, codexSetup{model: "acp-broker-test-model"}, script)
	c.requireDenied(denied)
	for i, r := range c.agentRequests() {
		if id := c.requireCodexCommandRequest(r, denied[i].cmd); id != fmt.Sprintf("call_%d", i) {
			t.Errorf("tool call id %q, want the model's call_id call_%d", id, i)
		}
	}
	c.requireAsked("make the asked marker", "call_asked", "make the rejected marker", "call_rejected")
}

// TestRealCodexSandboxedCommandsAreNotAsked pins the limit of what the
// broker sees of Codex: a command the model runs inside Codex's sandbox
// (sandbox_permissions left at use_default) is never asked, so it runs
// whatever the rules say, within what the sandbox lets it write (the
// workspace and /tmp; elsewhere the file system is read-only).
func TestRealCodexSandboxedCommandsAreNotAsked(t *testing.T) {
	t.Parallel()
	c := startCodex(t, map[string]responsesapi.Turn{
		"make the marker in the sandbox": codexTurn(responsesapi.Call{
			ID: "call_sandboxed", Name: "exec",
			Input: `const r = await tools.exec_command({cmd: "touch codex-denied.txt"});` + "\ntext(JSON.stringify(r));\n",
		}),
	})
	if got := c.stopReason(c.prompt("make the marker in the sandbox")); got != "end_turn" {
		t.Errorf("stopReason %q, want end_turn", got)
	}
	if !c.exists("codex-denied.txt") {
		out, _ := c.model.Output("call_sandboxed")
		t.Errorf("the sandboxed command did not run (the model was told %q): has Codex started asking for commands inside its sandbox? Then the README's Codex lines need updating\n%s", out, c.s.debug())
	}
	if reqs := c.agentRequests(); len(reqs) != 0 {
		t.Errorf("the agent asked about a sandboxed command (%d requests)", len(reqs))
	}
}

// TestRealCodexBlindModesAreRefused: the editor cannot put a Codex session
// into a mode in which Codex decides by itself (agent: Codex's own
// reviewer; agent-full-access: no sandbox, no questions), by either of the
// ways codex-acp 2.6 offers (session/set_mode, the "mode" config option):
// the broker answers with an error, the agent never gets the request, and
// the next command is still asked.
func TestRealCodexBlindModesAreRefused(t *testing.T) {
	t.Parallel()
	c := startCodex(t, map[string]responsesapi.Turn{
		"make the asked marker": codexTurn(codeModeExec("call_asked", "touch codex-asked.txt")),
	})
	for _, mode := range []string{"agent", "agent-full-access"} {
		e := c.responseError(c.send("session/set_mode", map[string]any{"sessionId": c.session, "modeId": mode}))
		t.Logf("session/set_mode %s: %s", mode, e)
		e = c.responseError(c.send("session/set_config_option", map[string]any{"sessionId": c.session, "configId": "mode", "value": mode}))
		t.Logf("session/set_config_option mode %s: %s", mode, e)
	}
	for _, l := range c.traceLines() {
		if l.Dir != "editor->agent" {
			continue
		}
		if m := parseCodexMessage(t, l.Message); m.str("method") == "session/set_mode" || m.str("method") == "session/set_config_option" {
			t.Errorf("the agent got the editor's %s: %s", m.str("method"), l.Message)
		}
	}
	p := c.prompt("make the asked marker")
	req := c.askedOrEnded(p, "call_asked", "codex-asked.txt")
	c.requireCodexCommandRequest(req, "touch codex-asked.txt")
	c.answer(req, `{"outcome":{"outcome":"selected","optionId":"cancel"}}`)
	if got := c.stopReason(p); got != "cancelled" {
		t.Errorf("stopReason %q after the editor rejected, want cancelled", got)
	}
	if c.exists("codex-asked.txt") {
		t.Error("the command the editor rejected ran")
	}
}

// codexSpawnTurn is a parent's turn that starts a Codex subagent with task
// (collaboration.spawn_agent: a child session, announced to an editor that
// advertises subagents with a subagent_update) and answers; with wait, it
// waits for the subagent first (collaboration.wait_agent), so the parent's
// turn is still running while the child works.
func codexSpawnTurn(task string, wait bool) responsesapi.Turn {
	calls := []responsesapi.Call{{ID: "call_spawn", Name: "spawn_agent", Namespace: "collaboration", Arguments: map[string]any{
		"task_name": "markers", "message": task, "fork_turns": "none"}}}
	if wait {
		calls = append(calls, responsesapi.Call{ID: "call_wait", Name: "wait_agent", Namespace: "collaboration", Arguments: map[string]any{"timeout_ms": 60000}})
	}
	return responsesapi.Turn{Calls: calls, Answer: "The subagent is on it."}
}

// codexChildEvent matches what the editor learns of a subagent's end (a
// subagent_update whose state has a stopReason) and the permission
// requests it is asked.
func codexChildEvent(m codexMessage) bool {
	if m.str("method") == "session/request_permission" {
		return true
	}
	var p struct {
		Update struct {
			SessionUpdate string `json:"sessionUpdate"`
			State         struct {
				StopReason string `json:"stopReason"`
			} `json:"state"`
		} `json:"update"`
	}
	return m.str("method") == "session/update" && json.Unmarshal(m["params"], &p) == nil &&
		p.Update.SessionUpdate == "subagent_update" && p.Update.State.StopReason != ""
}

// requireChildRequests checks that the agent's permission requests came
// from a child session of the editor's session, and returns them.
func (c *realCodex) requireChildRequests(n int) []codexMessage {
	c.t.Helper()
	reqs := c.agentRequests()
	if len(reqs) != n {
		c.t.Fatalf("the agent sent %d permission requests, want %d", len(reqs), n)
	}
	for _, r := range reqs {
		var p struct {
			SessionID string `json:"sessionId"`
		}
		_ = json.Unmarshal(r["params"], &p)
		if !strings.HasPrefix(p.SessionID, c.session+":subagent:") {
			c.t.Errorf("the request's sessionId %q is not a child of %q", p.SessionID, c.session)
		}
	}
	return reqs
}

// TestRealCodexSubagentDecidedByParentRules: a Codex subagent's requests
// carry its own session id (parent id + ":subagent:" + thread), which the
// editor never opened; the broker decides them by the parent's rules, as
// for the parent: the allowed command runs unasked, the denied one is
// refused, and the editor is asked nothing.
func TestRealCodexSubagentDecidedByParentRules(t *testing.T) {
	t.Parallel()
	c := startCodexWith(t, codexSetup{subagents: true}, map[string]responsesapi.Turn{
		"spawn a helper": codexSpawnTurn("child: make the markers", false),
		"child: make the markers": {Calls: []responsesapi.Call{
			codeModeExec("call_child_allowed", "touch codex-allowed.txt"),
			codeModeExec("call_child_denied", "touch codex-denied.txt"),
		}, Answer: "Done."},
	})
	if got := c.stopReason(c.prompt("spawn a helper")); got != "end_turn" {
		t.Errorf("the parent's stopReason %q, want end_turn", got)
	}
	if ev := c.next("the subagent's end or a permission request", codexChildEvent); ev.str("method") == "session/request_permission" {
		t.Fatalf("the editor was asked about the subagent's command, which the parent's rules decide:\n  %s", ev["params"])
	}
	if !c.exists("codex-allowed.txt") {
		t.Errorf("the subagent's allowed command did not run\n%s", c.s.debug())
	}
	if c.exists("codex-denied.txt") {
		t.Error("the subagent's denied command ran")
	}
	if asked := c.editorAsked(); len(asked) != 0 {
		t.Errorf("the editor was asked:\n%s", strings.Join(asked, "\n"))
	}
	reqs := c.requireChildRequests(2)
	for i, want := range []string{"broker->agent selected allow_once", "broker->agent selected cancel"} {
		c.requireCodexCommandRequestIn(reqs[i], []string{"touch codex-allowed.txt", "touch codex-denied.txt"}[i])
		if got := c.answersToAgent(reqs[i]["id"]); !slices.Equal(got, []string{want}) {
			t.Errorf("answers to the subagent's request %s: %q, want %q", reqs[i]["id"], got, want)
		}
	}
}

// TestRealCodexSubagentCancelledWithParent: the editor cancels the parent's
// turn while a subagent's request waits for the editor's answer. The
// broker answers the child's pending request cancelled itself, and the
// editor's late allow_once never reaches the agent: nothing runs.
func TestRealCodexSubagentCancelledWithParent(t *testing.T) {
	t.Parallel()
	c := startCodexWith(t, codexSetup{subagents: true}, map[string]responsesapi.Turn{
		"spawn a helper":         codexSpawnTurn("child: make the marker", true),
		"child: make the marker": codexTurn(codeModeExec("call_child", "touch codex-cancelled.txt")),
		"are you there?":         {Answer: "Yes."},
	})
	p := c.prompt("spawn a helper")
	req := c.next("the subagent's end or a permission request", codexChildEvent)
	if req.str("method") != "session/request_permission" {
		t.Fatalf("the subagent ended without asking the editor: %s", req["params"])
	}
	c.notify("session/cancel", map[string]any{"sessionId": c.session})
	c.answer(req, `{"outcome":{"outcome":"selected","optionId":"allow_once"}}`)
	if got := c.stopReason(p); got != "cancelled" {
		t.Errorf("the parent's stopReason %q after session/cancel, want cancelled", got)
	}
	if got := c.stopReason(c.prompt("are you there?")); got != "end_turn" {
		t.Errorf("the turn after the cancel: stopReason %q, want end_turn", got)
	}
	if c.exists("codex-cancelled.txt") {
		t.Error("the subagent's command ran after the editor cancelled the parent's turn")
	}
	reqs := c.requireChildRequests(1)
	if got, want := c.answersToAgent(reqs[0]["id"]), []string{"broker->agent cancelled"}; !slices.Equal(got, want) {
		t.Errorf("answers to the subagent's request %q, want %q", got, want)
	}
}

// TestRealCodexAmendmentKeepsDeniedCommandsInSight: the human answers an
// escalated `touch` with accept_execpolicy_amendment, Codex's "don't ask
// again for commands that start with `touch`". Relayed, it made Codex write
// prefix_rule(pattern=["touch"], decision="allow") to its rules file for
// good, and a later `touch codex-denied.txt`, which a deny rule matches, ran
// without a request. The broker sends allow_once instead: Codex writes no
// rule, asks about the denied command, and the broker refuses it.
func TestRealCodexAmendmentKeepsDeniedCommandsInSight(t *testing.T) {
	t.Parallel()
	asked := codexEscalation("touch codex-asked.txt")
	asked["prefix_rule"] = []string{"touch"}
	args, err := json.Marshal(asked)
	if err != nil {
		t.Fatal(err)
	}
	c := startCodex(t, map[string]responsesapi.Turn{
		"make the asked marker":  codexTurn(responsesapi.Call{ID: "call_asked", Name: "exec", Input: fmt.Sprintf("const r = await tools.exec_command(%s);\ntext(JSON.stringify(r));\n", args)}),
		"make the denied marker": codexTurn(codeModeExec("call_denied", "touch codex-denied.txt")),
	})
	p := c.prompt("make the asked marker")
	req := c.askedOrEnded(p, "call_asked", "codex-asked.txt")
	c.requireCodexCommandRequest(req, "touch codex-asked.txt")
	if !strings.Contains(string(req["params"]), "start with `touch`") {
		t.Fatalf("Codex did not propose the prefix rule `touch`: %s", req["params"])
	}
	c.answer(req, `{"outcome":{"outcome":"selected","optionId":"accept_execpolicy_amendment"}}`)
	if got := c.stopReason(p); got != "end_turn" {
		t.Errorf("stopReason %q after the editor allowed, want end_turn", got)
	}
	if !c.exists("codex-asked.txt") {
		t.Errorf("the command the editor allowed did not run\n%s", c.s.debug())
	}
	if got, want := c.answersToAgent(req["id"]), []string{"broker->agent selected allow_once"}; !slices.Equal(got, want) {
		t.Errorf("answers to the agent %q, want %q", got, want)
	}
	rulesFile := filepath.Join(filepath.Dir(c.dir), "home", ".codex", "rules", "default.rules")
	if data, err := os.ReadFile(rulesFile); err == nil && strings.Contains(string(data), "prefix_rule") {
		t.Errorf("Codex wrote a rule of its own:\n%s", data)
	}

	if got := c.stopReason(c.prompt("make the denied marker")); got != "cancelled" {
		t.Errorf("stopReason %q for the denied command, want cancelled (the broker's cancel)", got)
	}
	if c.exists("codex-denied.txt") {
		t.Errorf("the denied command ran")
	}
	reqs := c.agentRequests()
	if len(reqs) != 2 {
		t.Fatalf("the agent sent %d permission requests, want 2 (it stopped asking about touch)", len(reqs))
	}
	c.requireCodexCommandRequest(reqs[1], "touch codex-denied.txt")
	if got, want := c.answersToAgent(reqs[1]["id"]), []string{"broker->agent selected cancel"}; !slices.Equal(got, want) {
		t.Errorf("answers to the agent's second request %q, want %q", got, want)
	}
	if asked := c.editorAsked(); len(asked) != 1 {
		t.Errorf("the editor was asked %d times, want once", len(asked))
	}
	c.finish()
}
