//go:build linux

package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tests in this file pin what the README's "MCP servers" section
// promises: the broker rewrites each stdio MCP server of a session set-up so
// that the agent starts it through `acp-broker mcp-proxy`; the proxy relays
// the server byte for byte, reports its tools and their annotations, and
// holds each tools/call for the broker's decision. The server is a real one,
// on the official MCP Go SDK (internal/mcpserver), and the MCP client that
// plays the agent's side is the same SDK's.

// notesServer is the session's mcpServers list: the notes server and an
// http server (never proxied).
var notesServer = serverList()

// serverList is an mcpServers list of the notes server, an http server and
// the extra entries given.
func serverList(extra ...string) string {
	return "[" + strings.Join(append([]string{
		`{"name":"notes","command":"$MCPSERVER","args":["--flag","x y"],"env":[{"name":"MCPSERVER_LOG","value":"$ROOT/calls.log"},{"name":"MCPSERVER_STDERR","value":"1"}]}`,
		`{"type":"http","name":"web","url":"https://mcp.example.invalid/mcp","headers":[]}`,
	}, extra...), ",") + "]"
}

// serverEntry is one mcpServers entry as the agent received it.
type serverEntry struct {
	Type    string   `json:"type"`
	Name    string   `json:"name"`
	Command string   `json:"command"`
	Args    []string `json:"args"`
	Env     []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"env"`
}

// entries decodes the mcpServers of a session set-up request.
func entries(t testing.TB, setup string) []serverEntry {
	t.Helper()
	var m struct {
		Params struct {
			MCPServers []serverEntry `json:"mcpServers"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(setup), &m); err != nil {
		t.Fatalf("session set-up is not JSON: %v", err)
	}
	return m.Params.MCPServers
}

func entryNamed(t testing.TB, setup, name string) serverEntry {
	t.Helper()
	for _, e := range entries(t, setup) {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("no mcpServers entry %q in %s", name, clip(setup))
	return serverEntry{}
}

// command is the process the agent would start for the entry: its command,
// its args, and the agent's environment plus the entry's env.
func (e serverEntry) command(extraEnv ...string) *exec.Cmd {
	cmd := exec.Command(e.Command, e.Args...)
	cmd.Env = testEnv()
	for _, v := range e.Env {
		cmd.Env = append(cmd.Env, v.Name+"="+v.Value)
	}
	cmd.Env = append(cmd.Env, extraEnv...)
	return cmd
}

// proxyFlag returns the value of one of the rewritten entry's proxy flags.
func (e serverEntry) proxyFlag(t testing.TB, flag string) string {
	t.Helper()
	for i, a := range e.Args {
		if a == "--" {
			break
		}
		if a == flag && i+1 < len(e.Args) {
			return e.Args[i+1]
		}
	}
	t.Fatalf("the rewritten entry has no %s: %v", flag, e.Args)
	return ""
}

// newMCPClient is the agent's MCP client. Listening for list changes makes
// the SDK subscribe to them, as an agent that re-lists its tools would.
func newMCPClient() *mcpsdk.Client {
	return mcpsdk.NewClient(&mcpsdk.Implementation{Name: "fake-agent", Version: "1.0.0"}, &mcpsdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcpsdk.ToolListChangedRequest) {},
	})
}

// connectThroughAgent has the fake agent start the entry, as a real agent
// does (so the proxy runs in the agent's process group, under the broker),
// and plays the agent's MCP client over the server's stdio. It returns the
// client session and the pid of the process the agent started.
func (d *decider) connectThroughAgent(t *testing.T, e serverEntry) (*mcpsdk.ClientSession, int) {
	t.Helper()
	d.noisy = true // the server's stderr is the agent's, which the broker logs
	addr := fmt.Sprintf("@acpb-mcp-%d-%d", os.Getpid(), ctlCounter.Add(1))
	ln, err := net.Listen("unix", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var env []string
	for _, v := range e.Env {
		env = append(env, v.Name+"="+v.Value)
	}
	d.control(command('M', mustJSON(map[string]any{"addr": addr, "command": e.Command, "args": e.Args, "env": env})))
	_ = ln.(*net.UnixListener).SetDeadline(time.Now().Add(waitTimeout))
	conn, err := ln.Accept()
	if err != nil {
		t.Fatalf("the agent did not start %s: %v", e.Name, err)
	}
	pid, err := strconv.Atoi(string(d.waitEvent('M')[1:]))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	cs, err := newMCPClient().Connect(ctx, &mcpsdk.IOTransport{Reader: conn, Writer: conn}, nil)
	if err != nil {
		t.Fatalf("connecting to %s through the agent: %v\n%s", e.Name, err, d.stderrText())
	}
	t.Cleanup(func() { cs.Close() })
	return cs, pid
}

// connect starts the entry as the agent would and opens an MCP client
// session over it. The proxy's and server's stderr is collected in the
// returned buffer.
func connect(t *testing.T, e serverEntry) (*mcpsdk.ClientSession, *outputBuffer) {
	t.Helper()
	cmd := e.command()
	stderr := &outputBuffer{}
	cmd.Stderr = stderr
	client := newMCPClient()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	cs, err := client.Connect(ctx, &mcpsdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to %s: %v\nstderr:\n%s", e.Name, err, stderr.String())
	}
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() {
			t.Logf("stderr of %s's proxy and server:\n%s", e.Name, stderr.String())
		}
	})
	return cs, stderr
}

