package demo

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"
)

// TestRunDirect plays the demo's conversation with no broker, the baseline
// that cmd/acp-broker's tests compare the broker against, and checks that it
// goes as scripted and is the same on every run.
func TestRunDirect(t *testing.T) {
	ws := t.TempDir()
	run := func() (*Result, string) {
		t.Helper()
		resetDir(t, ws)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var stdout, stderr bytes.Buffer
		res, err := Run(ctx, Options{Direct: true, Workspace: ws, Stdout: &stdout, Stderr: &stderr})
		if err != nil {
			t.Fatalf("Run: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
		}
		if stderr.Len() != 0 {
			t.Errorf("stderr: %s", &stderr)
		}
		return res, stdout.String()
	}
	first, out := run()

	for _, want := range []string{
		"\neditor → agent   initialize ",
		"\nagent → editor   ↳ session/new                 sessionId \"sess_1\"\n",
		"\nagent → editor   session/request_permission    call_1 execute \"git status\"; ",
		"\neditor → agent   ↳ session/request_permission  selected \"allow-once\" (allow_once)\n",
		"\nagent → editor   session/request_permission    call_2 edit \"Write status.txt\"; ",
		"\nagent → editor   session/request_permission    call_3 execute \"git push --force origin main\"; ",
		"\nagent → editor   session/update                agent_message_chunk \"The force push was refused, so I did not push. \"\n",
		"\nagent → editor   session/request_permission    call_4 execute \"npm test -- --watch=false\"; ",
		"\neditor → agent   ↳ session/request_permission  selected \"allow-always\" (allow_always)\n",
		"\nagent → editor   session/request_permission    call_5 execute \"npm test -- --coverage\"; ",
		"\nagent → editor   session/request_permission    call_6 edit \"Edit NOTES.md\"; ",
		"\nagent → editor   ↳ session/prompt              stopReason end_turn\n",
		"\n    git status (execute): allow_once, chosen by the editor\n",
		"\n    Write status.txt (edit): allow_once, chosen by the editor\n",
		"\n    git push --force origin main (execute): reject_once, chosen by the editor\n",
		"\n    npm test -- --watch=false (execute): allow_always, chosen by the editor\n",
		"\n    npm test -- --coverage (execute): allow_once, chosen by the editor\n",
		"\n    Edit NOTES.md (edit): reject_once, chosen by the editor\n",
		"\n  In the workspace, status.txt was written; NOTES.md is unchanged because its edit was rejected.\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\neditor → agent   ↳ session/request_permission  selected \"reject\" (reject_once)\n"); n != 2 {
		t.Errorf("the editor rejected %d requests, want 2:\n%s", n, out)
	}
	if n := strings.Count(out, "\neditor → agent   ↳ session/request_permission  selected \"allow-once\" (allow_once)\n"); n != 3 {
		t.Errorf("the editor allowed %d requests once, want 3 (git status, the write of status.txt and the second npm test):\n%s", n, out)
	}
	for _, unwanted := range []string{"broker exited", "broker decided", "→ broker", "broker →", "<tmp>", " — "} {
		if strings.Contains(out, unwanted) {
			t.Errorf("a direct run shows %q:\n%s", unwanted, out)
		}
	}
	if got := first.Stats.Total(); got != len(first.Entries) {
		t.Errorf("stats count %d messages, entries hold %d", got, len(first.Entries))
	}
	if !reflect.DeepEqual(first.Entries, first.Editor) || first.Audit != nil {
		t.Errorf("a direct run's transcript is not what the editor saw, or it has an audit log")
	}

	second, _ := run()
	if !reflect.DeepEqual(first.Entries, second.Entries) {
		t.Errorf("two runs differ:\n%s\n---\n%s", rawLines(first.Entries), rawLines(second.Entries))
	}
}

// TestAgentWithoutFsCapabilities checks that the example agent sends no fs
// request to an editor that did not advertise the capability, and still asks
// about all five tool calls.
func TestAgentWithoutFsCapabilities(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ws := t.TempDir()
	c := connectAgent(t, newScriptedEditor(ws))

	if _, err := c.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	sess, err := c.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: ws, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("go")}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StopReason != acp.StopReasonEndTurn {
		t.Errorf("stop reason %q, want end_turn", resp.StopReason)
	}
	out := c.transcript()
	if strings.Contains(out, "fs/") {
		t.Errorf("fs request to an editor without the capability:\n%s", out)
	}
	if n := strings.Count(out, "  session/request_permission  "); n != 5 {
		t.Errorf("%d permission requests, want 5:\n%s", n, out)
	}
	if entries, _ := os.ReadDir(ws); len(entries) != 0 {
		t.Errorf("the workspace is not empty: %v", entries)
	}
}

// cancellingEditor holds the permission request until the test has sent
// session/cancel, then answers it with the cancelled outcome, as ACP requires.
type cancellingEditor struct {
	*scriptedEditor
	asked     chan struct{}
	cancelled chan struct{}
}

func (e *cancellingEditor) RequestPermission(ctx context.Context, _ acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	close(e.asked)
	select {
	case <-e.cancelled:
	case <-ctx.Done():
	}
	return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil
}

