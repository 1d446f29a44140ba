//go:build linux

package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// queue is the ordered record of what one reader produced: every item stays
// in the transcript, and take hands items out in order.
type queue struct {
	mu     sync.Mutex
	items  [][]byte
	used   []bool
	first  int // items before first are all used
	closed bool
	err    error
	wake   chan struct{}
}

func newQueue() *queue { return &queue{wake: make(chan struct{})} }

func (q *queue) push(item []byte) {
	q.mu.Lock()
	q.items = append(q.items, item)
	q.used = append(q.used, false)
	close(q.wake)
	q.wake = make(chan struct{})
	q.mu.Unlock()
}

func (q *queue) close(err error) {
	q.mu.Lock()
	if !q.closed {
		q.closed, q.err = true, err
		close(q.wake)
		q.wake = make(chan struct{})
	}
	q.mu.Unlock()
}

var errTimeout = errors.New("timed out")

// take returns the oldest unused item that match accepts (any item if match
// is nil). It returns io.EOF once the reader has ended without such an item.
func (q *queue) take(timeout time.Duration, match func([]byte) bool) ([]byte, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		q.mu.Lock()
		for i := q.first; i < len(q.items); i++ {
			if q.used[i] || (match != nil && !match(q.items[i])) {
				continue
			}
			q.used[i] = true
			for q.first < len(q.used) && q.used[q.first] {
				q.first++
			}
			item := q.items[i]
			q.mu.Unlock()
			return item, nil
		}
		if q.closed {
			err := q.err
			q.mu.Unlock()
			if err == nil {
				err = io.EOF
			}
			return nil, err
		}
		wake := q.wake
		q.mu.Unlock()
		select {
		case <-wake:
		case <-timer.C:
			return nil, errTimeout
		}
	}
}

// waitClosed waits until the reader has ended.
func (q *queue) waitClosed(timeout time.Duration) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		q.mu.Lock()
		closed, wake := q.closed, q.wake
		q.mu.Unlock()
		if closed {
			return nil
		}
		select {
		case <-wake:
		case <-timer.C:
			return errTimeout
		}
	}
}

// all returns a copy of the transcript.
func (q *queue) all() [][]byte {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([][]byte(nil), q.items...)
}

// unused returns the items nobody has taken yet.
func (q *queue) unused() [][]byte {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out [][]byte
	for i := q.first; i < len(q.items); i++ {
		if !q.used[i] {
			out = append(out, q.items[i])
		}
	}
	return out
}

// unterminated marks a final piece of a stream that had no newline.
const unterminated = "\x00<no newline at end of stream>"

// readLines feeds every line of r, without its '\n', into q.
func readLines(r io.Reader, q *queue) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if n := len(line); n > 0 && line[n-1] == '\n' {
			q.push(line[:n-1])
		} else if n > 0 {
			q.push(append(line, unterminated...))
		}
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			q.close(err)
			return
		}
	}
}

// options describe one run of the fake agent, direct or behind the broker.
type options struct {
	broker     bool
	brokerArgs []string // flags placed before "--"
	agentArgs  []string // fakeagent flags: -on-eof, -on-signal
	env        []string // extra environment for the process the test starts
	dir        string
	wait       time.Duration // bound on every wait; waitTimeout if zero
}

// readyInfo is what the fake agent reports once its signal handlers are in place.
type readyInfo struct {
	Pid   int      `json:"pid"`
	Pgid  int      `json:"pgid"`
	Args  []string `json:"args"`
	Cwd   string   `json:"cwd"`
	Probe string   `json:"probe"`
}

// session is one conversation: the test is the editor on the process's stdio
// and the puppeteer of the fake agent over its control socket.
type session struct {
	t    testing.TB
	opts options
	cmd  *exec.Cmd

	stdin  *os.File
	stdout *os.File // the editor's read end of the process's stdout
	out    *queue   // lines on the process's stdout: what the editor received
	errOut *queue   // lines on the process's stderr

	ctlMu  sync.Mutex
	ctl    net.Conn
	in     *queue // lines the agent read on its stdin
	events *queue // other control messages from the agent (R, S, G, F, E)

	ready readyInfo
	wait  time.Duration

	// sent is every line the test made either side send, in order, for
	// the dry-run cross-check (see decider.explainAgrees).
	sentMu sync.Mutex
	sent   []sentLine

	exited chan struct{}
	state  *os.ProcessState
}

