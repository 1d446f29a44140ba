//go:build linux

package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAgentExitsFirst: when the agent dies with requests pending, the editor
// gets one -32000 "agent exited with status N" error per unanswered request
// (and nothing for answered ones), then end of file, and the broker exits
// with the agent's status: its exit code, or 128+signal.
func TestAgentExitsFirst(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		die    func(s *session)
		status int
	}{
		{"exit_3", func(s *session) { s.AgentExit(3) }, 3},
		{"killed_by_sigkill", func(s *session) { s.control(command('K', strconv.Itoa(int(syscall.SIGKILL)))) }, 137},
		{"exit_0", func(s *session) { s.AgentExit(0) }, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := startFake(t, options{broker: true})
			s.EditorToAgent(msgInitialize)
			s.AgentToEditor(msgInitialized)
			s.EditorToAgent(
				`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`,
				`{"jsonrpc":"2.0","id":"two","method":"_vendor/slow","params":{}}`,
				`{"jsonrpc":"2.0","method":"_vendor/notice","params":{}}`,
				`{"jsonrpc":"2.0","id":3,"method":"session/set_mode","params":{"sessionId":"s","modeId":"plan"}}`,
			)
			// The agent answers one request and asks one of its own, then dies.
			s.AgentToEditor(
				`{"jsonrpc":"2.0","id":"two","result":{}}`,
				`{"jsonrpc":"2.0","id":40,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/x"}}`,
			)
			c.die(s)

			want := fmt.Sprintf("agent exited with status %d", c.status)
			pending := map[string]bool{"1": true, "3": true}
			for len(pending) > 0 {
				line := s.EditorRecv()
				m := decode(t, line)
				if !pending[string(m.ID)] {
					t.Fatalf("editor got %s, want an error for one of the pending requests %v", line, pending)
				}
				delete(pending, string(m.ID))
				if msg := expectError(t, line, string(m.ID), -32000); msg != want {
					t.Errorf("error message %q, want %q", msg, want)
				}
			}
			if got := s.Wait(); got != c.status {
				t.Errorf("broker exited with status %d, want %d", got, c.status)
			}
			s.waitStreams()
			if extra := s.out.unused(); len(extra) > 0 {
				t.Errorf("editor got more lines after the errors: %q", toStrings(extra))
			}
		})
	}
}

// TestShutdown: after the editor closes stdin the broker closes the agent's
// stdin, waits --shutdown-grace, SIGTERMs the agent, waits --kill-grace, and
// SIGKILLs it; it exits with the agent's status.
func TestShutdown(t *testing.T) {
	t.Parallel()
	// Longer than the defaults (5s and 2s): a broker that cut either grace
	// short or used its default instead exits before minTime. A bound from
	// below, which a loaded machine cannot break.
	const shutdownGrace, killGrace = 7 * time.Second, 4 * time.Second
	for _, c := range []struct {
		name      string
		agentArgs []string
		status    int
		minTime   time.Duration
	}{
		// Ignores end of input, dies on SIGTERM.
		{"sigterm_after_shutdown_grace", []string{"-on-eof", "ignore", "-on-signal", "die"}, 128 + 15, shutdownGrace},
		// Ignores end of input and SIGTERM: only SIGKILL stops it.
		{"sigkill_after_kill_grace", []string{"-on-eof", "ignore", "-on-signal", "ignore"}, 128 + 9, shutdownGrace + killGrace},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := startFake(t, options{
				broker:     true,
				brokerArgs: []string{"--shutdown-grace", shutdownGrace.String(), "--kill-grace", killGrace.String()},
				agentArgs:  c.agentArgs,
			})
			s.EditorToAgent(msgInitialize)
			s.AgentToEditor(msgInitialized)
			start := time.Now()
			s.CloseEditor()
			s.waitEvent('E') // the agent saw its stdin close
			if sig := s.waitEvent('S'); string(sig[1:]) != "15" {
				t.Errorf("agent got signal %s first, want SIGTERM (15)", sig[1:])
			}
			if got := s.Wait(); got != c.status {
				t.Errorf("broker exited with status %d, want %d\n%s", got, c.status, s.debug())
			}
			// The graces are honoured: not cut short, nor replaced by the
			// shorter defaults.
			if elapsed := time.Since(start); elapsed < c.minTime {
				t.Errorf("broker exited %v after stdin closed, before the graces (%v) ran out", elapsed, c.minTime)
			}
			s.waitStreams()
		})
	}
}