// outputBuffer collects a process's output from exec's copying goroutine.
type outputBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *outputBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *outputBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func listTools(t *testing.T, cs *mcpsdk.ClientSession) map[string]*mcpsdk.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	out := map[string]*mcpsdk.Tool{}
	for _, tool := range res.Tools {
		out[tool.Name] = tool
	}
	return out
}

// callTool calls a tool and returns the result's text and whether it is an
// error result.
func callTool(t *testing.T, cs *mcpsdk.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcpsdk.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	return strings.Join(text, "\n"), res.IsError
}

// serverCalls returns the calls that reached the server, one "tool args"
// line each.
func (d *decider) serverCalls(t testing.TB) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(d.root, "calls.log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(string(data), " ", "_"))
}

func reached(calls []string, tool string) bool {
	for _, c := range calls {
		if strings.HasPrefix(c, tool+"_") {
			return true
		}
	}
	return false
}

// claudeMCPRequest is a permission request as Claude Code sends it for an
// MCP tool.
func claudeMCPRequest(id int, toolCallID, server, tool, input string) string {
	name := "mcp__" + server + "__" + tool
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/request_permission","params":{"sessionId":"sess_1","toolCall":{"toolCallId":%q,"title":%q,"kind":"other","rawInput":%s,"_meta":{"claudeCode":{"toolName":%q}}},"options":[{"optionId":"allow_always","name":"Always Allow","kind":"allow_always"},{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}}`,
		id, toolCallID, name, input, name)
}

func TestMCPRewrite(t *testing.T) {
	t.Parallel()
	servers := serverList(`{"name":"raw","command":"/usr/bin/raw-mcp","args":[],"env":[]}`, `{"name":"bare","command":"/usr/bin/bare-mcp","env":[]}`)
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	d := startDecider(t, deciderOptions{rules: "[mcp.raw]\nproxy = false\n", mcpServers: servers, args: []string{"--trace", trace}})
	d.noisy = true
	sent := d.expand(`{"jsonrpc":"2.0","id":"new-1","method":"session/new","params":{"cwd":"$CWD","additionalDirectories":["$LIB"],"mcpServers":` + servers + `}}`)
	notes := entryNamed(t, d.setup, "notes")
	bare := entryNamed(t, d.setup, "bare")

	// Only the command and args of the stdio entries changed, byte for byte;
	// raw (proxy = false) and the http server are as sent.
	want := sent
	want = strings.Replace(want, `"command":"`+jsonText(mcpServerBin)+`","args":["--flag","x y"]`,
		`"command":`+mustJSON(brokerBin)+`,"args":`+mustJSON(notes.Args), 1)
	want = strings.Replace(want, `"command":"/usr/bin/bare-mcp","env":[]}`,
		`"command":`+mustJSON(brokerBin)+`,"env":[],"args":`+mustJSON(bare.Args)+` }`, 1)
	if d.setup != want {
		t.Fatalf("the agent received\n  %s\nwant\n  %s", d.setup, want)
	}
	wantArgs := []string{"mcp-proxy", "--socket", notes.proxyFlag(t, "--socket"), "--token", notes.proxyFlag(t, "--token"), "--server", "notes", "--", mcpServerBin, "--flag", "x y"}
	if fmt.Sprint(notes.Args) != fmt.Sprint(wantArgs) {
		t.Errorf("notes args %q, want %q", notes.Args, wantArgs)
	}
	if bare.Args[len(bare.Args)-1] != "/usr/bin/bare-mcp" {
		t.Errorf("an entry without args runs %q, want just its command", bare.Args)
	}
	if notes.proxyFlag(t, "--token") == bare.proxyFlag(t, "--token") {
		t.Error("two entries share a token")
	}
	rec := waitAudit(t, d.audit, "the rewrite", func(r auditRecord) bool { return r.Decision == "rewritten" })
	for _, s := range []string{"proxied: notes, bare", "raw (proxy = false)", "web (http, not governed)"} {
		if !strings.Contains(rec.Reason, s) {
			t.Errorf("audit reason %q does not say %q", rec.Reason, s)
		}
	}

	// The trace shows both: what the editor sent, noted as rewritten, and
	// what the broker sent the agent instead.
	var sawOriginal, sawRewritten bool
	data, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r struct {
			Dir, Note string
			Message   json.RawMessage
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("trace line: %v: %s", err, line)
		}
		sawOriginal = sawOriginal || (r.Dir == "editor->broker" && strings.HasPrefix(r.Note, "rewritten: ") && strings.Contains(r.Note, "notes, bare") && string(r.Message) == sent)
		sawRewritten = sawRewritten || (r.Dir == "broker->agent" && string(r.Message) == d.setup)
	}
	if !sawOriginal || !sawRewritten {
		t.Errorf("the trace lacks the original (%v) or the rewritten (%v) set-up:\n%s", sawOriginal, sawRewritten, data)
	}

	// session/load is rewritten too.
	load := d.expand(`{"jsonrpc":"2.0","id":"load-1","method":"session/load","params":{"sessionId":"sess_0","cwd":"$CWD","mcpServers":` + notesServer + `}}`)
	d.EditorSend(load)
	got := d.AgentRecv()
	if e := entryNamed(t, got, "notes"); e.Command != brokerBin || e.Args[0] != "mcp-proxy" {
		t.Errorf("session/load's entry was not rewritten: %s", clip(got))
	}
}