var ctlCounter atomic.Int64

// startFake starts the fake agent, directly or behind the broker, and waits
// until it is connected and ready.
func startFake(t testing.TB, o options) *session {
	t.Helper()
	addr := fmt.Sprintf("@acpb-it-%d-%d", os.Getpid(), ctlCounter.Add(1))
	ln, err := net.Listen("unix", addr)
	if err != nil {
		t.Fatalf("listen on control socket: %v", err)
	}
	t.Cleanup(func() { ln.Close() })

	agentArgs := append([]string{"-ctl", addr}, o.agentArgs...)
	var cmd *exec.Cmd
	if o.broker {
		args := append(append(append([]string{}, o.brokerArgs...), "--", "fakeagent"), agentArgs...)
		cmd = exec.Command(brokerBin, args...)
	} else {
		cmd = exec.Command(fakeAgentBin, agentArgs...)
	}
	s := newSession(t, o, cmd)

	type accepted struct {
		c   net.Conn
		err error
	}
	acc := make(chan accepted, 1)
	go func() {
		_ = ln.(*net.UnixListener).SetDeadline(time.Now().Add(waitTimeout))
		c, err := ln.Accept()
		acc <- accepted{c, err}
	}()
	var a accepted
	select {
	case a = <-acc:
	case <-s.exited:
		t.Fatalf("%s exited before the agent connected: %v\nstderr:\n%s", s.name(), s.state, s.stderrText())
	}
	if a.err != nil {
		t.Fatalf("agent did not connect: %v\nstderr:\n%s", a.err, s.stderrText())
	}
	s.ctl = a.c
	go s.readControl()
	t.Cleanup(func() {
		// Only an agent that still holds its control socket is alive; stop it.
		if s.events.waitClosed(0) != nil && s.ready.Pid > 0 {
			_ = syscall.Kill(s.ready.Pid, syscall.SIGKILL)
		}
		s.ctl.Close()
	})

	ev := s.waitEvent('R')
	if err := json.Unmarshal(ev[1:], &s.ready); err != nil {
		t.Fatalf("bad ready message %q: %v", ev, err)
	}
	return s
}

// newSession starts cmd with its stdio on pipes and its own process group.
func newSession(t testing.TB, o options, cmd *exec.Cmd) *session {
	t.Helper()
	trackSources(t)
	s := &session{
		t: t, opts: o, cmd: cmd,
		out: newQueue(), errOut: newQueue(), in: newQueue(), events: newQueue(),
		exited: make(chan struct{}),
		wait:   o.wait,
	}
	if s.wait == 0 {
		s.wait = waitTimeout
	}
	cmd.Env = append(testEnv(), o.env...)
	cmd.Dir = o.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	stdinR, stdinW := mustPipe(t)
	outR, outW := mustPipe(t)
	errR, errW := mustPipe(t)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, outW, errW
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	stdinR.Close()
	outW.Close()
	errW.Close()
	s.stdin, s.stdout = stdinW, outR
	go readLines(outR, s.out)
	go readLines(errR, s.errOut)
	go func() {
		_ = cmd.Wait()
		s.state = cmd.ProcessState
		close(s.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-s.exited
		}
		stdinW.Close()
		outR.Close()
		errR.Close()
		if text := s.stderrText(); strings.Contains(text, "WARNING: DATA RACE") {
			t.Errorf("%s reported a data race:\n%s", s.name(), text)
		}
	})
	return s
}

// testEnv is the environment of every process the tests start: the test's
// own, with the fake agents first on PATH, an empty home and a temporary
// directory of the run's.
func testEnv() []string {
	return append(os.Environ(),
		"PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+homeDir,
		"XDG_CONFIG_HOME="+filepath.Join(homeDir, ".config"),
		"XDG_STATE_HOME="+filepath.Join(homeDir, ".local", "state"),
		"TMPDIR="+tmpDir,
		// A race-enabled broker otherwise sleeps a second before exiting.
		"GORACE=atexit_sleep_ms=0")
}

func mustPipe(t testing.TB) (*os.File, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatalf("pipe: %v", err)
	}
	return r, w
}

