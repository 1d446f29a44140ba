//go:build linux

package integration

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// TestTerminalLoginOnATerminal: an editor runs a `terminal` auth method as
// the configured command with the method's arguments in a terminal. The
// broker started on a terminal runs the agent in its place: the agent's
// login prompt shows on the terminal, the code typed there reaches it, the
// broker's log line says what happened, the process is the agent itself
// (same pid), and the exit status is the agent's.
func TestTerminalLoginOnATerminal(t *testing.T) {
	t.Parallel()
	for _, status := range []int{0, 5} {
		t.Run(fmt.Sprintf("exit_%d", status), func(t *testing.T) {
			t.Parallel()
			trackSources(t)
			// No arguments an auth method names: the terminal alone decides.
			cmd := exec.Command(brokerBin, "--", "fakeagent", "-login", "-login-exit", fmt.Sprint(status))
			// The auth method's env, which the editor sets on the command.
			cmd.Env = append(testEnv(), "FAKEAGENT_PROBE=from the auth method")
			term := startOnPty(t, cmd)
			term.waitFor(t, "Paste the code: ")
			term.write(t, "s3cret\n")
			term.waitFor(t, `logged in with code "s3cret"`)
			if got := term.wait(t); got != status {
				t.Errorf("exit status %d, want the agent's %d", got, status)
			}
			out := term.text()
			if want := fmt.Sprintf("fakeagent login pid=%d args=[] probe=%q", cmd.Process.Pid, "from the auth method"); !strings.Contains(out, want) {
				t.Errorf("the agent does not run as the broker's process (want %q):\n%s", want, out)
			}
			if !strings.Contains(out, "terminal login: running the agent directly") {
				t.Errorf("the terminal shows no log line saying the agent runs directly:\n%s", out)
			}
		})
	}
}

// TestRealClaudeTerminalLogin: claude-agent-acp 0.101 run with its
// "claude-ai-login" method's arguments, in a terminal, through the broker:
// the Claude CLI's own login prompt shows on the terminal.
func TestRealClaudeTerminalLogin(t *testing.T) {
	t.Parallel()
	node := adapterNode(t)
	trackSources(t)
	entry := filepath.Join(requireAdapters(t), "@agentclientprotocol", "claude-agent-acp", "dist", "index.js")
	cmd := exec.Command(brokerBin, "--", node, entry, "--cli", "auth", "login", "--claudeai")
	home := t.TempDir()
	cmd.Env = append(testEnv(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
	term := startOnPty(t, cmd)
	term.bound = adapterWait
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }) // the CLI the adapter started
	term.waitFor(t, "Paste code here if prompted")
	if out := term.text(); !strings.Contains(out, "terminal login: running the agent directly") {
		t.Errorf("the terminal shows no log line saying the agent runs directly:\n%s", out)
	}
}