// startRaw starts cmd for a test that speaks MCP to it line by line.
func startRaw(t *testing.T, cmd *exec.Cmd) (io.WriteCloser, *bufio.Scanner, *outputBuffer) {
	t.Helper()
	stderr := &outputBuffer{}
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	lines.Buffer(nil, 1<<20)
	return in, lines, stderr
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestMCPProxyIsTransparent runs one raw MCP exchange with the server
// directly and through the rewritten entry: the client's and the server's
// sides must see the same bytes, and the server the same arguments and
// environment.
func TestMCPProxyIsTransparent(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{
		rules:      "[[rule]]\ndecision = \"allow\"\nmcp = \"notes/*\"\n",
		mcpServers: notesServer,
	})
	notes := entryNamed(t, d.setup, "notes")
	script := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`,
		`{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"read_note","arguments":{"name":"a \"quoted\" é"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"env","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"ping"}`,
	}
	stdinLog := filepath.Join(d.root, "stdin.log")
	run := func(cmd *exec.Cmd) ([]string, string, []byte) {
		os.Remove(stdinLog)
		cmd.Env = append(cmd.Env, "MCPSERVER_STDIN_LOG="+stdinLog)
		in, lines, stderr := startRaw(t, cmd)
		var got []string
		for _, msg := range script {
			if _, err := io.WriteString(in, msg+"\n"); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(msg, `"id"`) {
				if !lines.Scan() {
					t.Fatalf("no answer to %s\nstderr:\n%s", msg, stderr.String())
				}
				got = append(got, lines.Text())
			}
		}
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%s: %v\nstderr:\n%s", cmd.Path, err, stderr.String())
		}
		read, err := os.ReadFile(stdinLog)
		if err != nil {
			t.Fatal(err)
		}
		return got, stderr.String(), read
	}
	direct := exec.Command(mcpServerBin, "--flag", "x y")
	direct.Env = notes.command().Env
	directOut, directErr, directIn := run(direct)
	proxiedOut, proxiedErr, proxiedIn := run(notes.command())

	compareLines(t, "client", directOut, proxiedOut)
	if !bytes.Equal(directIn, proxiedIn) {
		t.Errorf("the server read different bytes through the proxy:\ndirect:\n%s\nproxied:\n%s", directIn, proxiedIn)
	}
	if !strings.Contains(directOut[3], `\"args\":[\"--flag\",\"x y\"]`) {
		t.Errorf("the env tool does not report the arguments: %s", directOut[3])
	}
	if directErr != "mcpserver started\n" || proxiedErr != directErr {
		t.Errorf("stderr direct %q, proxied %q: want the server's own line, passed through", directErr, proxiedErr)
	}
}