func (s *session) name() string {
	if s.opts.broker {
		return "acp-broker"
	}
	return "fakeagent"
}

func (s *session) readControl() {
	br := bufio.NewReaderSize(s.ctl, 64<<10)
	for {
		msg, err := br.ReadBytes('\n')
		if err != nil {
			s.in.close(nil)
			s.events.close(nil)
			return
		}
		msg = msg[:len(msg)-1]
		switch msg[0] {
		case 'I':
			s.in.push(msg[1:])
		case 'i':
			s.in.push(append(msg[1:], unterminated...))
		case 'E':
			s.in.close(nil)
			s.events.push(msg)
		default:
			s.events.push(msg)
		}
	}
}

// control sends one buffer of commands to the fake agent.
func (s *session) control(buf []byte) {
	s.t.Helper()
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	_ = s.ctl.SetWriteDeadline(time.Now().Add(s.wait))
	if _, err := s.ctl.Write(buf); err != nil {
		s.t.Fatalf("control write to fake agent: %v", err)
	}
}

func command(op byte, payload string) []byte {
	b := make([]byte, 0, len(payload)+2)
	b = append(b, op)
	b = append(b, payload...)
	return append(b, '\n')
}

// sentLine is a line one side sent: from is "agent" or "editor".
type sentLine struct{ from, line string }

func (s *session) recordSent(from string, lines ...string) {
	s.sentMu.Lock()
	defer s.sentMu.Unlock()
	for _, l := range lines {
		s.sent = append(s.sent, sentLine{from, l})
	}
}

// sentSoFar returns a copy of what both sides were made to send.
func (s *session) sentSoFar() []sentLine {
	s.sentMu.Lock()
	defer s.sentMu.Unlock()
	return append([]sentLine(nil), s.sent...)
}

// AgentSend makes the agent write each line, plus '\n', to its stdout in one burst.
func (s *session) AgentSend(lines ...string) {
	s.t.Helper()
	var buf []byte
	for _, l := range lines {
		buf = append(buf, command('O', l)...)
	}
	s.recordSent("agent", lines...)
	s.control(buf)
}

// AgentStderr makes the agent write line plus '\n' to its stderr.
func (s *session) AgentStderr(line string) { s.t.Helper(); s.control(command('W', line)) }

// AgentExit makes the agent exit with code.
func (s *session) AgentExit(code int) { s.t.Helper(); s.control(command('X', strconv.Itoa(code))) }

// AgentRecv returns the next line the agent read on stdin.
func (s *session) AgentRecv() string {
	s.t.Helper()
	line, err := s.in.take(s.wait, nil)
	if err != nil {
		s.t.Fatalf("agent: waiting for a line on stdin: %v\n%s", err, s.debug())
	}
	return string(line)
}

// AgentExpect requires the next line the agent reads to be want, byte for byte.
func (s *session) AgentExpect(want string) {
	s.t.Helper()
	if got := s.AgentRecv(); got != want {
		s.t.Fatalf("agent received\n  %s\nwant\n  %s", clip(got), clip(want))
	}
}

// EditorSend writes each line plus '\n' to the process's stdin in one write.
func (s *session) EditorSend(lines ...string) {
	s.t.Helper()
	var buf []byte
	for _, l := range lines {
		buf = append(buf, l...)
		buf = append(buf, '\n')
	}
	s.editorWrite(buf)
}

func (s *session) editorWrite(buf []byte) {
	s.t.Helper()
	s.recordSent("editor", strings.Split(strings.TrimSuffix(string(buf), "\n"), "\n")...)
	_ = s.stdin.SetWriteDeadline(time.Now().Add(s.wait))
	if _, err := s.stdin.Write(buf); err != nil {
		s.t.Fatalf("editor: write to %s: %v", s.name(), err)
	}
}

// EditorRecv returns the next line the editor read.
func (s *session) EditorRecv() string {
	s.t.Helper()
	line, err := s.out.take(s.wait, nil)
	if err != nil {
		s.t.Fatalf("editor: waiting for a line on stdout: %v\n%s", err, s.debug())
	}
	return string(line)
}

// EditorExpect requires the next line the editor reads to be want, byte for byte.
func (s *session) EditorExpect(want string) {
	s.t.Helper()
	if got := s.EditorRecv(); got != want {
		s.t.Fatalf("editor received\n  %s\nwant\n  %s", clip(got), clip(want))
	}
}

