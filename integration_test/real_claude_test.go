//go:build linux

package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acp-broker/acp-broker/integration_test/internal/anthropicapi"
)

// The tests in this file run the real @agentclientprotocol/claude-agent-acp
// 0.101 (which runs the native Claude Code CLI) through the broker, offline:
// the CLI talks to a scripted Messages API on loopback (internal/anthropicapi)
// and the test is the editor on the broker's stdio. The agent runs in its
// default configuration (no permissions.defaultMode), in which it starts
// every session in its own classifier's mode "auto" and asks nothing: the
// broker must switch it to "default" for any of this to be decided.
//
// Between the broker and the agent, tee copies each direction to a file, so
// the tests see the agent's own bytes: what it sent and what it was answered.
// Each tee writes a line to its file before it passes the line on, so a file
// holds every line its reader got by the time the reader got it.

// claudeEnv makes the CLI reach nothing but the mock: no telemetry, update
// checks, error reports or feature flags.
var claudeEnv = []string{
	"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	"DISABLE_TELEMETRY=1",
	"DISABLE_AUTOUPDATER=1",
	"DISABLE_ERROR_REPORTING=1",
	"DISABLE_GROWTHBOOK=1",
	"CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY=1",
	"CLAUDE_CODE_DISABLE_TERMINAL_TITLE=1",
	// The adapter offers bypassPermissions to root only if IS_SANDBOX is
	// set, and the CLI then refuses to start for root unless it is exactly
	// "1": with "1" the agent behaves as it does for an ordinary user,
	// whoever runs the tests.
	"IS_SANDBOX=1",
}

// realClaude is the editor's side of one broker running claude-agent-acp.
type realClaude struct {
	*session
	mock     *anthropicapi.Server
	root     string // holds everything below
	home     string // HOME of the broker and the agent
	cwd      string // the session's working directory
	audit    string
	agentIn  string // every byte the agent read on stdin
	agentOut string // every byte the agent wrote on stdout
	v2       bool   // the editor speaks ACP v2
	nextID   int
	sid      string // the session newSession opened
	promptID string // the last prompt's request id
}

type realClaudeOptions struct {
	rules string                      // --config file; none if empty
	convs []anthropicapi.Conversation // the model's script
	env   []string                    // more environment
	// git makes the session's directory a git repository with one
	// commit, which a subagent's worktree needs.
	git bool
}

func startRealClaude(t *testing.T, o realClaudeOptions) *realClaude {
	t.Helper()
	node := adapterNode(t)
	entry := filepath.Join(requireAdapters(t), "@agentclientprotocol", "claude-agent-acp", "dist", "index.js")
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := &realClaude{
		root:     root,
		home:     filepath.Join(root, "home"),
		cwd:      filepath.Join(root, "project"),
		audit:    filepath.Join(root, "audit.jsonl"),
		agentIn:  filepath.Join(root, "agent-stdin.jsonl"),
		agentOut: filepath.Join(root, "agent-stdout.jsonl"),
	}
	tmp := filepath.Join(root, "tmp")
	for _, dir := range []string{c.home, c.cwd, filepath.Join(c.home, ".claude"), tmp} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if o.git {
		for _, args := range [][]string{{"init", "-q"}, {"-c", "user.email=test@example.com", "-c", "user.name=test", "commit", "-q", "--allow-empty", "-m", "start"}} {
			cmd := exec.Command("git", args...)
			cmd.Dir = c.cwd
			cmd.Env = append(os.Environ(), "HOME="+c.home, "GIT_CONFIG_NOSYSTEM=1")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
	}
	mock, err := anthropicapi.Start(o.convs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mock.Close)
	c.mock = mock
	args := []string{"--log-level", "info", "--audit", c.audit, "--shutdown-grace", adapterShutdownGrace}
	if o.rules != "" {
		config := filepath.Join(root, "rules.toml")
		writeFileAtomic(t, config, o.rules)
		args = append(args, "--config", config)
	}
	// tee records both directions; the pipeline ends when the broker
	// closes the agent's stdin, as the adapter alone does. Each tee's
	// stdout is its file and the pipe it passes lines on is /dev/fd/3:
	// tee writes (unbuffered) to its stdout first.
	args = append(args, "--", "/bin/sh", "-c", `tee /dev/fd/3 3>&1 >"$0" | "$1" "$2" | tee /dev/fd/3 3>&1 >"$3"`, c.agentIn, node, entry, c.agentOut)
	env := append([]string{
		"HOME=" + c.home,
		"XDG_CONFIG_HOME=" + filepath.Join(c.home, ".config"),
		"XDG_STATE_HOME=" + filepath.Join(c.home, ".local", "state"),
		"CLAUDE_CONFIG_DIR=" + filepath.Join(c.home, ".claude"),
		"CLAUDE_CODE_TMPDIR=" + tmp,
		"TMPDIR=" + tmp,
		"ANTHROPIC_BASE_URL=" + mock.URL,
		"ANTHROPIC_API_KEY=sk-ant-test-not-a-key",
	}, claudeEnv...)
	env = append(env, o.env...)
	c.session = newSession(t, options{broker: true, env: env, dir: root, wait: adapterWait}, exec.Command(brokerBin, args...))
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		t.Logf("mock API:\n%s", strings.Join(c.mock.Log(), "\n"))
		if u := c.mock.Unknown(); len(u) > 0 {
			t.Logf("paths the mock does not serve: %v", u)
		}
		var lines []string
		for _, l := range toStrings(c.out.all()) {
			if !strings.Contains(l, `"available_commands_update"`) {
				lines = append(lines, clip(l))
			}
		}
		t.Logf("editor received (without available_commands_update):\n%s", strings.Join(lines, "\n"))
		t.Logf("agent received:\n%s", strings.Join(c.agentLines(c.agentIn), "\n"))
		t.Logf("broker stderr:\n%s", clip(c.stderrText()))
	})
	return c
}