// TestMCPAnnotations: a trusted server's read-only tool is allowed without a
// prompt, in ACP and through the proxy; an untrusted server's, a
// contradictory or a writing tool is asked; a tool whose annotations change
// loses the relaxation and is asked again, and the audit says why.
func TestMCPAnnotations(t *testing.T) {
	t.Parallel()
	servers := serverList(`{"name":"other","command":"$MCPSERVER","args":[],"env":[]}`)
	d := startDecider(t, deciderOptions{rules: "[mcp.notes]\ntrust_annotations = true\n", mcpServers: servers})
	notes, _ := d.connectThroughAgent(t, entryNamed(t, d.setup, "notes"))
	other, _ := d.connectThroughAgent(t, entryNamed(t, d.setup, "other"))

	readNote := claudeMCPRequest(10, "tc-read", "notes", "read_note", `{"name":"a"}`)
	ok := d.step(t, "before listing, nothing is relaxed", func() {
		d.asked(readNote, `{"jsonrpc":"2.0","id":10,"result":{"outcome":{"outcome":"cancelled"}}}`)
	})
	listTools(t, notes)
	listTools(t, other)
	ok = ok && d.step(t, "trusted read-only tool is allowed without a prompt", func() {
		d.decided(claudeMCPRequest(11, "tc-read-2", "notes", "read_note", `{"name":"a"}`), "allow")
		text, isErr := callTool(t, notes, "read_note", map[string]any{"name": "a"})
		if isErr || text != "note a: hello" {
			t.Fatalf("read_note through the proxy: %q (error %v)", text, isErr)
		}
		rec := waitAudit(t, d.audit, "the call's record", func(r auditRecord) bool { return r.Method == "tools/call" && r.MCP == "notes/read_note" })
		if rec.Decision != "allow" || rec.Source != "default" || !strings.Contains(rec.Reason, "readOnlyHint by its trusted server") {
			t.Errorf("audit: %+v", rec)
		}
	})
	ok = ok && d.step(t, "untrusted server's read-only tool is asked", func() {
		d.asked(claudeMCPRequest(12, "tc-other", "other", "read_note", `{"name":"a"}`), `{"jsonrpc":"2.0","id":12,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`)
	})
	ok = ok && d.step(t, "read-only but destructive is asked", func() {
		d.asked(claudeMCPRequest(13, "tc-search", "notes", "search_notes", `{"query":"q"}`), `{"jsonrpc":"2.0","id":13,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`)
	})
	ok = ok && d.step(t, "pinned on first sight", func() {
		pins := 0
		for _, r := range readAudit(t, d.audit) {
			if r.Decision == "pinned" {
				pins++
			}
		}
		if pins != 12 { // six tools on each of two servers
			t.Errorf("%d tools pinned, want 12", pins)
		}
	})
	if !ok {
		return
	}
	// upgrade is not read-only and the agent did not ask: the broker asks.
	done := make(chan string, 1)
	go func() {
		text, _ := callTool(t, notes, "upgrade", nil)
		done <- text
	}()
	d.answerOwnPrompt(t, "notes/upgrade", "allow_once")
	if text := <-done; text != "upgraded" {
		t.Fatalf("upgrade: %q", text)
	}
	// The server says its tools changed: until it lists them again, what
	// they are is unknown, and nothing of it is relaxed.
	stale := waitAudit(t, d.audit, "the list_changed", func(r auditRecord) bool { return r.Decision == "stale" })
	if stale.MCP != "notes" || stale.Method != "notifications/tools/list_changed" {
		t.Errorf("audit: %+v", stale)
	}
	d.step(t, "not relaxed between list_changed and the next listing", func() {
		d.liveOnly("only the running broker knows the server's tools are unknown since its list_changed")
		d.asked(claudeMCPRequest(16, "tc-read-5", "notes", "read_note", `{"name":"a"}`), `{"jsonrpc":"2.0","id":16,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`)
	})
	tools := listTools(t, notes)
	if tools["read_note"].Annotations.ReadOnlyHint {
		t.Fatal("test bug: the server did not change read_note")
	}
	changed := waitAudit(t, d.audit, "the change", func(r auditRecord) bool { return r.Decision == "changed" && r.MCP == "notes/read_note" })
	for _, s := range []string{"readOnlyHint true → false", "destructiveHint unset → true", "description changed"} {
		if !strings.Contains(changed.Reason, s) {
			t.Errorf("the change's audit reason %q does not say %q", changed.Reason, s)
		}
	}
	d.step(t, "changed tool is asked again", func() {
		d.asked(claudeMCPRequest(14, "tc-read-3", "notes", "read_note", `{"name":"a"}`), `{"jsonrpc":"2.0","id":14,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`)
	})
	d.step(t, "mcp tools shows the change", func() {
		out := d.cli(t, "mcp", "tools", "--config", d.config)
		for _, s := range []string{"notes", "read_note", "changed: ", "asked (changed since pinned)", "trusted", "untrusted", "asked (annotations not trusted)"} {
			if !strings.Contains(out, s) {
				t.Errorf("mcp tools output lacks %q:\n%s", s, out)
			}
		}
		out = d.cli(t, "rules", "explain", "--config", d.config, "--cwd", d.cwd, "--mcp", "notes/read_note")
		if !strings.Contains(out, "changed") {
			t.Errorf("rules explain does not show the change:\n%s", out)
		}
	})
	d.step(t, "mcp accept pins the change", func() {
		if out := d.cli(t, "mcp", "accept", "notes"); out != "Pinned anew: notes/read_note\n" {
			t.Errorf("mcp accept: %q", out)
		}
		out := d.cli(t, "mcp", "tools", "--config", d.config, "--json")
		var rows []struct{ Server, Tool, Pinned, Effect string }
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("mcp tools --json: %v\n%s", err, out)
		}
		for _, r := range rows {
			if r.Server == "notes" && r.Tool == "read_note" && (r.Pinned != "pinned" || r.Effect != "asked (not read-only)") {
				t.Errorf("after accept: %+v", r)
			}
		}
		for session, want := range map[string]int{"sess_1": 12, "sess_other": 0} {
			var rows []json.RawMessage
			if err := json.Unmarshal([]byte(d.cli(t, "mcp", "tools", "--session", session, "--json")), &rows); err != nil {
				t.Fatal(err)
			}
			if len(rows) != want {
				t.Errorf("mcp tools --session %s lists %d tools, want %d", session, len(rows), want)
			}
		}
		// Now pinned as destructive, it stays asked in the running broker.
		d.asked(claudeMCPRequest(15, "tc-read-4", "notes", "read_note", `{"name":"a"}`), `{"jsonrpc":"2.0","id":15,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`)
	})
}

