//go:build linux

package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// The tests in this file attack how answers reach the agent: every
// permission request gets exactly one answer, from someone entitled to give
// it, whatever races the editor, the broker's channels, the local socket,
// timeouts and session/cancel run.

// runtimeEnv is the environment under which `acp-broker pending|answer`
// finds the sockets of the broker channelBroker started in dir.
func runtimeEnv(dir string) []string {
	return append(testEnv(), "XDG_RUNTIME_DIR="+filepath.Join(dir, "run"))
}

// localPromptID waits until `acp-broker pending`, run by the test, lists a
// request whose line contains match, and returns its id.
func localPromptID(t *testing.T, dir, match string) string {
	t.Helper()
	id, _ := pendingListed(t, dir, match, func(line string) (string, bool) {
		if f := strings.Fields(line); len(f) > 0 && strings.Contains(line, match) {
			return f[0], true
		}
		return "", false
	})
	return id
}

// pendingListed runs `acp-broker pending` as the test until pick finds an
// id on one of its lines after the header, and returns the id and the
// whole listing; what names what it waits for, if it never comes.
func pendingListed(t *testing.T, dir, what string, pick func(line string) (string, bool)) (string, string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var last []byte
	for time.Now().Before(deadline) {
		cmd := exec.Command(brokerBin, "pending")
		cmd.Env = runtimeEnv(dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("pending: %v\n%s", err, out)
		}
		for _, line := range strings.Split(string(out), "\n")[1:] {
			if id, ok := pick(line); ok {
				return id, string(out)
			}
		}
		last = out
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("acp-broker pending never listed %q; last:\n%s", what, last)
	return "", ""
}

// localAnswer runs `acp-broker answer id decision` as the test, a process
// that is not the agent's.
func localAnswer(t *testing.T, dir, id, decision string) (string, error) {
	t.Helper()
	cmd := exec.Command(brokerBin, "answer", id, decision)
	cmd.Env = runtimeEnv(dir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// waitAuditLine waits for an audit line (of channelBroker's dir) containing
// every one of want, and returns it.
func waitAuditLine(t *testing.T, dir string, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		data, _ := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
		for _, line := range strings.Split(string(data), "\n") {
			ok := line != ""
			for _, w := range want {
				ok = ok && strings.Contains(line, w)
			}
			if ok {
				return line
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	t.Fatalf("no audit line with %q:\n%s", want, data)
	return ""
}

// stallAgent makes whatever the broker writes to the agent next wait: the
// agent stops reading its stdin, then sends a request with an id of 1 MiB
// in the broker's namespace, which the broker refuses with an error that
// repeats the id, and the test waits until that write has filled the pipe.
// The broker's writer is then busy until resume, which lets the agent read
// again and takes the refusal.
func stallAgent(t *testing.T, s *session) (resume func()) {
	t.Helper()
	id := "acp-broker-" + strings.Repeat("x", 1<<20)
	s.control(command('H', ""))
	s.AgentSend(`{"jsonrpc":"2.0","id":"` + id + `","method":"_test/stall"}`)
	fd, err := syscall.Open(fmt.Sprintf("/proc/%d/fd/0", s.ready.Pid), syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatalf("opening the agent's stdin: %v", err)
	}
	defer syscall.Close(fd)
	deadline := time.Now().Add(waitTimeout)
	for {
		var n int32
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); errno != 0 {
			t.Fatalf("FIONREAD on the agent's stdin: %v", errno)
		}
		if n >= 60000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent's stdin holds only %d bytes", n)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return func() {
		t.Helper()
		s.control(command('U', ""))
		if got := s.AgentRecv(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":"acp-broker-xxx`) || !strings.Contains(got, `"error"`) {
			t.Fatalf("agent got %s, want the refusal of its stalling request", clip(got))
		}
	}
}

// agentRuns makes the fake agent run argv as its child and returns the
// exit status once it has exited.
func agentRuns(t *testing.T, s *session, argv ...string) int {
	t.Helper()
	spec, _ := json.Marshal(map[string]any{"argv": argv})
	s.control(command('C', string(spec)))
	status, err := strconv.Atoi(string(s.waitEvent('C')[1:]))
	if err != nil {
		t.Fatal(err)
	}
	return status
}

const (
	rejectOnce  = `{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`
	allowAlways = `{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"selected","optionId":"allow-always"}}}`
	cancelled2  = `{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"cancelled"}}}`
	marker      = `{"jsonrpc":"2.0","method":"_test/marker"}`
	sessCancel  = `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`
)

// noMoreForTheAgent requires that nothing else reached the agent: the next
// line it reads is a marker the editor sends now.
func noMoreForTheAgent(t *testing.T, s *session) {
	t.Helper()
	s.EditorSend(marker)
	if got := s.AgentRecv(); got != marker {
		t.Fatalf("the agent got a second answer: %s", clip(got))
	}
}

// TestAgentCannotAnswer: `acp-broker answer ID always` run by the
// agent itself (a child, a grandchild whose parent exited, one in a session
// of its own) is refused, the prompt stays open, the refusal is in the audit
// line, and `acp-broker pending` from the agent's tree lists nothing.
func TestAgentCannotAnswer(t *testing.T) {
	s, dir := channelBroker(t, "")
	s.AgentToEditor(testPermission(2, "make build"))
	id := localPromptID(t, dir, "make build")
	out := t.TempDir()

	// A hostile agent needs no listing: it knows its request's bytes, so
	// their digest, and guesses the prompt's id.
	sum := sha256.Sum256([]byte(testPermission(2, "make build")))
	raw, _ := json.Marshal(map[string]string{
		"socket": filepath.Join(dir, "run", "acp-broker", strconv.Itoa(s.cmd.Process.Pid)+".sock"),
		"id":     id, "digest": hex.EncodeToString(sum[:]), "optionId": "allow-always",
	})
	attempts := []struct{ name, script string }{
		{"bare_answer", `exec "$3" -local-answer '` + string(raw) + `'`},
		{"child", `exec "$0" answer "$1" always`},
		{"child_allow_once", `exec "$0" answer "$1" allow`},
		// The subshell outlives its parent, so the broker (the agent's
		// child subreaper) adopts it; it answers once its parent ($$ in
		// a subshell) is gone.
		{"orphaned_grandchild", `( while kill -0 $$ 2>/dev/null; do sleep 0.01; done; "$0" answer "$1" always > "$2/orphan.out" 2>&1; echo $? > "$2/orphan.rc" ) & exit 0`},
		{"own_session", `exec setsid "$0" answer "$1" always`},
		{"pending", `exec "$0" pending`},
	}
	for _, a := range attempts {
		t.Run(a.name, func(t *testing.T) {
			s.t = t
			status := agentRuns(t, s, "sh", "-c", a.script+` > "$2/`+a.name+`.out" 2>&1`, brokerBin, id, out, fakeAgentBin)
			text, rc := "", status
			if a.name == "orphaned_grandchild" {
				rc, _ = strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(out, "orphan.rc"))))
				text = waitFile(t, filepath.Join(out, "orphan.out"))
			} else {
				b, _ := os.ReadFile(filepath.Join(out, a.name+".out"))
				text = string(b)
			}
			if rc == 0 || !strings.Contains(text, "runs under this broker") {
				t.Fatalf("the agent's %s: status %d, output:\n%s", a.name, rc, text)
			}
			// The prompt is still pending, for the human.
			if again := localPromptID(t, dir, "make build"); again != id {
				t.Fatalf("pending lists %s, want %s", again, id)
			}
		})
	}
	s.t = t
	// The human answers in the editor: exactly that answer reaches the agent.
	s.EditorToAgent(rejectOnce)
	noMoreForTheAgent(t, s)
	s.Finish()
	line := waitAuditLine(t, dir, `"refused"`)
	if !strings.Contains(line, `"source":"editor"`) || !strings.Contains(line, "local: pid ") || !strings.Contains(line, "runs under this broker") {
		t.Errorf("audit line = %s", line)
	}
}

// TestCancelWithdrawsLocal: after session/cancel, the local
// socket cannot answer the session's prompts, and an editor that answers
// allow after the cancel is not believed: the agent gets one answer,
// cancelled.
func TestCancelWithdrawsLocal(t *testing.T) {
	t.Run("local", func(t *testing.T) {
		s, dir := channelBroker(t, "")
		s.AgentToEditor(testPermission(2, "make build"))
		id := localPromptID(t, dir, "make build")
		s.EditorToAgent(sessCancel)
		s.AgentExpect(cancelled2)
		out, err := localAnswer(t, dir, id, "allow")
		if err == nil {
			t.Fatalf("an answer after session/cancel was accepted: %s", out)
		}
		s.EditorSend(cancelled2) // the editor's own, as ACP requires: dropped
		noMoreForTheAgent(t, s)
		s.Finish()
		waitAuditLine(t, dir, `"decision":"cancelled"`, `"source":"cancel"`)
	})
	t.Run("editor_allows", func(t *testing.T) {
		s, _ := channelBroker(t, "")
		s.AgentToEditor(testPermission(2, "make build"))
		s.EditorToAgent(sessCancel)
		s.AgentExpect(cancelled2)
		s.EditorSend(allowOnce)
		noMoreForTheAgent(t, s)
		s.Finish()
	})
	t.Run("channel_racing", func(t *testing.T) {
		// A channel that answers allow at once, and a cancel: an allow
		// that won before the cancel was read is the one answer; after it,
		// only cancelled.
		for i := range 10 {
			script := execChannel(t, t.TempDir(), `echo '{"decision":"allow_once"}'`)
			s, _ := channelBroker(t, channelCfg("both", "", script))
			s.AgentToEditor(testPermission(2, "make build"))
			s.EditorSend(sessCancel)
			first, second := s.AgentRecv(), s.AgentRecv()
			if !(first == sessCancel && second == cancelled2) && !(first == allowOnce && second == sessCancel) {
				t.Fatalf("try %d: agent got %s then %s", i, first, second)
			}
			s.EditorSend(cancelled2)
			noMoreForTheAgent(t, s)
			s.Finish()
		}
	})
	t.Run("two_sessions", func(t *testing.T) {
		// Cancelling one session leaves the other's prompt to its answer.
		s, _ := channelBroker(t, "")
		s.EditorToAgent(`{"jsonrpc":"2.0","id":9,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
		s.AgentToEditor(`{"jsonrpc":"2.0","id":9,"result":{"sessionId":"s2"}}`)
		other := strings.Replace(testPermission(3, "make test"), `"sessionId":"s1"`, `"sessionId":"s2"`, 1)
		s.AgentToEditor(testPermission(2, "make build"), other)
		s.EditorToAgent(sessCancel)
		s.AgentExpect(cancelled2)
		s.EditorToAgent(`{"jsonrpc":"2.0","id":3,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}`)
		noMoreForTheAgent(t, s)
		s.Finish()
	})
}

// TestOneAnswer: the broker answers a
// request it forwarded (local socket, timeout) while its write to the agent
// is held up; an editor answer arriving in that moment is dropped, never
// relayed as a second answer. The editor answering twice is the same.
func TestOneAnswer(t *testing.T) {
	withdrawal := `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":2}}`
	t.Run("local", func(t *testing.T) {
		s, dir := channelBroker(t, "")
		s.AgentToEditor(testPermission(2, "make build"))
		id := localPromptID(t, dir, "make build")
		resume := stallAgent(t, s)
		if out, err := localAnswer(t, dir, id, "reject"); err != nil {
			t.Fatalf("answer: %v\n%s", err, out)
		}
		waitAuditLine(t, dir, `"channel":"local"`) // the call has ended
		s.EditorSend(allowOnce)
		resume()
		s.AgentExpect(rejectOnce)
		s.EditorExpect(withdrawal)
		noMoreForTheAgent(t, s)
		s.Finish()
	})
	t.Run("channel", func(t *testing.T) {
		chdir := t.TempDir()
		gate := filepath.Join(chdir, "go")
		script := execChannel(t, chdir, `while [ ! -f `+gate+` ]; do sleep 0.01; done; echo '{"decision":"reject_once"}'`)
		s, dir := channelBroker(t, channelCfg("both", "", script))
		s.AgentToEditor(testPermission(2, "make build"))
		resume := stallAgent(t, s)
		if err := os.WriteFile(gate, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		waitAuditLine(t, dir, `"channel":"script"`)
		s.EditorSend(allowOnce)
		resume()
		s.AgentExpect(rejectOnce)
		s.EditorExpect(withdrawal)
		noMoreForTheAgent(t, s)
		s.Finish()
	})
	t.Run("timeout", func(t *testing.T) {
		// The timeout must come after the stall: a stall that took longer
		// (a busy machine) tries again with a longer timeout.
		var s *session
		var dir string
		var resume func()
		for timeout := 2 * time.Second; ; timeout *= 2 {
			if timeout > waitTimeout {
				t.Fatal("stalling the agent took longer than any timeout tried")
			}
			s, dir = channelBroker(t, fmt.Sprintf("[ask]\ntimeout = %q\n", timeout))
			start := time.Now() // before the broker starts the request's clock
			s.AgentToEditor(testPermission(2, "make build"))
			resume = stallAgent(t, s)
			if time.Since(start) < timeout {
				break
			}
		}
		waitAuditLine(t, dir, `"source":"timeout"`)
		s.EditorSend(allowOnce)
		resume()
		s.AgentExpect(rejectOnce)
		s.EditorTold("denied")
		s.EditorExpect(withdrawal)
		noMoreForTheAgent(t, s)
		s.Finish()
	})
	t.Run("cancel", func(t *testing.T) {
		s, _ := channelBroker(t, "")
		s.AgentToEditor(testPermission(2, "make build"))
		resume := stallAgent(t, s)
		s.EditorSend(sessCancel, allowOnce)
		resume()
		s.AgentExpect(sessCancel)
		s.AgentExpect(cancelled2)
		noMoreForTheAgent(t, s)
		s.Finish()
	})
	t.Run("editor_twice", func(t *testing.T) {
		s, _ := channelBroker(t, "")
		s.AgentToEditor(testPermission(2, "make build"))
		s.EditorToAgent(rejectOnce)
		s.EditorSend(allowOnce)
		noMoreForTheAgent(t, s)
		s.Finish()
	})
}

// TestReusedID: after the broker answered and withdrew a prompt
// the editor never answered, the agent reuses its id for a new request. The
// editor gets the new request under a fresh id of the broker's, its answer
// reaches the agent under the agent's id, and a late answer to the old
// prompt is never taken for the new request's.
func TestReusedID(t *testing.T) {
	withdrawal := `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":2}}`
	// reuse answers the first request 2 on the local socket and sends the
	// second; it returns the id the editor got the second under.
	reuse := func(t *testing.T, s *session, dir string) string {
		t.Helper()
		s.AgentToEditor(testPermission(2, "make build"))
		if out, err := localAnswer(t, dir, localPromptID(t, dir, "make build"), "reject"); err != nil {
			t.Fatalf("answer: %v\n%s", err, out)
		}
		s.AgentExpect(rejectOnce)
		s.EditorExpect(withdrawal)
		second := testPermission(2, "make test")
		s.AgentSend(second)
		got := decode(t, s.EditorRecv())
		if !strings.HasPrefix(string(got.ID), `"acp-broker-`) || got.Method != "session/request_permission" {
			t.Fatalf("the editor got the reused id as %s (%s)", got.ID, got.Method)
		}
		return string(got.ID)
	}
	answerTo := func(id, option string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"result":{"outcome":{"outcome":"selected","optionId":"` + option + `"}}}`
	}
	t.Run("answered", func(t *testing.T) {
		s, dir := channelBroker(t, "")
		alias := reuse(t, s, dir)
		s.EditorSend(answerTo(alias, "allow-always"))
		s.AgentExpect(strings.Replace(allowAlways, "allow-always", "allow-once", 1))
		noMoreForTheAgent(t, s)
		s.Finish()
	})
	t.Run("stale", func(t *testing.T) {
		s, dir := channelBroker(t, "")
		alias := reuse(t, s, dir)
		s.EditorSend(allowOnce) // the old prompt's, late: id 2
		s.EditorSend(answerTo(alias, "reject"))
		s.AgentExpect(rejectOnce)
		noMoreForTheAgent(t, s)
		s.Finish()
	})
	t.Run("agent_cancels", func(t *testing.T) {
		s, dir := channelBroker(t, "")
		alias := reuse(t, s, dir)
		s.AgentSend(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":2}}`)
		s.EditorExpect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":` + alias + `}}`)
		s.EditorSend(`{"jsonrpc":"2.0","id":` + alias + `,"error":{"code":-32800,"message":"cancelled"}}`)
		s.AgentExpect(`{"jsonrpc":"2.0","id":2,"error":{"code":-32800,"message":"cancelled"}}`)
		noMoreForTheAgent(t, s)
		s.Finish()
	})
	t.Run("editor_had_answered", func(t *testing.T) {
		s, dir := channelBroker(t, "")
		s.AgentToEditor(testPermission(2, "make build"))
		if out, err := localAnswer(t, dir, localPromptID(t, dir, "make build"), "reject"); err != nil {
			t.Fatalf("answer: %v\n%s", err, out)
		}
		s.AgentExpect(rejectOnce)
		s.EditorExpect(withdrawal)
		s.EditorSend(cancelled2) // the editor answers the withdrawn prompt
		s.EditorToAgent(marker)  // which the broker has read
		s.AgentToEditor(testPermission(2, "make test"))
		s.EditorToAgent(allowOnce)
		noMoreForTheAgent(t, s)
		s.Finish()
	})
}