// AgentToEditor sends lines from the agent and requires the editor to receive them unchanged.
func (s *session) AgentToEditor(lines ...string) {
	s.t.Helper()
	s.AgentSend(lines...)
	for _, l := range lines {
		s.EditorExpect(l)
	}
}

// EditorToAgent sends lines from the editor and requires the agent to receive them unchanged.
func (s *session) EditorToAgent(lines ...string) {
	s.t.Helper()
	s.EditorSend(lines...)
	for _, l := range lines {
		s.AgentExpect(l)
	}
}

// waitEvent returns the first control message with op that the agent sent.
func (s *session) waitEvent(op byte) []byte {
	s.t.Helper()
	ev, err := s.events.take(s.wait, func(b []byte) bool { return b[0] == op })
	if err != nil {
		s.t.Fatalf("waiting for %q from the fake agent: %v\n%s", op, err, s.debug())
	}
	return ev
}

var barrierCounter atomic.Int64

// AgentBarrier returns once the agent has executed every command sent before it.
func (s *session) AgentBarrier() {
	s.t.Helper()
	tag := strconv.FormatInt(barrierCounter.Add(1), 10)
	s.control(command('F', tag))
	want := "F" + tag
	if _, err := s.events.take(s.wait, func(b []byte) bool { return string(b) == want }); err != nil {
		s.t.Fatalf("barrier %s: %v\n%s", tag, err, s.debug())
	}
}

// CloseEditor closes the process's stdin, as an editor that is done.
func (s *session) CloseEditor() {
	s.t.Helper()
	if err := s.stdin.Close(); err != nil {
		s.t.Fatalf("close stdin: %v", err)
	}
}

// Wait waits for the process to exit and returns its exit status, or
// 128+signal if it was killed by a signal (and reports that as an error,
// since the broker must always exit on its own).
func (s *session) Wait() int {
	s.t.Helper()
	select {
	case <-s.exited:
	case <-time.After(s.wait):
		s.t.Fatalf("%s did not exit within %v\n%s", s.name(), s.wait, s.debug())
	}
	return exitStatus(s.t, s.name(), s.state)
}