// cli runs an acp-broker subcommand with the decider's state directory.
func (d *decider) cli(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(brokerBin, args...)
	cmd.Env = append(testEnv(), "XDG_STATE_HOME="+d.state)
	cmd.Dir = d.root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("acp-broker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// answerOwnPrompt takes the broker's own prompt for an MCP call, a write or
// a terminal from the editor (a tool_call update, then a
// session/request_permission with an id in the broker's namespace), whose
// title and "always" option show tool, and answers it with optionID.
func (d *decider) answerOwnPrompt(t testing.TB, tool, optionID string) {
	t.Helper()
	update := d.EditorRecv()
	if !strings.Contains(update, `"sessionUpdate":"tool_call"`) || !strings.Contains(update, tool) {
		t.Fatalf("the editor's first line is not the held call's tool_call: %s", clip(update))
	}
	req := d.EditorRecv()
	var m struct {
		ID     string `json:"id"`
		Method string `json:"method"`
		Params struct {
			SessionID string `json:"sessionId"`
			ToolCall  struct {
				Title string `json:"title"`
			} `json:"toolCall"`
			Options []struct{ Kind, Name string } `json:"options"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(req), &m); err != nil {
		t.Fatal(err)
	}
	for _, o := range m.Params.Options {
		// The option says what "always" will remember (issue 11 item 3):
		// the MCP tool, or for a write or terminal its path or command.
		mcpCall := strings.HasPrefix(m.Params.ToolCall.Title, "MCP ")
		if o.Kind == "allow_always" && (mcpCall && o.Name != "Always allow: mcp "+tool || !mcpCall && !strings.HasPrefix(o.Name, "Always allow: ")) {
			t.Errorf("the broker's always option reads %q", o.Name)
		}
	}
	if m.Method != "session/request_permission" || !strings.HasPrefix(m.ID, "acp-broker-") || m.Params.SessionID != "sess_1" || !strings.Contains(m.Params.ToolCall.Title, tool) {
		t.Fatalf("want the broker's own permission request for %s, got %s", tool, clip(req))
	}
	d.EditorSend(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"result":{"outcome":{"outcome":"selected","optionId":%q}}}`, m.ID, optionID))
	final := d.EditorRecv()
	if !strings.Contains(final, `"sessionUpdate":"tool_call_update"`) {
		t.Fatalf("the editor's view of the held call was not closed: %s", clip(final))
	}
}

// TestMCPDeniedCall: a call a rule denies gets an MCP error result naming
// the rule and never reaches the server.
func TestMCPDeniedCall(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{
		rules:      "[[rule]]\nid = \"no-deletes\"\ndecision = \"deny\"\nreason = \"notes are kept\"\nmcp = \"notes/delete_*\"\n",
		mcpServers: notesServer,
	})
	notes, proxy := d.connectThroughAgent(t, entryNamed(t, d.setup, "notes"))
	text, isErr := callTool(t, notes, "delete_notes", nil)
	if !isErr || !strings.Contains(text, "no-deletes") || !strings.Contains(text, "notes are kept") {
		t.Errorf("denied call's result: %q (error %v); want an error naming the rule and its reason", text, isErr)
	}
	// A call after it does reach the server: the log is written.
	d.answerAfter(t, notes, "write_note", map[string]any{"name": "n", "text": "t"}, "allow_once")
	calls := d.serverCalls(t)
	if reached(calls, "delete_notes") || !reached(calls, "write_note") {
		t.Errorf("calls that reached the server: %v; want write_note only", calls)
	}
	rec := waitAudit(t, d.audit, "the denial", func(r auditRecord) bool { return r.MCP == "notes/delete_notes" })
	if rec.Decision != "deny" || rec.RuleID != "no-deletes" || rec.Method != "tools/call" {
		t.Errorf("audit: %+v", rec)
	}
	// The proxy the agent started does not outlive the broker.
	d.Finish()
	waitGone(t, proxy)
}

// answerAfter calls a tool the rules leave open and answers the broker's
// prompt for it.
func (d *decider) answerAfter(t *testing.T, cs *mcpsdk.ClientSession, tool string, args map[string]any, optionID string) (string, bool) {
	t.Helper()
	type result struct {
		text  string
		isErr bool
	}
	done := make(chan result, 1)
	go func() {
		text, isErr := callTool(t, cs, tool, args)
		done <- result{text, isErr}
	}()
	d.answerOwnPrompt(t, "notes/"+tool, optionID)
	r := <-done
	return r.text, r.isErr
}

// TestMCPUnaskedCall: a call the agent never asked about in ACP is asked
// through the editor with the broker's own request, whose answer the agent
// never sees; a call the agent did ask about, and the editor allowed, is not
// asked twice.
func TestMCPUnaskedCall(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{mcpServers: notesServer})
	notes, _ := d.connectThroughAgent(t, entryNamed(t, d.setup, "notes"))
	listTools(t, notes)

	ok := d.step(t, "rejected in the editor", func() {
		text, isErr := d.answerAfter(t, notes, "write_note", map[string]any{"name": "n", "text": "first"}, "reject_once")
		if !isErr || !strings.Contains(text, "rejected") {
			t.Errorf("rejected call's result: %q (error %v)", text, isErr)
		}
		if reached(d.serverCalls(t), "write_note") {
			t.Error("a rejected call reached the server")
		}
	})
	ok = ok && d.step(t, "allowed in the editor", func() {
		text, isErr := d.answerAfter(t, notes, "write_note", map[string]any{"name": "n", "text": "second"}, "allow_once")
		if isErr || text != "wrote note n" {
			t.Errorf("allowed call's result: %q (error %v)", text, isErr)
		}
	})
	ok = ok && d.step(t, "asked in ACP first: not asked again", func() {
		req := claudeMCPRequest(20, "tc-write", "notes", "write_note", `{"name":"n","text":"third"}`)
		d.asked(req, `{"jsonrpc":"2.0","id":20,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`)
		text, isErr := callTool(t, notes, "write_note", map[string]any{"name": "n", "text": "third"})
		if isErr || text != "wrote note n" {
			t.Errorf("call after an ACP allow: %q (error %v)", text, isErr)
		}
		// Had the broker asked, its prompt would be the editor's next line.
		mark := d.marker()
		d.AgentSend(mark)
		d.EditorExpect(mark)
	})
	ok = ok && d.step(t, "rejected in ACP first: refused without asking again", func() {
		req := claudeMCPRequest(21, "tc-write-2", "notes", "write_note", `{"name":"n","text":"no"}`)
		d.asked(req, `{"jsonrpc":"2.0","id":21,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`)
		text, isErr := callTool(t, notes, "write_note", map[string]any{"name": "n", "text": "no"})
		if !isErr || !strings.Contains(text, "rejected when the agent asked") {
			t.Errorf("a call the human just rejected: %q (error %v)", text, isErr)
		}
		mark := d.marker()
		d.AgentSend(mark)
		d.EditorExpect(mark)
	})
	ok = ok && d.step(t, "an ACP allow covers one call with the same arguments", func() {
		text, isErr := d.answerAfter(t, notes, "write_note", map[string]any{"name": "n", "text": "third"}, "reject_once")
		if !isErr {
			t.Errorf("a second call was covered by one ACP allow: %q", text)
		}
	})
	ok = ok && d.step(t, "always allowed in the editor is remembered", func() {
		text, isErr := d.answerAfter(t, notes, "delete_notes", nil, "allow_always")
		if isErr || text != "deleted all notes" {
			t.Fatalf("allowed call's result: %q (error %v)", text, isErr)
		}
		rec := waitAudit(t, d.audit, "the remembered answer", func(r auditRecord) bool { return r.MCP == "notes/delete_notes" && r.OptionKind == "allow_always" })
		if rec.Decision != "allow" {
			t.Errorf("audit: %+v", rec)
		}
		// The next call is the broker's to allow: no prompt.
		if text, isErr := callTool(t, notes, "delete_notes", nil); isErr || text != "deleted all notes" {
			t.Fatalf("second call: %q (error %v)", text, isErr)
		}
		mark := d.marker()
		d.AgentSend(mark)
		d.EditorExpect(mark)
		if out := d.cli(t, "remembered", "list"); !strings.Contains(out, "notes/delete_notes") {
			t.Errorf("remembered list does not show the MCP tool:\n%s", out)
		}
	})
	ok = ok && d.step(t, "cancelled by the agent while asked", func() {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := notes.CallTool(ctx, &mcpsdk.CallToolParams{Name: "write_note", Arguments: map[string]any{"name": "n", "text": "cancelled"}})
			done <- err
		}()
		if update := d.EditorRecv(); !strings.Contains(update, `"sessionUpdate":"tool_call"`) {
			t.Fatalf("want the held call's tool_call, got %s", clip(update))
		}
		req := decode(t, d.EditorRecv())
		cancel() // the SDK sends notifications/cancelled
		if err := <-done; err == nil {
			t.Fatal("the cancelled call returned no error")
		}
		withdrawn := d.EditorRecv()
		if !strings.Contains(withdrawn, `"method":"$/cancel_request"`) || !strings.Contains(withdrawn, string(req.ID)) {
			t.Fatalf("the editor's prompt was not withdrawn: %s", clip(withdrawn))
		}
		if final := d.EditorRecv(); !strings.Contains(final, `"status":"failed"`) {
			t.Fatalf("the editor's view of the held call was not closed as failed: %s", clip(final))
		}
		// A late answer to the withdrawn prompt goes nowhere.
		d.EditorSend(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"allow_once"}}}`, req.ID))
		mark := d.marker()
		d.AgentSend(mark)
		d.EditorExpect(mark)
		for _, c := range d.serverCalls(t) {
			if strings.Contains(c, `"cancelled"`) {
				t.Errorf("a cancelled call reached the server: %s", c)
			}
		}
	})
	if !ok {
		return
	}
	for _, line := range d.transcript().Agent {
		if strings.Contains(line, `"id":"acp-broker-`) {
			t.Errorf("the agent saw the broker's own exchange: %s", clip(line))
		}
	}
	if got := d.serverCalls(t); len(got) != 4 {
		t.Errorf("calls that reached the server: %v; want the two allowed write_note and delete_notes calls", got)
	}
}