// TestCancelEndsHeldMCPCall: an MCP call the broker asks about on its own is
// part of the session's turn: after session/cancel, an editor that still
// answers the broker's prompt "allow" does not let the call through.
func TestCancelEndsHeldMCPCall(t *testing.T) {
	d := startDecider(t, deciderOptions{mcpServers: notesServer})
	notes, _ := d.connectThroughAgent(t, entryNamed(t, d.setup, "notes"))
	listTools(t, notes)
	type result struct {
		text  string
		isErr bool
	}
	done := make(chan result, 1)
	go func() {
		text, isErr := callTool(t, notes, "write_note", map[string]any{"name": "n", "text": "after cancel"})
		done <- result{text, isErr}
	}()
	if update := d.EditorRecv(); !strings.Contains(update, `"sessionUpdate":"tool_call"`) {
		t.Fatalf("want the held call's tool_call, got %s", clip(update))
	}
	req := decode(t, d.EditorRecv())
	if !strings.HasPrefix(string(req.ID), `"acp-broker-`) {
		t.Fatalf("want the broker's own prompt, got %s", req.ID)
	}
	d.EditorToAgent(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess_1"}}`)
	d.EditorSend(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"allow_once"}}}`, req.ID))
	r := <-done
	if !r.isErr || !strings.Contains(r.text, "not allowed") {
		t.Errorf("a call answered allow after session/cancel: %q (error %v)", r.text, r.isErr)
	}
	if reached(d.serverCalls(t), "write_note") {
		t.Error("the call reached the server after session/cancel")
	}
	for line := d.EditorRecv(); !strings.Contains(line, `"status":"failed"`); line = d.EditorRecv() {
		if !strings.Contains(line, `"$/cancel_request"`) {
			t.Fatalf("editor got %s", clip(line))
		}
	}
	d.finish()
}