// TestSignalForwarding: SIGTERM, SIGINT and SIGHUP sent to the broker reach
// the agent; the broker exits with the agent's status, and the editor's
// pending request is answered with the -32000 error carrying that status.
func TestSignalForwarding(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sig      syscall.Signal
		onSignal string
		status   int
	}{
		{syscall.SIGTERM, "die", 128 + 15},
		{syscall.SIGINT, "exit:42", 42},
		{syscall.SIGHUP, "die", 128 + 1},
	} {
		t.Run(c.sig.String(), func(t *testing.T) {
			t.Parallel()
			s := startFake(t, options{broker: true, agentArgs: []string{"-on-signal", c.onSignal}})
			s.EditorToAgent(msgInitialize)
			s.AgentToEditor(msgInitialized)
			s.EditorToAgent(`{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`)
			if err := syscall.Kill(s.cmd.Process.Pid, c.sig); err != nil {
				t.Fatal(err)
			}
			if got := s.waitEvent('S'); string(got[1:]) != strconv.Itoa(int(c.sig)) {
				t.Errorf("agent got signal %s, want %d", got[1:], c.sig)
			}
			msg := expectError(t, s.EditorRecv(), "5", -32000)
			if want := fmt.Sprintf("agent exited with status %d", c.status); msg != want {
				t.Errorf("error message %q, want %q", msg, want)
			}
			if got := s.Wait(); got != c.status {
				t.Errorf("broker exited with status %d, want %d\n%s", got, c.status, s.debug())
			}
			// The agent got the signal once: forwarding must not repeat it.
			if _, err := s.events.take(0, func(b []byte) bool { return b[0] == 'S' }); err == nil {
				t.Errorf("agent got a second signal")
			}
		})
	}
}

// TestNoGrandchildOutlivesBroker: the agent starts `sleep 300` twice, one in
// its process group and one in a new session (out of the group). Neither
// may be alive once the broker has exited, whichever way the session ended.
func TestNoGrandchildOutlivesBroker(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		end  func(s *session)
	}{
		{"agent_exits", func(s *session) { s.AgentExit(0) }},
		{"editor_closes", func(s *session) { s.CloseEditor() }},
		{"broker_gets_sigterm", func(s *session) { _ = syscall.Kill(s.cmd.Process.Pid, syscall.SIGTERM) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := startFake(t, options{broker: true, brokerArgs: []string{"--shutdown-grace", "5s"}})
			s.control(command('G', ""))
			var pids [2]int
			ev := s.waitEvent('G')
			if _, err := fmt.Sscanf(string(ev[1:]), "%d %d", &pids[0], &pids[1]); err != nil {
				t.Fatalf("bad G reply %q", ev)
			}
			var fds [2]int
			for i, pid := range pids {
				fd, err := pidfdOpen(pid)
				if err != nil {
					t.Fatalf("pidfd_open(%d): %v", pid, err)
				}
				fds[i] = fd
				t.Cleanup(func() {
					_ = syscall.Close(fd)
					_ = syscall.Kill(pid, syscall.SIGKILL) // in case the broker left it
				})
			}
			c.end(s)
			s.Wait()
			exitedAt := time.Now()
			for i, pid := range pids {
				// The kernel finishes delivering SIGKILL when the process
				// next runs, which on a loaded machine takes a while; a
				// process that exited but was not yet reaped counts as gone.
				if !waitPidfd(fds[i], waitTimeout) {
					t.Errorf("grandchild %d (%s) still running %v after the broker exited", pid,
						[]string{"same process group", "own session"}[i], time.Since(exitedAt).Round(time.Millisecond))
				}
			}
		})
	}
}

// pidfdOpen returns a pidfd for pid (Linux 5.3 and later).
func pidfdOpen(pid int) (int, error) {
	const sysPidfdOpen = 434 // the same on every Linux architecture
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// waitPidfd reports whether the process behind fd exits within timeout: a
// pidfd becomes readable when its process terminates.
func waitPidfd(fd int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left < 0 {
			left = 0
		}
		var set syscall.FdSet
		set.Bits[fd/64] |= 1 << (uint(fd) % 64)
		tv := syscall.NsecToTimeval(left.Nanoseconds())
		n, err := syscall.Select(fd+1, &set, nil, nil, &tv)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		return err == nil && n > 0
	}
}