// TestAgentCancel checks that session/cancel during a permission request ends
// the turn with stopReason cancelled.
func TestAgentCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ws := t.TempDir()
	editor := &cancellingEditor{scriptedEditor: newScriptedEditor(ws), asked: make(chan struct{}), cancelled: make(chan struct{})}
	c := connectAgent(t, editor)

	if _, err := c.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	sess, err := c.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: ws, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		resp acp.PromptResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := c.conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("go")}})
		done <- result{resp, err}
	}()
	select {
	case <-editor.asked:
	case <-ctx.Done():
		t.Fatal("the agent never asked for permission")
	}
	if err := c.conn.Cancel(ctx, acp.CancelNotification{SessionId: sess.SessionId}); err != nil {
		t.Fatal(err)
	}
	close(editor.cancelled)
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.resp.StopReason != acp.StopReasonCancelled {
			t.Errorf("stop reason %q, want cancelled", r.resp.StopReason)
		}
	case <-ctx.Done():
		t.Fatal("the turn did not end after session/cancel")
	}
}

// agentConn is an editor's connection to an in-process example agent, with
// every message recorded.
type agentConn struct {
	conn *acp.ClientSideConnection
	rec  *recorder
}

func (c *agentConn) transcript() string {
	var b strings.Builder
	transcribe(&b, style{}, c.rec.all())
	return b.String()
}

func connectAgent(t *testing.T, client acp.Client) *agentConn {
	t.Helper()
	agentStdin, editorWrites := io.Pipe()
	editorReads, agentStdout := io.Pipe()
	var stderr bytes.Buffer
	agentDone := make(chan error, 1)
	go func() {
		// Not ctx: the agent must stop because its stdin closes.
		err := RunAgent(context.Background(), agentStdin, agentStdout, &lockedWriter{w: &stderr})
		agentStdout.Close()
		agentDone <- err
	}()
	rec := &recorder{}
	conn := acp.NewClientSideConnection(client,
		io.MultiWriter(rec.tap(Editor, Agent), editorWrites),
		io.TeeReader(editorReads, rec.tap(Agent, Editor)))
	conn.SetLogger(quietLogger(io.Discard))
	t.Cleanup(func() {
		editorWrites.Close()
		select {
		case err := <-agentDone:
			if err != nil {
				t.Errorf("RunAgent: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("the agent did not stop when its stdin closed")
		}
		if stderr.Len() != 0 {
			t.Errorf("agent stderr: %s", &stderr)
		}
	})
	return &agentConn{conn: conn, rec: rec}
}

func resetDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

func rawLines(entries []Entry) string {
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(string(e.From) + " → " + string(e.To) + " " + string(e.Raw) + "\n")
	}
	return b.String()
}

// fakeBroker writes an executable shell script to stand in for acp-broker.
func fakeBroker(t *testing.T, script string) string {
	t.Helper()
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("needs /bin/sh")
	}
	path := filepath.Join(t.TempDir(), "fake-broker")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRunBrokerFails checks that a broker that dies is reported by its exit
// status, with its own stderr passed through, rather than only as the
// editor's "peer disconnected".
func TestRunBrokerFails(t *testing.T) {
	self := fakeBroker(t, `echo "fake broker: cannot start" >&2; exit 3`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	_, err := Run(ctx, Options{Self: self, Stdout: &stdout, Stderr: &stderr})
	if err == nil || !strings.HasPrefix(err.Error(), "the broker exited with status 3") {
		t.Errorf("Run: %v, want the broker's exit status 3", err)
	}
	if got := stderr.String(); got != "fake broker: cannot start\n" {
		t.Errorf("stderr %q, want the broker's own message", got)
	}
	if strings.Contains(stdout.String(), "Summary") {
		t.Errorf("a failed run printed a summary:\n%s", &stdout)
	}
}

// TestRunTimeout checks that a broker that never answers cannot hang the
// demo: Run gives up at its deadline and stops the broker.
func TestRunTimeout(t *testing.T) {
	self := fakeBroker(t, `exec sleep 60`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := Run(ctx, Options{Self: self, Timeout: 500 * time.Millisecond})
	if err == nil || err.Error() != "the demo did not finish within 500ms" {
		t.Errorf("Run: %v, want the deadline", err)
	}
	if ctx.Err() != nil {
		t.Errorf("Run returned only after the test's own deadline")
	}
}

// TestFitLine: a summary line wider than the terminal is wrapped to it at
// spaces, the lines after its first two spaces deeper; colour escapes take
// no room and stay, and a word wider than the terminal is cut to fit.
func TestFitLine(t *testing.T) {
	const width = 30
	line := "    Write status.txt (edit): \x1b[32mallow_once\x1b[0m, chosen by me at /home/me/project/a/very/deep/directory/status.txt"
	want := "    Write status.txt (edit):\n" +
		"      \x1b[32mallow_once\x1b[0m, chosen by me\n" + // 30 columns: the escapes take none
		"      at\n" +
		"      /home/me/project/a/very…"
	if got := fitLine(line, width); got != want {
		t.Errorf("fitLine(%q, %d) =\n%s\nwant\n%s", line, width, got, want)
	}
	for _, l := range strings.Split(want, "\n") {
		if n := utf8.RuneCountInString(stripANSI(l)); n > width {
			t.Fatalf("the test is wrong: %q has %d columns", l, n)
		}
	}
	if short := "  2 requests, \x1b[32mallow_once\x1b[0m"; fitLine(short, width) != short {
		t.Errorf("fitLine(%q, %d) = %q: a line that fits is changed", short, width, fitLine(short, width))
	}
}