type rpcLine = map[string]json.RawMessage

func parseLine(line string) rpcLine {
	var m rpcLine
	_ = json.Unmarshal([]byte(line), &m)
	return m
}

// request sends a request from the editor and returns its id.
func (c *realClaude) request(method string, params any) string {
	c.t.Helper()
	id := c.nextID
	c.nextID++
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		c.t.Fatal(err)
	}
	c.EditorSend(string(b))
	return fmt.Sprint(id)
}

// notify sends a notification from the editor.
func (c *realClaude) notify(method string, params any) {
	c.t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	c.EditorSend(string(b))
}

// respond answers the agent's request id with result (raw JSON).
func (c *realClaude) respond(id json.RawMessage, result string) string {
	c.t.Helper()
	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
	c.EditorSend(line)
	return line
}

// awaitLine returns the first unread line the editor got that match
// accepts. Once a prompt is running, it fails as soon as the turn ends
// without one.
func (c *realClaude) awaitLine(what string, match func(rpcLine) bool) string {
	c.t.Helper()
	accept := func(b []byte) bool {
		var m rpcLine
		return json.Unmarshal(b, &m) == nil && match(m)
	}
	deadline := time.Now().Add(c.wait)
	for {
		line, err := c.out.take(100*time.Millisecond, accept)
		if err == nil {
			return string(line)
		}
		if err == errTimeout && c.promptID != "" && c.turnEnded() {
			// What came before the turn's end has been read by now.
			if line, err := c.out.take(time.Millisecond, accept); err == nil {
				return string(line)
			}
			c.t.Fatalf("the turn ended and the editor got no %s (did the agent decide by itself?)\n%s", what, c.debug())
		}
		if err != errTimeout || time.Now().After(deadline) {
			c.t.Fatalf("editor: waiting for %s: %v\n%s", what, err, c.debug())
		}
	}
}

// awaitResponse waits for the agent's response to the editor's request id.
func (c *realClaude) awaitResponse(id string) rpcLine {
	c.t.Helper()
	return parseLine(c.awaitLine("the response to request "+id, func(m rpcLine) bool {
		_, isRequest := m["method"]
		return !isRequest && string(m["id"]) == id
	}))
}

// awaitResult is awaitResponse for a request that must succeed.
func (c *realClaude) awaitResult(id string) json.RawMessage {
	c.t.Helper()
	m := c.awaitResponse(id)
	if m["result"] == nil {
		c.t.Fatalf("request %s failed: %s", id, m["error"])
	}
	return m["result"]
}

// awaitRequest waits for a request from the agent with method and returns
// it as the editor got it.
func (c *realClaude) awaitRequest(method string) string {
	c.t.Helper()
	want, _ := json.Marshal(method)
	return c.awaitLine(method, func(m rpcLine) bool {
		return m["id"] != nil && string(m["method"]) == string(want)
	})
}

// turnEnd returns the line that ended the prompt turn, if the editor has
// seen it: the prompt's response in v1; in v2, the session's first idle
// state after the prompt's response (v2 answers a prompt once the agent
// takes it in).
func (c *realClaude) turnEnd() (string, bool) {
	answered := false
	for _, l := range toStrings(c.out.all()) {
		m := parseLine(l)
		if m["method"] == nil && c.promptID != "" && string(m["id"]) == c.promptID {
			if !c.v2 {
				return l, true
			}
			answered = true
		} else if answered && isIdle(m, c.sid) {
			return l, true
		}
	}
	return "", false
}

func (c *realClaude) turnEnded() bool {
	_, ended := c.turnEnd()
	return ended
}

// isIdle reports whether m is the state_update that ends a v2 turn of sid.
func isIdle(m rpcLine, sid string) bool {
	var p struct {
		SessionID string `json:"sessionId"`
		Update    struct {
			SessionUpdate string `json:"sessionUpdate"`
			State         string `json:"state"`
		} `json:"update"`
	}
	_ = json.Unmarshal(m["params"], &p)
	return string(m["method"]) == `"session/update"` && p.SessionID == sid &&
		p.Update.SessionUpdate == "state_update" && p.Update.State == "idle"
}

// initialize opens the connection in ACP v1, or v2 if c.v2, advertising caps.
func (c *realClaude) initialize(caps map[string]any) json.RawMessage {
	c.t.Helper()
	info := map[string]any{"name": "acp-broker-tests", "version": "1.0.0"}
	params := map[string]any{"protocolVersion": 1, "clientCapabilities": caps, "clientInfo": info}
	if c.v2 {
		params = map[string]any{"protocolVersion": 2, "capabilities": caps, "info": info}
	}
	return c.awaitResult(c.request("initialize", params))
}

// newSession opens a session in c.cwd and returns the agent's response.
func (c *realClaude) newSession() json.RawMessage {
	c.t.Helper()
	res := c.awaitResult(c.request("session/new", map[string]any{"cwd": c.cwd, "mcpServers": []any{}}))
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(res, &r); err != nil || r.SessionID == "" {
		c.t.Fatalf("session/new result without a sessionId: %s", res)
	}
	c.sid = r.SessionID
	return res
}

// start initializes, opens a session and sends the prompt text; it returns
// the prompt's request id.
func (c *realClaude) start(caps map[string]any, text string) string {
	c.t.Helper()
	c.initialize(caps)
	c.newSession()
	return c.prompt(text)
}

// prompt sends a prompt with text in the session and returns its id.
func (c *realClaude) prompt(text string) string {
	c.t.Helper()
	c.promptID = c.request("session/prompt", map[string]any{"sessionId": c.sid, "prompt": []any{map[string]any{"type": "text", "text": text}}})
	return c.promptID
}