// TestStderrPassthrough: the agent's stderr reaches the broker's stderr as
// whole lines, unchanged, never cut by the broker's own log lines, and never
// reaches stdout.
func TestStderrPassthrough(t *testing.T) {
	t.Parallel()
	s := startFake(t, options{broker: true})
	lines := []string{
		"plain agent log line",
		"unicode ✓ 日本語 😀",
		`time=2026-01-01T00:00:00Z level=ERROR msg="looks like the broker's own log"`,
		`{"jsonrpc":"2.0","method":"session/update","params":{}}`, // JSON on stderr is not a message
		strings.Repeat("long ", 30000),
	}
	for _, l := range lines {
		s.AgentStderr(l)
	}
	// Lines longer than the broker's buffer may be written in pieces; let
	// them all through before the broker has anything of its own to log.
	for _, l := range lines {
		s.WaitStderr("an agent line", func(got string) bool { return got == l })
	}
	// A line written in two pieces, with a broker warning (about a garbage
	// stdout line) triggered in between: the warning must not cut it.
	s.control(command('w', "first half, "))
	s.AgentSend("garbage between the halves")
	s.WaitStderr("the not-JSON-RPC warning", func(l string) bool { return strings.Contains(l, "not JSON-RPC") })
	s.AgentStderr("second half")
	s.WaitStderr("the joined line", func(l string) bool { return l == "first half, second half" })
	// A burst of stderr lines interleaved with more warnings.
	var burst []byte
	for i := 0; i < 300; i++ {
		line := fmt.Sprintf("burst line %03d %s", i, strings.Repeat("=", i))
		lines = append(lines, line)
		burst = append(burst, command('W', line)...)
		if i%30 == 0 {
			burst = append(burst, command('O', "debug print on stdout")...)
		}
	}
	s.control(burst)
	s.AgentBarrier()
	s.EditorToAgent(msgInitialize)
	s.AgentToEditor(msgInitialized)
	s.Finish()

	got := strings.Split(s.stderrText(), "\n")
	for _, want := range append(lines, "first half, second half") {
		if n := countEqual(got, want); n != 1 {
			t.Errorf("agent stderr line appears %d times as a whole line on broker stderr, want once: %s", n, clip(want))
		}
	}
	if editor := s.transcript().Editor; len(editor) != 1 {
		t.Errorf("editor received %d lines, want only the initialize response: %q", len(editor), editor)
	}
}

func countEqual(lines []string, want string) int {
	n := 0
	for _, l := range lines {
		if l == want {
			n++
		}
	}
	return n
}