// TestMCPForgedReports: the private channel refuses a proxy with a wrong
// token, a second proxy with a token in use, and any process of another
// user, and nothing they send reaches the catalog.
func TestMCPForgedReports(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: "[mcp.notes]\ntrust_annotations = true\n", mcpServers: notesServer})
	d.noisy = true
	notes := entryNamed(t, d.setup, "notes")
	socket, token := notes.proxyFlag(t, "--socket"), notes.proxyFlag(t, "--token")

	// forge says hello with a token, then reports a tool; it returns the
	// hub's answer to the hello.
	forge := func(token string) error {
		conn, err := net.Dial("unix", socket)
		if err != nil {
			return err
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(waitTimeout))
		r := bufio.NewReader(conn)
		fmt.Fprintf(conn, `{"jsonrpc":"2.0","id":1,"method":"hello","params":{"token":%q}}`+"\n", token)
		hello, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		fmt.Fprint(conn, `{"jsonrpc":"2.0","id":2,"method":"tools","params":{"tools":[{"name":"evil","annotations":{"readOnlyHint":true}}]}}`+"\n")
		if tools, err := r.ReadString('\n'); err == nil && !strings.Contains(tools, `"error"`) {
			return fmt.Errorf("report accepted: %s", tools)
		}
		if !strings.Contains(hello, `"error"`) {
			return fmt.Errorf("hello accepted: %s", hello)
		}
		return fmt.Errorf("refused: %s", strings.TrimSpace(hello))
	}
	if err := forge(strings.Repeat("0", 64)); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("a wrong token: %v", err)
	}

	// A proxy with a wrong token never starts its server.
	wrong := notes
	wrong.Args = append([]string(nil), notes.Args...)
	for i := range wrong.Args {
		if wrong.Args[i] == token {
			wrong.Args[i] = strings.Repeat("f", 64)
		}
	}
	out, err := wrong.command().CombinedOutput()
	if err == nil || !strings.Contains(string(out), "refused") || strings.Contains(string(out), "mcpserver started") {
		t.Errorf("proxy with a wrong token: %v\n%s", err, out)
	}

	// With the real proxy connected, its token is taken.
	cs, _ := connect(t, notes)
	listTools(t, cs)
	if err := forge(token); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("a second hello with the token in use: %v", err)
	}

	// Another user, even with the token, cannot reach the socket.
	other := copyBrokerForOtherUsers(t)
	cmd := exec.Command(other, "mcp-proxy", "--socket", socket, "--token", token, "--server", "notes", "--", "/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	cmd.Env = []string{"PATH=/usr/bin:/bin", "GORACE=atexit_sleep_ms=0"}
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "permission denied") {
		t.Errorf("a proxy run by another user: %v\n%s", err, out)
	}

	catalog, err := os.ReadFile(filepath.Join(d.state, "acp-broker", "mcp-tools.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(catalog), "evil") || !strings.Contains(string(catalog), "read_note") {
		t.Errorf("the catalog holds a forged tool or lacks the real ones:\n%s", catalog)
	}
}