// TestTerminalLoginByArguments: over pipes, the command line that ends with
// a terminal auth method's arguments, as claude-agent-acp 0.101 advertises
// them, runs the agent directly too, however the agent is named (a command
// on PATH, a path into its npm package, an npm package spec): its prompt is
// not dropped as a line that is not JSON-RPC.
func TestTerminalLoginByArguments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	named := map[string]string{
		"on_path":      "claude-agent-acp",
		"package_path": filepath.Join(dir, "node_modules", "@agentclientprotocol", "claude-agent-acp", "dist", "index.js"),
	}
	for _, p := range []string{filepath.Join(dir, "claude-agent-acp"), named["package_path"]} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(fakeAgentBin, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, authArgs := range [][]string{
		{"--cli"},
		{"--cli", "auth", "login", "--claudeai"},
		{"--cli", "auth", "login", "--console"},
	} {
		for how, agent := range named {
			t.Run(how+"/"+strings.Join(authArgs, "_"), func(t *testing.T) {
				t.Parallel()
				args := append([]string{"--", agent, "-login", "--"}, authArgs...)
				out, stderr, status := runOverPipes(t, dir, args, "s3cret\n")
				want := fmt.Sprintf("fakeagent login pid=%d args=", status.pid)
				if !strings.HasPrefix(out, want) || !strings.Contains(out, `logged in with code "s3cret"`) {
					t.Errorf("stdout %q, want the agent's own login exchange (starting %q)\nstderr:\n%s", out, want, stderr)
				}
				if status.code != 0 {
					t.Errorf("exit status %d, want 0", status.code)
				}
			})
		}
	}
	// The other way round: with `npx`, the package spec names the agent.
	t.Run("npm_package_spec", func(t *testing.T) {
		t.Parallel()
		npx := filepath.Join(t.TempDir(), "npx")
		// A stand-in for npx that runs the package as npx would.
		script := fmt.Sprintf("#!/bin/sh\nshift\nexec %s \"$@\"\n", fakeAgentBin)
		if err := os.WriteFile(npx, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		out, stderr, status := runOverPipes(t, dir, []string{"--", npx, "@agentclientprotocol/claude-agent-acp@0.101.0", "-login", "--", "--cli"}, "s3cret\n")
		if !strings.Contains(out, `logged in with code "s3cret"`) || status.code != 0 {
			t.Errorf("stdout %q, status %d: want the agent's own login exchange\nstderr:\n%s", out, status.code, stderr)
		}
	})
}

// TestNotTerminalLoginStaysBrokered: a command line that only resembles a
// terminal login stays an ACP session the broker relays and governs: the
// auth arguments of one agent after another agent's name, partial or
// extended forms, a form that is not at the end where the editor puts it,
// and a terminal on stdin alone. The agent's prompt is then a line that is
// not JSON-RPC, dropped with a warning, and the code never reaches it.
func TestNotTerminalLoginStaysBrokered(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Symlink(fakeAgentBin, filepath.Join(dir, "claude-agent-acp")); err != nil {
		t.Fatal(err)
	}
	for name, tail := range map[string][]string{
		"other_agent":           {"fakeagent", "-login", "--", "--cli", "auth", "login", "--claudeai"},
		"other_agent_cli":       {"fakeagent", "-login", "--", "--cli"},
		"agent_named_later":     {"fakeagent", "-login", "--", "x", "claude-agent-acp", "--cli"},
		"partial":               {"claude-agent-acp", "-login", "--", "--cli", "auth", "login"},
		"console_alone":         {"claude-agent-acp", "-login", "--", "--console"},
		"extended":              {"claude-agent-acp", "-login", "--", "--cli", "auth", "login", "--claudeai", "--extra"},
		"not_at_the_end":        {"claude-agent-acp", "-login", "--", "--cli", "--verbose"},
		"similar_name":          {"claude-agent-acp-fork", "-login", "--", "--cli"},
		"no_arguments_at_all":   {"claude-agent-acp", "-login"},
		"auth_args_as_one_word": {"claude-agent-acp", "-login", "--", "--cli auth login --claudeai"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if tail[0] == "claude-agent-acp-fork" {
				fork := filepath.Join(t.TempDir(), "claude-agent-acp-fork")
				if err := os.Symlink(fakeAgentBin, fork); err != nil {
					t.Fatal(err)
				}
				tail = append([]string{fork}, tail[1:]...)
			}
			out, stderr, status := runOverPipes(t, dir, append([]string{"--"}, tail...), "s3cret\n")
			expectBrokered(t, out, stderr, status)
		})
	}
	t.Run("terminal_on_stdin_only", func(t *testing.T) {
		t.Parallel()
		trackSources(t)
		cmd := exec.Command(brokerBin, "--", "fakeagent", "-login")
		cmd.Env = testEnv()
		master, slave := openPty(t)
		errR, errW := mustPipe(t)
		var stdout bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, &stdout, errW
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		cmd.WaitDelay = waitTimeout
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		slave.Close()
		errW.Close()
		stderr := newQueue()
		go readLines(errR, stderr)
		defer errR.Close()
		// The master is not read (its echo fits its buffer): a read in
		// progress would hold its descriptor open past Close.
		if _, err := master.Write([]byte("s3cret\n")); err != nil {
			t.Fatal(err)
		}
		// Hanging up the terminal ends the broker's input, and a hang-up
		// signals the broker: only once it has read the code (and warned
		// that it is not JSON-RPC) and the agent's prompt line, not before
		// it even got that far.
		for _, what := range []string{"editor input is not JSON-RPC", "fakeagent login pid="} {
			if _, err := stderr.take(waitTimeout, func(l []byte) bool { return bytes.Contains(l, []byte(what)) }); err != nil {
				t.Fatalf("no stderr line with %q: %v\nstderr:\n%s", what, err, bytes.Join(stderr.all(), []byte("\n")))
			}
		}
		master.Close()
		err := cmd.Wait()
		var ee *exec.ExitError
		code := 0
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if err := stderr.waitClosed(waitTimeout); err != nil {
			t.Fatalf("stderr not closed after exit: %v", err)
		}
		expectBrokered(t, stdout.String(), string(bytes.Join(stderr.all(), []byte("\n"))), runStatus{pid: cmd.Process.Pid, code: code})
	})
}