// TestTrace: --trace writes one JSON object per relayed message, with its
// direction, its time, and the message embedded byte for byte.
func TestTrace(t *testing.T) {
	t.Parallel()
	trace := t.TempDir() + "/trace.jsonl"
	s := startFake(t, options{broker: true, brokerArgs: []string{"--trace", trace}})
	before := time.Now().Add(-time.Second)
	sent := []struct{ dir, msg string }{
		{"editor->agent", msgInitialize},
		{"agent->editor", msgInitialized},
		{"editor->agent", `{"jsonrpc":"2.0","method":"_vendor/n","params":{"x": 1.0e2 ,"s":"caf\u00e9"}}`},
		{"agent->editor", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`},
	}
	for _, m := range sent {
		if strings.HasPrefix(m.dir, "editor") {
			s.EditorToAgent(m.msg)
		} else {
			s.AgentToEditor(m.msg)
		}
	}
	s.Finish()
	after := time.Now().Add(time.Second)

	data, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	recs := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	if len(recs) != len(sent) {
		t.Fatalf("trace has %d records, want %d:\n%s", len(recs), len(sent), data)
	}
	for i, rec := range recs {
		var r struct {
			Time    time.Time       `json:"time"`
			Dir     string          `json:"dir"`
			Message json.RawMessage `json:"message"`
		}
		if err := json.Unmarshal(rec, &r); err != nil {
			t.Errorf("trace record %d is not a JSON object: %v: %s", i, err, rec)
			continue
		}
		if r.Dir != sent[i].dir {
			t.Errorf("trace record %d: dir %q, want %q", i, r.Dir, sent[i].dir)
		}
		if r.Time.Before(before) || r.Time.After(after) {
			t.Errorf("trace record %d: time %v outside the run", i, r.Time)
		}
		if !bytes.Contains(rec, []byte(sent[i].msg)) {
			t.Errorf("trace record %d does not hold the message byte for byte: %s", i, rec)
		}
	}
}

// TestAgentLaunch: the agent is found on PATH, gets its arguments untouched
// (flags after "--" included), inherits the environment and working
// directory, and leads its own process group.
func TestAgentLaunch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"positional arg", "--log-level", "debug", "--", "-x"}
	s := startFake(t, options{
		broker:    true,
		agentArgs: append([]string{"-on-eof", "exit"}, args...),
		env:       []string{"FAKEAGENT_PROBE=inherited value"},
		dir:       dir,
	})
	if !slices.Equal(s.ready.Args, args) {
		t.Errorf("agent args %q, want %q", s.ready.Args, args)
	}
	if s.ready.Cwd != dir {
		t.Errorf("agent cwd %q, want %q", s.ready.Cwd, dir)
	}
	if s.ready.Probe != "inherited value" {
		t.Errorf("agent env FAKEAGENT_PROBE=%q, want %q", s.ready.Probe, "inherited value")
	}
	// The broker signals "the agent's whole process group": the agent must
	// lead a group of its own, apart from the broker's.
	if s.ready.Pgid != s.ready.Pid {
		t.Errorf("agent pid %d is in process group %d, want a group of its own", s.ready.Pid, s.ready.Pgid)
	}
	s.Finish()
}

// TestAgentNotFound: an agent missing from PATH is a user error with exit
// status 127, nothing on stdout, and an "acp-broker: error:" line.
func TestAgentNotFound(t *testing.T) {
	t.Parallel()
	trackSources(t)
	cmd := exec.Command(brokerBin, "--", "no-such-agent-acpb-test")
	cmd.Env = append(testEnv(), "PATH="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = waitTimeout
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 127 {
		t.Errorf("exit: %v, want status 127", err)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout is not empty: %q", stdout.String())
	}
	if !strings.HasPrefix(stderr.String(), "acp-broker: error: ") || !strings.Contains(stderr.String(), "no-such-agent-acpb-test") {
		t.Errorf("stderr: %q, want an \"acp-broker: error:\" line naming the agent", stderr.String())
	}
}

// TestEditorHalfClose: an editor that closes its output still reads the
// agent's: what the agent sends after the close, within the shutdown grace,
// reaches the editor, and a request answered then gets no error.
func TestEditorHalfClose(t *testing.T) {
	t.Parallel()
	s := startFake(t, options{broker: true, agentArgs: []string{"-on-eof", "ignore"}})
	s.EditorToAgent(msgInitialize)
	s.AgentToEditor(msgInitialized)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`)
	s.CloseEditor()
	s.waitEvent('E')
	s.AgentToEditor(
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"last words"}}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"cancelled"}}`,
	)
	s.AgentExit(0)
	if got := s.Wait(); got != 0 {
		t.Errorf("broker exited with status %d, want 0", got)
	}
	s.waitStreams()
	if extra := s.out.unused(); len(extra) > 0 {
		t.Errorf("editor got lines after the answer: %q", toStrings(extra))
	}
}

// TestEditorVanishes: when the editor stops reading (its end of the
// broker's stdout is closed), the broker notices on its next write, stops
// the agent and its children, and exits on its own rather than dying of
// SIGPIPE. Stdin stays open, so nothing else tells the broker to stop.
func TestEditorVanishes(t *testing.T) {
	t.Parallel()
	s := startFake(t, options{
		broker:     true,
		brokerArgs: []string{"--shutdown-grace", "200ms", "--kill-grace", "200ms"},
		agentArgs:  []string{"-on-eof", "ignore"}, // stays until SIGTERM
	})
	s.EditorToAgent(msgInitialize)
	s.AgentToEditor(msgInitialized)
	s.control(command('G', ""))
	var pids [2]int
	ev := s.waitEvent('G')
	if _, err := fmt.Sscanf(string(ev[1:]), "%d %d", &pids[0], &pids[1]); err != nil {
		t.Fatalf("bad G reply %q", ev)
	}
	var fds []int
	for _, pid := range append(pids[:], s.ready.Pid) {
		fd, err := pidfdOpen(pid)
		if err != nil {
			t.Fatalf("pidfd_open(%d): %v", pid, err)
		}
		fds = append(fds, fd)
		t.Cleanup(func() {
			_ = syscall.Close(fd)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		})
	}
	s.stdout.Close()
	// The agent keeps talking to an editor that is gone.
	var lines []string
	for i := 0; i < 20; i++ {
		lines = append(lines, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"anyone there?"}}}}`)
	}
	s.AgentSend(lines...)
	s.Wait() // reports an error if the broker was killed by a signal
	for i, fd := range fds {
		if !waitPidfd(fd, waitTimeout) {
			t.Errorf("%s still running %v after the broker exited", []string{"grandchild (same group)", "grandchild (own session)", "agent"}[i], waitTimeout)
		}
	}
}

// TestLogFile: with --log-file the broker's own logs go to the file, while
// the agent's stderr still passes through on stderr.
func TestLogFile(t *testing.T) {
	t.Parallel()
	logFile := t.TempDir() + "/broker.log"
	s := startFake(t, options{broker: true, brokerArgs: []string{"--log-file", logFile}})
	s.AgentSend("a banner that is not JSON-RPC")
	s.AgentStderr("agent log line")
	s.EditorToAgent(msgInitialize)
	s.AgentToEditor(msgInitialized)
	s.Finish()
	if got := s.stderrText(); got != "agent log line\n" {
		t.Errorf("stderr = %q, want only the agent's line", got)
	}
	data, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(matchingLines(string(data), "not JSON-RPC", "a banner that is not JSON-RPC")) != 1 {
		t.Errorf("log file lacks the warning about the banner:\n%s", data)
	}
}