// awaitTurnEnd waits for the end of the prompt turn and returns its stop
// reason: the prompt's response in v1, the session's idle state in v2 (whose
// prompt is answered as soon as the agent takes it in).
func (c *realClaude) awaitTurnEnd(promptID string) string {
	c.t.Helper()
	if promptID != c.promptID {
		c.t.Fatalf("test bug: prompt %s is not the last one, %s", promptID, c.promptID)
	}
	deadline := time.Now().Add(c.wait)
	line, ended := c.turnEnd()
	for ; !ended; line, ended = c.turnEnd() {
		if time.Now().After(deadline) {
			c.t.Fatalf("the turn did not end\n%s", c.debug())
		}
		time.Sleep(20 * time.Millisecond)
	}
	var end struct {
		StopReason string `json:"stopReason"`
	}
	m := parseLine(line)
	if !c.v2 {
		if m["result"] == nil {
			c.t.Fatalf("the prompt failed: %s", clip(line))
		}
		_ = json.Unmarshal(m["result"], &end)
		return end.StopReason
	}
	var p struct {
		Update json.RawMessage `json:"update"`
	}
	_ = json.Unmarshal(m["params"], &p)
	_ = json.Unmarshal(p.Update, &end)
	return end.StopReason
}

// finish closes the editor's side; the broker must then exit 0, having
// written nothing but JSON-RPC messages on stdout.
func (c *realClaude) finish() {
	c.t.Helper()
	c.CloseEditor()
	if code := c.Wait(); code != 0 {
		c.t.Errorf("acp-broker exited with status %d\n%s", code, c.debug())
	}
	for _, line := range toStrings(c.out.all()) {
		if m := parseLine(line); m == nil || string(m["jsonrpc"]) != `"2.0"` {
			c.t.Errorf("the editor got a line that is not a JSON-RPC message: %s", clip(line))
		}
	}
}