func exitStatus(t testing.TB, name string, st *os.ProcessState) int {
	t.Helper()
	ws := st.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		t.Errorf("%s was killed by %v instead of exiting", name, ws.Signal())
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// Finish ends a clean conversation: the editor closes stdin, the agent exits 0
// at end of input, and the process must exit 0 with both streams ended.
func (s *session) Finish() {
	s.t.Helper()
	s.CloseEditor()
	if code := s.Wait(); code != 0 {
		s.t.Fatalf("%s exited with status %d, want 0\n%s", s.name(), code, s.debug())
	}
	s.waitStreams()
}

// waitStreams waits until stdout and stderr have both reached end of file.
func (s *session) waitStreams() {
	s.t.Helper()
	if err := s.out.waitClosed(s.wait); err != nil {
		s.t.Fatalf("stdout not closed after exit: %v", err)
	}
	if err := s.errOut.waitClosed(s.wait); err != nil {
		s.t.Fatalf("stderr not closed after exit: %v", err)
	}
}

// transcript is everything each side received, in order.
type transcript struct {
	Editor []string // lines on the editor's input
	Agent  []string // lines on the agent's stdin
}

func (s *session) transcript() transcript {
	return transcript{Editor: toStrings(s.out.all()), Agent: toStrings(s.in.all())}
}

func toStrings(items [][]byte) []string {
	out := make([]string, len(items))
	for i, b := range items {
		out[i] = string(b)
	}
	return out
}

// stderrText is the process's stderr so far, without the broker's warning
// that the editor answers faster than a person can: the tests' editor is a
// program, and says so on almost every forwarded request (the warning has
// tests of its own, which read stderrAll).
func (s *session) stderrText() string {
	var b strings.Builder
	for _, l := range s.errOut.all() {
		if bytes.Contains(l, []byte(quickWarning)) {
			continue
		}
		b.Write(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// stderrAll is the process's stderr so far, every line.
func (s *session) stderrAll() string {
	var b strings.Builder
	for _, l := range s.errOut.all() {
		b.Write(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// WaitStderr waits for a stderr line that satisfies match and returns it.
func (s *session) WaitStderr(what string, match func(string) bool) string {
	s.t.Helper()
	line, err := s.errOut.take(s.wait, func(b []byte) bool { return match(string(b)) })
	if err != nil {
		s.t.Fatalf("waiting for a stderr line with %s: %v\nstderr:\n%s", what, err, s.stderrText())
	}
	return string(line)
}

// debug describes the session's state for failure messages.
func (s *session) debug() string {
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s stderr:\n%s", s.name(), clip(s.stderrText()))
	if u := s.out.unused(); len(u) > 0 {
		fmt.Fprintf(&b, "--- editor has %d unread lines, first: %s\n", len(u), clip(string(u[0])))
	}
	if u := s.in.unused(); len(u) > 0 {
		fmt.Fprintf(&b, "--- agent has %d unread lines, first: %s\n", len(u), clip(string(u[0])))
	}
	return b.String()
}

// clip shortens long text in failure messages.
func clip(s string) string {
	const max = 2000
	if len(s) <= max {
		return s
	}
	return fmt.Sprintf("%s ... [%d bytes omitted] ... %s", s[:max/2], len(s)-max, s[len(s)-max/2:])
}

// modes runs scenario directly against the agent and through the broker, and
// requires both runs to produce the same transcript. Each run must end with
// the editor closing stdin and everything exiting 0. Through the broker, with
// --log-level warn, a clean conversation must leave stderr empty.
func runBoth(t *testing.T, scenario func(t *testing.T, s *session)) {
	t.Helper()
	var got [2]transcript
	var ran [2]bool
	for i, broker := range []bool{false, true} {
		name := "direct"
		if broker {
			name = "broker"
		}
		ok := t.Run(name, func(t *testing.T) {
			o := options{broker: broker}
			if broker {
				o.brokerArgs = []string{"--log-level", "warn", "--config", noProxyConfig}
			}
			s := startFake(t, o)
			scenario(t, s)
			s.Finish()
			if text := s.stderrText(); text != "" {
				t.Errorf("stderr of a clean conversation is not empty:\n%s", text)
			}
			got[i], ran[i] = s.transcript(), true
		})
		if !ok {
			return
		}
	}
	if ran[0] && ran[1] {
		compareTranscripts(t, got[0], got[1])
	}
}

func compareTranscripts(t *testing.T, direct, broker transcript) {
	t.Helper()
	compareLines(t, "editor", direct.Editor, broker.Editor)
	compareLines(t, "agent", direct.Agent, broker.Agent)
}

func compareLines(t *testing.T, side string, direct, broker []string) {
	t.Helper()
	n := min(len(direct), len(broker))
	for i := 0; i < n; i++ {
		if direct[i] != broker[i] {
			t.Errorf("%s transcript differs at line %d:\n direct: %s\n broker: %s", side, i+1, clip(direct[i]), clip(broker[i]))
			return
		}
	}
	if len(direct) != len(broker) {
		t.Errorf("%s received %d lines directly but %d through the broker", side, len(direct), len(broker))
	}
}

// rpcMessage is a decoded copy of a message, for checks on messages the
// broker writes itself. Forwarded messages are compared as bytes.
type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func decode(t testing.TB, line string) rpcMessage {
	t.Helper()
	var m rpcMessage
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("not JSON: %v: %s", err, clip(line))
	}
	if m.JSONRPC != "2.0" {
		t.Errorf("message without \"jsonrpc\":\"2.0\": %s", clip(line))
	}
	return m
}

// expectError requires line to be an error response to id (raw JSON, compared
// as bytes: ids are never rewritten) with code, and returns its message.
func expectError(t testing.TB, line, id string, code int) string {
	t.Helper()
	m := decode(t, line)
	if !bytes.Equal(m.ID, []byte(id)) {
		t.Errorf("error response has id %s, want %s: %s", m.ID, id, clip(line))
	}
	if m.Error == nil {
		t.Fatalf("want an error response with code %d, got: %s", code, clip(line))
	}
	if m.Error.Code != code {
		t.Errorf("error code %d, want %d: %s", m.Error.Code, code, clip(line))
	}
	if m.Result != nil || m.Method != "" {
		t.Errorf("error response also has a result or method: %s", clip(line))
	}
	return m.Error.Message
}
