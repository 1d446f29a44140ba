//go:build linux

package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAgentStartsWhileRulesLoad: the broker starts the agent before it has
// read its rule files, so the two start up at once; and when a file then
// turns out broken, the broker stops with the file's position as always,
// having relayed nothing: the agent never sees the editor's initialize, and
// it is gone when the broker exits. The rule file is a named pipe, so the
// broker is held reading it until the test has seen the agent run.
func TestAgentStartsWhileRulesLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "rules.toml")
	if err := syscall.Mkfifo(file, 0o600); err != nil {
		t.Fatal(err)
	}
	ln := listenCtl(t)
	cmd := exec.Command(brokerBin, "--config", file, "--audit", "off", "--", "fakeagent", "-ctl", ln.Addr().String())
	cmd.Env = testEnv()
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(msgInitialize+"\n"), &stdout, &stderr
	cmd.WaitDelay = waitTimeout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// The agent reports ready while the broker still waits for the file.
	_ = ln.SetDeadline(time.Now().Add(waitTimeout))
	conn, err := ln.Accept()
	if err != nil {
		// Unblock the broker so that it exits.
		if f, err := os.OpenFile(file, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		<-exited
		t.Fatalf("the agent did not start while the broker read its rules: %v\nstderr:\n%s", err, stderr.String())
	}
	defer conn.Close()
	reports := bufio.NewReader(conn)
	ready, err := reports.ReadBytes('\n')
	if err != nil || ready[0] != 'R' {
		t.Fatalf("first report from the agent: %q, %v; want R (ready)", ready, err)
	}
	var agent struct{ Pid int }
	if err := json.Unmarshal(ready[1:], &agent); err != nil {
		t.Fatal(err)
	}

	w, err := os.OpenFile(file, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteString("[[rule]]\nid = \"x\"\ndecision = \"allow\"\ncomand = \"make\"\n"); err != nil {
		t.Fatal(err)
	}
	w.Close()

	err = <-exited
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("exit: %v, want status 1\nstderr:\n%s", err, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout is not empty: %q", stdout.String())
	}
	want := "acp-broker: error: FILE:4:1: unknown key \"comand\" in [[rule]]\nacp-broker: hint: did you mean \"command\"?\n"
	if got := strings.ReplaceAll(stderr.String(), file, "FILE"); got != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", got, want)
	}
	agentGotNothing(t, conn, reports)
	if err := syscall.Kill(agent.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the agent (pid %d) outlived the broker: kill 0: %v", agent.Pid, err)
	}
}

// listenCtl opens a control socket for fakeagent.
func listenCtl(t *testing.T) *net.UnixListener {
	t.Helper()
	addr := fmt.Sprintf("@acpb-it-%d-%d", os.Getpid(), ctlCounter.Add(1))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// agentGotNothing reads a stopped fakeagent's reports to their end (its
// death closes them) and fails on any line it read from stdin.
func agentGotNothing(t *testing.T, conn net.Conn, reports *bufio.Reader) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(waitTimeout))
	for {
		line, err := reports.ReadBytes('\n')
		if len(line) > 0 && (line[0] == 'I' || line[0] == 'i') {
			t.Errorf("the agent was sent %q", line[1:])
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("the agent outlived the broker: its control connection is still open")
		}
		if err != nil {
			return
		}
	}
}