// agentLines are the lines of one of the tee files.
func (c *realClaude) agentLines(file string) []string {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// agentLine waits until the agent has sent (file agentOut) or received
// (agentIn) a line that match accepts, and returns it.
func (c *realClaude) agentLine(file, what string, match func(rpcLine) bool) string {
	c.t.Helper()
	deadline := time.Now().Add(c.wait)
	for {
		for _, l := range c.agentLines(file) {
			if m := parseLine(l); m != nil && match(m) {
				return l
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the agent never %s", what)
		}
		// What the agent sent before its turn ended is in its file by
		// then, so the end of the turn ends the wait (after one last look:
		// it may have ended since the look above). What the broker sent
		// it may still be on its way, behind a session/cancel the agent
		// ended its turn on.
		if c.promptID != "" && file == c.agentOut && c.turnEnded() {
			for _, l := range c.agentLines(file) {
				if m := parseLine(l); m != nil && match(m) {
					return l
				}
			}
			c.t.Fatalf("the turn ended and the agent never %s (did it decide by itself?)", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// agentAnswer waits for the answer the agent got to its request id.
func (c *realClaude) agentAnswer(id json.RawMessage) string {
	c.t.Helper()
	return c.agentLine(c.agentIn, "got an answer to its request "+string(id), func(m rpcLine) bool {
		return m["method"] == nil && bytes.Equal(m["id"], id)
	})
}

// agentSent waits for the request with method and id that the agent sent
// and returns it as the agent wrote it.
func (c *realClaude) agentSent(method string, id json.RawMessage) string {
	c.t.Helper()
	want, _ := json.Marshal(method)
	return c.agentLine(c.agentOut, "sent "+method+" "+string(id), func(m rpcLine) bool {
		return string(m["method"]) == string(want) && bytes.Equal(m["id"], id)
	})
}

// relayed requires line, which the editor got, to be the agent's request
// byte for byte.
func (c *realClaude) relayed(line string) {
	c.t.Helper()
	m := parseLine(line)
	var method string
	_ = json.Unmarshal(m["method"], &method)
	if sent := c.agentSent(method, m["id"]); sent != line {
		c.t.Fatalf("the editor got\n  %s\nthe agent sent\n  %s", clip(line), clip(sent))
	}
}

// brokerAnswered requires the broker to answer the agent's permission
// request id itself with option, byte for byte; it fails as soon as the
// request reaches the editor instead.
func (c *realClaude) brokerAnswered(id json.RawMessage, option string) {
	c.t.Helper()
	deadline := time.Now().Add(c.wait)
	lastLook := false
	for {
		for _, l := range c.agentLines(c.agentIn) {
			if m := parseLine(l); m != nil && m["method"] == nil && bytes.Equal(m["id"], id) {
				if want := selected(string(id), option); l != want {
					c.t.Errorf("the agent was answered\n  %s\nwant\n  %s", l, want)
				}
				return
			}
		}
		for _, l := range c.editorRequests("session/request_permission") {
			if bytes.Equal(parseLine(l)["id"], id) {
				c.t.Fatalf("the broker forwarded the request to the editor instead of answering %q itself: %s\naudit: %s", option, clip(l), strings.Join(c.agentLines(c.audit), "\n"))
			}
		}
		if ended := c.promptID != "" && c.turnEnded(); ended || time.Now().After(deadline) {
			if ended && !lastLook {
				lastLook = true // it may have ended since the look above
				continue
			}
			c.t.Fatalf("the agent never got an answer to its request %s (turn ended: %v)", id, ended)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// editorRequests are the requests with method that reached the editor so far.
func (c *realClaude) editorRequests(method string) []string {
	want, _ := json.Marshal(method)
	var out []string
	for _, l := range toStrings(c.out.all()) {
		if m := parseLine(l); m != nil && m["id"] != nil && string(m["method"]) == string(want) {
			out = append(out, l)
		}
	}
	return out
}

// auditEntry is the part of an audit line the tests check.
type auditEntry struct {
	Session    string `json:"session"`
	ToolCallID string `json:"tool_call_id"`
	Method     string `json:"method"`
	Decision   string `json:"decision"`
	Source     string `json:"source"`
	RuleID     string `json:"rule_id"`
	Option     string `json:"option"`
	Reason     string `json:"reason"`
}

// auditOf waits for the audit line of the permission request about
// toolCallID and returns it.
func (c *realClaude) auditOf(toolCallID string) auditEntry {
	c.t.Helper()
	return c.auditWhere("tool call "+toolCallID, func(e auditEntry) bool {
		return e.Method == "session/request_permission" && e.ToolCallID == toolCallID
	})
}

// auditWhere waits for an audit line that match accepts and returns it.
func (c *realClaude) auditWhere(what string, match func(auditEntry) bool) auditEntry {
	c.t.Helper()
	deadline := time.Now().Add(c.wait)
	for {
		for _, l := range c.agentLines(c.audit) {
			var e auditEntry
			if json.Unmarshal([]byte(l), &e) == nil && match(e) {
				return e
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no audit line for %s in:\n%s", what, strings.Join(c.agentLines(c.audit), "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func requireFile(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the command did not run: %v", err)
	}
}

func requireNoFile(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); err == nil {
		t.Errorf("%s exists: the command ran", path)
	}
}

// toolCallOf is the toolCall of a v1 permission request, or the subject's
// toolCall of a v2 one.
func toolCallOf(t *testing.T, line string) (toolCallID string, toolCall map[string]json.RawMessage) {
	t.Helper()
	var p struct {
		ToolCall map[string]json.RawMessage `json:"toolCall"`
		Subject  struct {
			Type     string                     `json:"type"`
			ToolCall map[string]json.RawMessage `json:"toolCall"`
		} `json:"subject"`
	}
	if err := json.Unmarshal(parseLine(line)["params"], &p); err != nil {
		t.Fatalf("unreadable permission request: %v: %s", err, clip(line))
	}
	tc := p.ToolCall
	if tc == nil {
		tc = p.Subject.ToolCall
	}
	_ = json.Unmarshal(tc["toolCallId"], &toolCallID)
	return toolCallID, tc
}

// bash is the script of a conversation that runs command once.
func bash(marker, command string) anthropicapi.Conversation {
	return anthropicapi.Conversation{Marker: marker, Steps: []anthropicapi.Step{
		{Tool: "Bash", Input: map[string]any{"command": command, "description": "Make the test's marker file"}},
		{Text: "Finished."},
	}}
}

const (
	touchAllowed = `[[rule]]
id = "touch-markers"
decision = "allow"
command = "touch *"
`
	touchDenied = `[[rule]]
id = "no-touch"
decision = "deny"
reason = "the tests make no markers"
command = "touch *"
`
	// firstToolUse is the id the mock gives the first tool call of the
	// first scripted conversation.
	firstToolUse = "toolu_mock_0_0"
)

// TestRealClaudeAllowedCommandRuns: a command the user's rule allows runs
// without the editor seeing a request. It pins the request claude-agent-acp
// 0.101 sends for it, which names the file touch makes in locations (issue
// item 6b: the rule "touch *" covers what its own arguments name).
func TestRealClaudeAllowedCommandRuns(t *testing.T) {
	c := startRealClaude(t, realClaudeOptions{rules: touchAllowed, convs: []anthropicapi.Conversation{bash("MARKER-ALLOW", "touch claude-marker.txt")}})
	prompt := c.start(map[string]any{}, "MARKER-ALLOW: make the marker")
	sent := c.agentLine(c.agentOut, "asked for permission", func(m rpcLine) bool { return string(m["method"]) == `"session/request_permission"` })
	want := fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"toolCall":{"toolCallId":%q,"name":"Bash","status":"pending","rawInput":{"command":"touch claude-marker.txt","description":"Make the test's marker file"},"title":"touch claude-marker.txt","kind":"execute","content":[{"type":"content","content":{"type":"text","text":"Make the test's marker file"}}],"locations":[{"path":%q}]},"options":[{"optionId":"allow-once","name":"Yes","kind":"allow_once"},{"optionId":"reject","name":"No","kind":"reject_once"}],"sessionId":%q}}`,
		firstToolUse, filepath.Join(c.cwd, "claude-marker.txt"), c.sid)
	if sent != want {
		t.Errorf("claude-agent-acp 0.101 sent\n  %s\nthe test pins\n  %s", sent, want)
	}
	c.brokerAnswered(json.RawMessage("0"), "allow-once")
	if e := c.auditOf(firstToolUse); e.Decision != "allow" || e.RuleID != "touch-markers" {
		t.Errorf("audit: %+v, want an allow by rule touch-markers", e)
	}
	if stop := c.awaitTurnEnd(prompt); stop != "end_turn" {
		t.Errorf("stop reason %q, want end_turn", stop)
	}
	requireFile(t, filepath.Join(c.cwd, "claude-marker.txt"))
	if got := c.editorRequests("session/request_permission"); len(got) != 0 {
		t.Errorf("the editor was asked: %s", got[0])
	}
	c.finish()
}

// TestRealClaudeAllowedCommandKeepsDenyPaths: the rule "touch *" allows
// what touch's own arguments name, but a deny rule on a path still denies
// touch there, and a protected path is still asked (issue item 6b).
func TestRealClaudeAllowedCommandKeepsDenyPaths(t *testing.T) {
	for _, tc := range []struct {
		name, command, file, decision string
	}{
		{"denied-path", "touch gen/claude-marker.txt", "gen/claude-marker.txt", "deny"},
		{"protected-path", "touch .env", ".env", "ask"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startRealClaude(t, realClaudeOptions{rules: touchAllowed + `
[[rule]]
id = "no-generated"
decision = "deny"
reason = "generated files are rebuilt"
path = "./gen/**"
`, convs: []anthropicapi.Conversation{bash("MARKER-PATHS", tc.command)}})
			if err := os.Mkdir(filepath.Join(c.cwd, "gen"), 0o755); err != nil {
				t.Fatal(err)
			}
			prompt := c.start(map[string]any{}, "MARKER-PATHS: make the marker")
			if tc.decision == "deny" {
				c.brokerAnswered(json.RawMessage("0"), "reject")
				if e := c.auditOf(firstToolUse); e.Decision != "deny" || e.RuleID != "no-generated" {
					t.Errorf("audit: %+v, want a deny by rule no-generated", e)
				}
			} else {
				req := c.awaitRequest("session/request_permission")
				c.relayed(req)
				c.respond(parseLine(req)["id"], `{"outcome":{"outcome":"selected","optionId":"reject"}}`)
			}
			if stop := c.awaitTurnEnd(prompt); stop != "end_turn" {
				t.Errorf("stop reason %q, want end_turn", stop)
			}
			requireNoFile(t, filepath.Join(c.cwd, tc.file))
			c.finish()
		})
	}
}

// TestRealClaudeDeniedCommandRefused: a command a deny rule names does not
// run, and the model is told it was refused.
func TestRealClaudeDeniedCommandRefused(t *testing.T) {
	c := startRealClaude(t, realClaudeOptions{rules: touchDenied, convs: []anthropicapi.Conversation{bash("MARKER-DENY", "touch claude-marker.txt")}})
	prompt := c.start(map[string]any{}, "MARKER-DENY: make the marker")
	c.brokerAnswered(json.RawMessage("0"), "reject")
	if e := c.auditOf(firstToolUse); e.Decision != "deny" || e.RuleID != "no-touch" {
		t.Errorf("audit: %+v, want a deny by rule no-touch", e)
	}
	if stop := c.awaitTurnEnd(prompt); stop != "end_turn" {
		t.Errorf("stop reason %q, want end_turn", stop)
	}
	results := c.mock.WaitToolResults("MARKER-DENY", 1, c.wait)
	if len(results) != 1 || !results[0].IsError {
		t.Errorf("the model got %+v, want one refusal", results)
	}
	requireNoFile(t, filepath.Join(c.cwd, "claude-marker.txt"))
	if got := c.editorRequests("session/request_permission"); len(got) != 0 {
		t.Errorf("the editor was asked: %s", got[0])
	}
	c.finish()
}

// TestRealClaudeDenyIsToldFirst: Claude Code reports a broker deny as
// refused by the user; the editor that takes notices is told by the broker,
// with the rule and its reason, before Claude's own update of the refused
// tool call.
func TestRealClaudeDenyIsToldFirst(t *testing.T) {
	c := startRealClaude(t, realClaudeOptions{rules: touchDenied, convs: []anthropicapi.Conversation{bash("MARKER-TELL", "touch claude-marker.txt")}})
	prompt := c.start(map[string]any{"session": map[string]any{"notices": map[string]any{}}}, "MARKER-TELL: make the marker")
	c.brokerAnswered(json.RawMessage("0"), "reject")
	if stop := c.awaitTurnEnd(prompt); stop != "end_turn" {
		t.Errorf("stop reason %q, want end_turn", stop)
	}
	told, refused := -1, -1
	for i, l := range toStrings(c.out.all()) {
		if title, description := toldTitle(l); isTold(l) && told < 0 {
			told = i
			if title != "acp-broker denied: touch claude-marker.txt" || !strings.HasPrefix(description, "rule no-touch (") || !strings.HasSuffix(description, "): the tests make no markers") {
				t.Errorf("the editor was told %q, %q", title, description)
			}
		}
		if refused < 0 && strings.Contains(l, `"tool_call_update"`) && strings.Contains(l, firstToolUse) && strings.Contains(l, `"failed"`) {
			refused = i
		}
	}
	if told < 0 || refused < 0 || told > refused {
		t.Errorf("the broker's notice is line %d, Claude's update of the refused tool call line %d: want the notice first", told, refused)
	}
	requireNoFile(t, filepath.Join(c.cwd, "claude-marker.txt"))
	c.finish()
}

// TestRealClaudeAskedCommand: a command no rule speaks for goes to the
// editor unchanged, and the editor's answer goes back unchanged and counts.
func TestRealClaudeAskedCommand(t *testing.T) {
	for _, tc := range []struct {
		option string
		runs   bool
	}{{"allow-once", true}, {"reject", false}} {
		t.Run(tc.option, func(t *testing.T) {
			c := startRealClaude(t, realClaudeOptions{convs: []anthropicapi.Conversation{bash("MARKER-ASK", "touch claude-marker.txt")}})
			prompt := c.start(map[string]any{}, "MARKER-ASK: make the marker")
			got := c.awaitRequest("session/request_permission")
			c.relayed(got)
			id := parseLine(got)["id"]
			answer := c.respond(id, fmt.Sprintf(`{"outcome":{"outcome":"selected","optionId":%q}}`, tc.option))
			if got := c.agentAnswer(id); got != answer {
				t.Errorf("the agent got\n  %s\nthe editor sent\n  %s", got, answer)
			}
			if e := c.auditOf(firstToolUse); e.Source != "editor" || e.Option != tc.option {
				t.Errorf("audit: %+v, want the editor's %s", e, tc.option)
			}
			if stop := c.awaitTurnEnd(prompt); stop != "end_turn" {
				t.Errorf("stop reason %q, want end_turn", stop)
			}
			marker := filepath.Join(c.cwd, "claude-marker.txt")
			if tc.runs {
				requireFile(t, marker)
			} else {
				requireNoFile(t, marker)
				if r := c.mock.WaitToolResults("MARKER-ASK", 1, c.wait); len(r) != 1 || !r[0].IsError {
					t.Errorf("the model got %+v, want one refusal", r)
				}
			}
			c.finish()
		})
	}
}

// TestRealClaudeCancelWhileAsking: session/cancel while the editor holds a
// request: the broker answers it cancelled itself (the editor's own
// cancelled answer, which ACP requires, is dropped), the turn ends
// cancelled, and nothing runs. Over v1 and v2, and for a subagent's
// request, which the parent's cancel reaches (issue item 4).
func TestRealClaudeCancelWhileAsking(t *testing.T) {
	for _, tc := range []struct {
		name     string
		v2       bool
		subagent bool
	}{{name: "v1"}, {name: "v2", v2: true}, {name: "subagent", subagent: true}} {
		t.Run(tc.name, func(t *testing.T) {
			convs := []anthropicapi.Conversation{bash("MARKER-CANCEL", "touch claude-marker.txt")}
			caps := map[string]any{}
			if tc.subagent {
				caps["subagents"] = map[string]any{}
				convs = []anthropicapi.Conversation{
					{Marker: "MARKER-CANCEL", Steps: []anthropicapi.Step{
						{Tool: "Agent", Input: map[string]any{"description": "Make the marker", "prompt": "MARKER-CHILD: make the marker", "subagent_type": "general-purpose"}},
						{Text: "The subagent is at work."},
					}},
					bash("MARKER-CHILD", "touch claude-marker.txt"),
				}
			}
			c := startRealClaude(t, realClaudeOptions{convs: convs})
			c.v2 = tc.v2
			prompt := c.start(caps, "MARKER-CANCEL: make the marker")
			req := c.awaitRequest("session/request_permission")
			var p struct {
				SessionID string `json:"sessionId"`
			}
			_ = json.Unmarshal(parseLine(req)["params"], &p)
			if tc.subagent == (p.SessionID == c.sid) {
				t.Fatalf("the request is not of the session the test expects: %s", clip(req))
			}
			id := parseLine(req)["id"]
			c.notify("session/cancel", map[string]any{"sessionId": c.sid})
			// The broker answers at once, without the editor's answer.
			first := c.agentLine(c.agentIn, "got the broker's cancelled answer", func(m rpcLine) bool {
				return m["method"] == nil && bytes.Equal(m["id"], id)
			})
			if !isCancelled(first) {
				t.Errorf("the agent was answered %s, want cancelled", first)
			}
			c.respond(id, `{"outcome":{"outcome":"cancelled"}}`)
			if stop := c.awaitTurnEnd(prompt); stop != "cancelled" {
				t.Errorf("stop reason %q, want cancelled", stop)
			}
			var answers []string
			for _, l := range c.agentLines(c.agentIn) {
				if m := parseLine(l); m["method"] == nil && bytes.Equal(m["id"], id) {
					answers = append(answers, l)
				}
			}
			if len(answers) != 1 || !isCancelled(answers[0]) {
				t.Errorf("the agent got %d answers %v, want one, cancelled", len(answers), answers)
			}
			c.auditWhere("the request's cancel", func(e auditEntry) bool {
				return e.Method == "session/request_permission" && e.Session == p.SessionID && e.Decision == "cancelled"
			})
			requireNoFile(t, filepath.Join(c.cwd, "claude-marker.txt"))
			c.finish()
		})
	}
}

func isCancelled(answer string) bool {
	var m struct {
		Result struct {
			Outcome struct {
				Outcome string `json:"outcome"`
			} `json:"outcome"`
		} `json:"result"`
	}
	return json.Unmarshal([]byte(answer), &m) == nil && m.Result.Outcome.Outcome == "cancelled"
}

// TestRealClaudeDefaultModeIsGoverned: out of the box, claude-agent-acp
// starts a session in "auto", where its own classifier decides and the
// client is never asked. Through the broker, the session is switched to
// "default" before the editor gets it (issue item 0), so the command is
// asked.
func TestRealClaudeDefaultModeIsGoverned(t *testing.T) {
	c := startRealClaude(t, realClaudeOptions{convs: []anthropicapi.Conversation{bash("MARKER-MODE", "touch claude-marker.txt")}})
	c.initialize(map[string]any{})
	res := c.newSession()
	var r struct {
		Modes struct {
			CurrentModeID string `json:"currentModeId"`
		} `json:"modes"`
	}
	_ = json.Unmarshal(res, &r)
	if r.Modes.CurrentModeID != "auto" {
		t.Fatalf("claude-agent-acp opened the session in mode %q, not in its default auto: the test runs nothing blind", r.Modes.CurrentModeID)
	}
	// The broker's own request, which it may send after it relayed the
	// session to the editor.
	switched := c.agentLine(c.agentIn, "got the broker's mode switch", func(m rpcLine) bool {
		return strings.HasPrefix(string(m["id"]), `"acp-broker-`) &&
			(string(m["method"]) == `"session/set_mode"` || string(m["method"]) == `"session/set_config_option"`)
	})
	t.Logf("the broker switched the mode: %s", switched)
	if !strings.Contains(switched, `"value":"default"`) && !strings.Contains(switched, `"modeId":"default"`) {
		t.Errorf("the broker did not switch the session to default: %s", switched)
	}
	prompt := c.prompt("MARKER-MODE: make the marker")
	line := c.awaitRequest("session/request_permission")
	c.respond(parseLine(line)["id"], `{"outcome":{"outcome":"selected","optionId":"reject"}}`)
	c.awaitTurnEnd(prompt)
	requireNoFile(t, filepath.Join(c.cwd, "claude-marker.txt"))
	c.finish()
}

// TestRealClaudeV2 runs the scenarios over ACP v2, which claude-agent-acp
// serves to an editor that asks for protocolVersion 2: its permission
// request has a title and a subject {type: "tool_call", toolCall}, and no
// toolCall of its own (issue item 5). The broker must decide it as it
// decides the v1 request, and change no protocolVersion.
func TestRealClaudeV2(t *testing.T) {
	for _, tc := range []struct {
		name, rules, answer string
		asked, runs         bool
		decision            string
	}{
		{name: "denied", rules: touchDenied, decision: "deny"},
		{name: "allowed", rules: touchAllowed, decision: "allow", runs: true},
		{name: "asked-allow", asked: true, answer: "allow-once", runs: true},
		{name: "asked-reject", asked: true, answer: "reject"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startRealClaude(t, realClaudeOptions{rules: tc.rules, convs: []anthropicapi.Conversation{bash("MARKER-V2", "touch claude-marker.txt")}})
			c.v2 = true
			initRes := c.initialize(map[string]any{})
			if v := string(parseLine(`{"r":` + string(initRes) + `}`)["r"]); !strings.Contains(v, `"protocolVersion":2`) {
				t.Fatalf("the agent did not answer in v2: %s", clip(v))
			}
			if in := c.agentLines(c.agentIn); len(in) == 0 || !strings.Contains(in[0], `"protocolVersion":2`) {
				t.Fatalf("the agent got another initialize than the editor sent: %v", in)
			}
			c.newSession()
			prompt := c.prompt("MARKER-V2: make the marker")
			sent := c.agentLine(c.agentOut, "asked for permission", func(m rpcLine) bool { return string(m["method"]) == `"session/request_permission"` })
			t.Logf("the v2 request of claude-agent-acp 0.101: %s", sent)
			pinV2Request(t, c, sent)
			id := parseLine(sent)["id"]
			if tc.asked {
				if got := c.awaitRequest("session/request_permission"); got != sent {
					t.Fatalf("the editor got\n  %s\nthe agent sent\n  %s", clip(got), clip(sent))
				}
				answer := c.respond(id, fmt.Sprintf(`{"outcome":{"outcome":"selected","optionId":%q}}`, tc.answer))
				if got := c.agentAnswer(id); got != answer {
					t.Errorf("the agent got\n  %s\nthe editor sent\n  %s", got, answer)
				}
			} else {
				option := map[string]string{"allow": "allow-once", "deny": "reject"}[tc.decision]
				c.brokerAnswered(id, option)
				if e := c.auditOf(firstToolUse); e.Decision != tc.decision || e.Source != "rule" {
					t.Errorf("audit: %+v, want %s by a rule", e, tc.decision)
				}
			}
			if stop := c.awaitTurnEnd(prompt); stop != "end_turn" {
				t.Errorf("stop reason %q, want end_turn", stop)
			}
			marker := filepath.Join(c.cwd, "claude-marker.txt")
			if tc.runs {
				requireFile(t, marker)
			} else {
				requireNoFile(t, marker)
			}
			if got := c.editorRequests("session/request_permission"); !tc.asked && len(got) != 0 {
				t.Errorf("the editor was asked: %s", got[0])
			}
			c.finish()
		})
	}
}

// pinV2Request checks the shape of the v2 request the tests rely on.
func pinV2Request(t *testing.T, c *realClaude, line string) {
	t.Helper()
	var p struct {
		SessionID string          `json:"sessionId"`
		Title     string          `json:"title"`
		ToolCall  json.RawMessage `json:"toolCall"`
		Subject   struct {
			Type     string `json:"type"`
			ToolCall struct {
				ToolCallID string          `json:"toolCallId"`
				Kind       string          `json:"kind"`
				Status     json.RawMessage `json:"status"`
				RawInput   struct {
					Command string `json:"command"`
				} `json:"rawInput"`
				Locations []struct {
					Path string `json:"path"`
				} `json:"locations"`
			} `json:"toolCall"`
		} `json:"subject"`
		Options []struct {
			OptionID string `json:"optionId"`
			Kind     string `json:"kind"`
		} `json:"options"`
	}
	if err := json.Unmarshal(parseLine(line)["params"], &p); err != nil {
		t.Fatalf("unreadable v2 request: %v", err)
	}
	tc := p.Subject.ToolCall
	ok := p.SessionID == c.sid && p.Title == "touch claude-marker.txt" && p.ToolCall == nil &&
		p.Subject.Type == "tool_call" && tc.ToolCallID == firstToolUse && tc.Kind == "execute" && tc.Status == nil &&
		tc.RawInput.Command == "touch claude-marker.txt" &&
		len(tc.Locations) == 1 && tc.Locations[0].Path == filepath.Join(c.cwd, "claude-marker.txt") &&
		len(p.Options) == 2 && p.Options[0].OptionID == "allow-once" && p.Options[1].OptionID == "reject"
	if !ok {
		t.Errorf("the v2 request is not the one the test pins: %s", line)
	}
}

// TestRealClaudeSubagent: with clientCapabilities.subagents, the model's
// Agent tool runs a subagent as a child session, announced by a
// subagent_update on the parent; with isolation "worktree" the child works
// in its own git worktree, <cwd>/.claude/worktrees/agent-<id>, and its
// request carries the child's sessionId (issue item 4). It is decided with
// the parent's rules and the child's cwd: "./sub-marker.txt" is the file in
// the worktree.
func TestRealClaudeSubagent(t *testing.T) {
	for _, tc := range []struct {
		name, rules, decision string
		runs                  bool
	}{
		{name: "denied", decision: "deny", rules: `[[rule]]
id = "no-sub-marker"
decision = "deny"
reason = "not in this worktree"
path = "./sub-marker.txt"
`},
		{name: "allowed", decision: "allow", runs: true, rules: touchAllowed + `
[[rule]]
id = "sub-marker"
decision = "allow"
path = "./sub-marker.txt"
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startRealClaude(t, realClaudeOptions{git: true, rules: tc.rules, convs: []anthropicapi.Conversation{
				{Marker: "MARKER-PARENT", Steps: []anthropicapi.Step{
					{Tool: "Agent", Input: map[string]any{"description": "Make the marker", "prompt": "MARKER-CHILD: make the marker", "subagent_type": "general-purpose", "isolation": "worktree"}},
					{Text: "The subagent is at work."},
				}},
				bash("MARKER-CHILD", "touch sub-marker.txt"),
			}})
			prompt := c.start(map[string]any{"subagents": map[string]any{}}, "MARKER-PARENT: have a subagent make the marker")
			var child, childCwd string
			c.awaitLine("the child's cwd", func(m rpcLine) bool {
				var p struct {
					SessionID string `json:"sessionId"`
					Update    struct {
						SessionUpdate string  `json:"sessionUpdate"`
						SessionID     string  `json:"sessionId"`
						Cwd           *string `json:"cwd"`
					} `json:"update"`
				}
				_ = json.Unmarshal(m["params"], &p)
				if p.SessionID != c.sid || p.Update.SessionUpdate != "subagent_update" || p.Update.Cwd == nil {
					return false
				}
				child, childCwd = p.Update.SessionID, *p.Update.Cwd
				return true
			})
			if want := filepath.Join(c.cwd, ".claude", "worktrees", "agent-"+child); childCwd != want {
				t.Errorf("the child's cwd is %s, want %s", childCwd, want)
			}
			sent := c.agentLine(c.agentOut, "asked for permission", func(m rpcLine) bool { return string(m["method"]) == `"session/request_permission"` })
			var p struct {
				SessionID string `json:"sessionId"`
			}
			_ = json.Unmarshal(parseLine(sent)["params"], &p)
			toolCallID, toolCall := toolCallOf(t, sent)
			if p.SessionID != child || !bytes.Contains(toolCall["locations"], []byte(jsonText(filepath.Join(childCwd, "sub-marker.txt")))) {
				t.Errorf("the child's request is not the one the test expects: %s", sent)
			}
			option := map[string]string{"allow": "allow-once", "deny": "reject"}[tc.decision]
			id := parseLine(sent)["id"]
			c.brokerAnswered(id, option)
			if e := c.auditOf(toolCallID); e.Decision != tc.decision || e.Source != "rule" {
				t.Errorf("audit: %+v, want %s by a rule", e, tc.decision)
			}
			if r := c.mock.WaitToolResults("MARKER-CHILD", 1, c.wait); len(r) != 1 || r[0].IsError == tc.runs {
				t.Errorf("the subagent's model got %+v", r)
			}
			if stop := c.awaitTurnEnd(prompt); stop != "end_turn" {
				t.Errorf("stop reason %q, want end_turn", stop)
			}
			marker := filepath.Join(childCwd, "sub-marker.txt")
			if tc.runs {
				requireFile(t, marker)
			} else {
				requireNoFile(t, marker)
			}
			requireNoFile(t, filepath.Join(c.cwd, "sub-marker.txt"))
			if got := c.editorRequests("session/request_permission"); len(got) != 0 {
				t.Errorf("the editor was asked: %s", got[0])
			}
			c.finish()
		})
	}
}

// TestRealClaudeAskUserQuestion: with clientCapabilities.elicitation.form,
// the AskUserQuestion tool is an ACP form elicitation, not a permission
// request: it reaches the editor unchanged, and the editor's answer
// reaches the agent unchanged and the model.
func TestRealClaudeAskUserQuestion(t *testing.T) {
	for _, tc := range []struct {
		name, result, modelGets string
	}{
		{"accept", `{"action":"accept","content":{"question_0":"Blue"}}`, "Blue"},
		{"decline", `{"action":"decline"}`, "did not answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startRealClaude(t, realClaudeOptions{convs: []anthropicapi.Conversation{{Marker: "MARKER-QUESTION", Steps: []anthropicapi.Step{
				{Tool: "AskUserQuestion", Input: map[string]any{"questions": []any{map[string]any{
					"question": "Which colour should the marker be?", "header": "Colour", "multiSelect": false,
					"options": []any{map[string]any{"label": "Red", "description": "warm"}, map[string]any{"label": "Blue", "description": "cold"}},
				}}}},
				{Text: "Thanks."},
			}}}})
			prompt := c.start(map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}, "MARKER-QUESTION: ask me")
			got := c.awaitRequest("elicitation/create")
			c.relayed(got)
			if !strings.Contains(got, `"mode":"form"`) || !strings.Contains(got, `"question_0"`) {
				t.Errorf("not the form elicitation the test expects: %s", got)
			}
			id := parseLine(got)["id"]
			answer := c.respond(id, tc.result)
			if got := c.agentAnswer(id); got != answer {
				t.Errorf("the agent got\n  %s\nthe editor sent\n  %s", got, answer)
			}
			if stop := c.awaitTurnEnd(prompt); stop != "end_turn" {
				t.Errorf("stop reason %q, want end_turn", stop)
			}
			if r := c.mock.WaitToolResults("MARKER-QUESTION", 1, c.wait); len(r) != 1 || !strings.Contains(r[0].Text, tc.modelGets) {
				t.Errorf("the model got %+v, want the answer %q", r, tc.modelGets)
			}
			if got := c.editorRequests("session/request_permission"); len(got) != 0 {
				t.Errorf("the question came as a permission request: %s", got[0])
			}
			c.finish()
		})
	}
}