// expectBrokered checks that the broker relayed rather than ran the agent
// directly: nothing of the agent's login text reached stdout, the broker
// warned about its prompt line, and the agent never got the code.
func expectBrokered(t *testing.T, out, stderr string, status runStatus) {
	t.Helper()
	if out != "" {
		t.Errorf("stdout %q, want nothing: the agent's login text is not JSON-RPC", out)
	}
	if !strings.Contains(stderr, "not JSON-RPC") || !strings.Contains(stderr, "fakeagent login pid=") {
		t.Errorf("stderr lacks the warning about the agent's prompt line:\n%s", stderr)
	}
	if strings.Contains(stderr, "terminal login: running the agent directly") {
		t.Errorf("the broker ran the agent directly:\n%s", stderr)
	}
	if status.code == 0 {
		t.Errorf("exit status 0: the agent got a code it was never relayed")
	}
}

type runStatus struct{ pid, code int }

// runOverPipes runs the broker with args, PATH starting with dir, writes
// input to its stdin and closes it, and returns its stdout, its stderr and
// how it exited.
func runOverPipes(t *testing.T, dir string, args []string, input string) (string, string, runStatus) {
	t.Helper()
	trackSources(t)
	cmd := exec.Command(brokerBin, args...)
	cmd.Env = append(testEnv(), "PATH="+dir+string(os.PathListSeparator)+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stdout, stderr bytes.Buffer
	cmd.Stdin = strings.NewReader(input)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = waitTimeout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(waitTimeout):
		_ = cmd.Process.Kill()
		t.Fatalf("%v did not exit\nstderr:\n%s", args, stderr.String())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), runStatus{pid: cmd.Process.Pid, code: code}
}

// terminal is a process running on a pseudo-terminal, as in an editor's
// terminal pane.
type terminal struct {
	cmd    *exec.Cmd
	master *os.File
	mu     sync.Mutex
	out    bytes.Buffer
	wake   chan struct{}
	closed chan struct{}
	bound  time.Duration // on waitFor; waitTimeout if zero
}

// startOnPty starts cmd with a new pseudo-terminal as its controlling
// terminal and its stdin, stdout and stderr.
func startOnPty(t *testing.T, cmd *exec.Cmd) *terminal {
	t.Helper()
	master, slave := openPty(t)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	term := &terminal{cmd: cmd, master: master, wake: make(chan struct{}, 1), closed: make(chan struct{})}
	go func() {
		defer close(term.closed)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			select {
			case term.wake <- struct{}{}:
			default:
			}
			if err != nil { // EIO once every holder of the terminal has gone
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = master.Close()
	})
	return term
}

func (term *terminal) text() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.out.String()
}

func (term *terminal) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(cmp.Or(term.bound, waitTimeout))
	for !strings.Contains(term.text(), want) {
		select {
		case <-term.wake:
		case <-term.closed:
			if !strings.Contains(term.text(), want) {
				t.Fatalf("the terminal closed without showing %q:\n%s", want, term.text())
			}
		case <-deadline:
			t.Fatalf("the terminal never showed %q:\n%s", want, term.text())
		}
	}
}

func (term *terminal) write(t *testing.T, s string) {
	t.Helper()
	if _, err := term.master.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

// wait returns the process's exit status once it and the terminal's output
// have ended.
func (term *terminal) wait(t *testing.T) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- term.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(waitTimeout):
		t.Fatalf("the process did not exit:\n%s", term.text())
	}
	select {
	case <-term.closed:
	case <-time.After(waitTimeout):
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0
}

// openPty opens a new pseudo-terminal pair.
func openPty(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	var unlock int32
	if err := ioctl(master.Fd(), syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		t.Fatal(err)
	}
	var n uint32
	if err := ioctl(master.Fd(), syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		t.Fatal(err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return master, slave
}

func ioctl(fd uintptr, req uint, arg unsafe.Pointer) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, uintptr(req), uintptr(arg)); errno != 0 {
		return errno
	}
	return nil
}