// copyBrokerForOtherUsers copies the broker binary where any user may run
// it: the test's own directories are private.
func copyBrokerForOtherUsers(t *testing.T) string {
	t.Helper()
	if os.Getuid() != 0 {
		// The README's Development section says why this step is optional.
		t.Skip("running a process as another user needs root; this step runs in CI, which runs as root")
	}
	dir, err := os.MkdirTemp("", "acpb-other-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Copied by cp, not written here: a process that parallel tests fork
	// while this one holds the new file open for writing inherits that
	// descriptor until it execs, and the copy's own exec then fails with
	// "text file busy" (ETXTBSY).
	path := filepath.Join(dir, "acp-broker")
	if out, err := exec.Command("cp", brokerBin, path).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	if err := os.Chmod(path, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMCPProxyRefusesSmuggledCalls: a call disguised so that the proxy and
// the server might read it differently is never relayed: the server's log
// shows the denied tool never ran.
func TestMCPProxyRefusesSmuggledCalls(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{
		rules:      "[[rule]]\nid = \"no-deletes\"\ndecision = \"deny\"\nmcp = \"notes/delete_notes\"\n[[rule]]\ndecision = \"allow\"\nmcp = \"notes/read_note\"\n",
		mcpServers: notesServer,
	})
	send, recv, stop := rawProxy(t, d)

	for _, c := range []struct{ name, msg string }{
		{"plain", `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"delete_notes","arguments":{}}}`},
		{"escaped method", `{"jsonrpc":"2.0","id":11,"method":"tools\u002fcall","params":{"name":"delete_notes","arguments":{}}}`},
		{"escaped name", `{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"delete\u005fnotes","arguments":{}}}`},
		{"name twice", `{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"read_note","name":"delete_notes","arguments":{}}}`},
		{"name in two cases", `{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"read_note","Name":"delete_notes","arguments":{}}}`},
		{"params twice", `{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"read_note","arguments":{"name":"a"}},"params":{"name":"delete_notes","arguments":{}}}`},
		{"in a batch", `[{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"delete_notes","arguments":{}}}]`},
	} {
		send(c.msg)
		// Every disguise gets an answer that is not the server's: an MCP
		// error result or a JSON-RPC error, never "deleted all notes".
		if !strings.HasPrefix(c.msg, "[") { // a batch has no id to answer
			got := recv()
			if strings.Contains(got, "deleted all notes") || !(strings.Contains(got, `"isError":true`) || strings.Contains(got, `"error"`)) {
				t.Errorf("%s: the agent got %s", c.name, clip(got))
			}
		}
	}
	// A ping answered after them all shows the server has seen everything
	// the proxy relayed.
	send(`{"jsonrpc":"2.0","id":99,"method":"ping"}`)
	for got := recv(); !strings.Contains(got, `"id":99`); got = recv() {
		if strings.Contains(got, "deleted all notes") {
			t.Errorf("a smuggled call ran: %s", got)
		}
	}
	if calls := d.serverCalls(t); reached(calls, "delete_notes") {
		t.Errorf("the denied tool ran: %v", calls)
	}
	// The proxy's stderr is copied as it is written: only once it has
	// exited is all of it in.
	if stderr := stop(); !strings.Contains(stderr, "not JSON-RPC; not relayed") {
		t.Errorf("no warning for the message the proxy could not read:\n%s", stderr)
	}
}

// TestMCPAskGoesWhereTheRouteSays: a call the broker asks about on its own
// goes where [ask] route sends asks: with route "channels" a channel answers
// it and the editor gets no request, only the held call shown and closed;
// [ask] timeout rejects a call nobody answers.
func TestMCPAskGoesWhereTheRouteSays(t *testing.T) {
	t.Parallel()
	t.Run("channels", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		script := execChannel(t, dir, `echo '{"decision":"allow_once"}'`)
		d := startDecider(t, deciderOptions{rules: channelCfg("channels", "", script), mcpServers: notesServer})
		notes, _ := connect(t, entryNamed(t, d.setup, "notes"))
		text, isErr := callTool(t, notes, "write_note", map[string]any{"name": "n", "text": "t"})
		if isErr || text != "wrote note n" {
			t.Fatalf("call allowed on the channel: %q (error %v)", text, isErr)
		}
		var prompt struct {
			MCP     string
			Session string
			Options []struct{ ID, Kind string }
		}
		if err := json.Unmarshal([]byte(waitFile(t, filepath.Join(dir, "prompt.json"))), &prompt); err != nil {
			t.Fatal(err)
		}
		if prompt.MCP != "notes/write_note" || prompt.Session != "sess_1" || len(prompt.Options) != 3 {
			t.Errorf("the channel's prompt: %+v", prompt)
		}
		for _, want := range []string{`"sessionUpdate":"tool_call"`, `"status":"completed"`} {
			if got := d.EditorRecv(); !strings.Contains(got, want) {
				t.Errorf("editor got %s, want the held call's %s", clip(got), want)
			}
		}
		mark := d.marker()
		d.AgentSend(mark)
		d.EditorExpect(mark) // and no request of the broker's own
		rec := waitAudit(t, d.audit, "the channel's answer", func(r auditRecord) bool { return r.MCP == "notes/write_note" })
		if rec.Decision != "allow" || rec.Source != "channel" || rec.Method != "tools/call" {
			t.Errorf("audit: %+v", rec)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		d := startDecider(t, deciderOptions{rules: "[ask]\ntimeout = \"300ms\"\n", mcpServers: notesServer})
		notes, _ := connect(t, entryNamed(t, d.setup, "notes"))
		text, isErr := callTool(t, notes, "write_note", map[string]any{"name": "n", "text": "t"})
		if !isErr || !strings.Contains(text, "not allowed") {
			t.Errorf("an unanswered call: %q (error %v)", text, isErr)
		}
		if reached(d.serverCalls(t), "write_note") {
			t.Error("an unanswered call reached the server")
		}
		d.EditorRecv() // the held call shown
		req := decode(t, d.EditorRecv())
		d.EditorTold("denied")
		if withdrawn := d.EditorRecv(); !strings.Contains(withdrawn, `"$/cancel_request"`) || !strings.Contains(withdrawn, string(req.ID)) {
			t.Errorf("the editor's prompt was not withdrawn: %s", clip(withdrawn))
		}
		rec := waitAudit(t, d.audit, "the timeout", func(r auditRecord) bool { return r.MCP == "notes/write_note" })
		if rec.Decision != "deny" || rec.Source != "timeout" {
			t.Errorf("audit: %+v", rec)
		}
	})
}

// TestMCPAmbiguousSetUpIsRefused: a set-up whose servers an agent could read
// otherwise than the broker is answered with an error and never reaches the
// agent, which would have started a server nobody governs.
func TestMCPAmbiguousSetUpIsRefused(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{})
	d.noisy = true
	req := `{"jsonrpc":"2.0","id":"new-2","method":"session/new","params":{"cwd":"/tmp","mcpServers":[{"name":"fs","Type":"http","command":"/usr/bin/evil","args":[],"env":[]}]}}`
	d.EditorSend(req)
	msg := expectError(t, d.EditorRecv(), `"new-2"`, -32602)
	if !strings.Contains(msg, `"Type"`) {
		t.Errorf("the error does not name the member: %q", msg)
	}
	// Had the request been relayed, it would be the agent's next line.
	d.EditorToAgent(`{"jsonrpc":"2.0","method":"_test/after"}`)
}
