//go:build linux

package integration

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestAgentTreeDiesWithKilledBroker: an editor that kills the broker with
// SIGKILL, its pid alone (Emacs's delete-process) or its whole process group
// (Zed's killpg), mid-session or while the broker waits out the shutdown
// grace, leaves nothing of the agent's running: not the agent, not a child in
// its process group, not one in a session of its own, not a daemon that
// double-forked into a new session (re-parented when its parent exited), and
// not whatever process stands between the broker and the agent. All are gone
// a second after the broker died.
func TestAgentTreeDiesWithKilledBroker(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		group       bool // kill the broker's process group, not only its pid
		closeEditor bool
	}{
		{"sigkill_broker_pid", false, false},
		{"sigkill_broker_group", true, false},
		{"sigkill_broker_pid_after_stdin_closed", false, true},
		{"sigkill_broker_group_after_stdin_closed", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := startFake(t, options{
				broker:     true,
				brokerArgs: []string{"--shutdown-grace", longGrace.String()},
				// The agent would outlive a polite request: only a kill ends it.
				agentArgs: []string{"-on-eof", "ignore", "-on-signal", "ignore"},
			})
			s.EditorToAgent(msgInitialize)
			s.AgentToEditor(msgInitialized)

			tree := map[string]int{"agent": s.ready.Pid}
			if ppid := parentOf(t, s.ready.Pid); ppid != s.cmd.Process.Pid {
				tree["the agent's parent below the broker"] = ppid
			}
			s.control(command('G', ""))
			var same, own int
			if _, err := fmt.Sscanf(string(s.waitEvent('G')[1:]), "%d %d", &same, &own); err != nil {
				t.Fatal(err)
			}
			tree["child in the agent's group"], tree["child in its own session"] = same, own
			s.control(command('D', ""))
			daemon, err := strconv.Atoi(string(s.waitEvent('D')[1:]))
			if err != nil {
				t.Fatal(err)
			}
			tree["double-forked daemon"] = daemon
			fds := map[string]int{}
			for what, pid := range tree {
				fd, err := pidfdOpen(pid)
				if err != nil {
					t.Fatalf("pidfd_open(%s %d): %v", what, pid, err)
				}
				fds[what] = fd
				t.Cleanup(func() {
					_ = syscall.Close(fd)
					_ = syscall.Kill(pid, syscall.SIGKILL) // in case the broker left it
				})
			}
			if c.closeEditor {
				s.CloseEditor()
				s.waitEvent('E')
			}

			target := s.cmd.Process.Pid
			if c.group {
				target = -target
			}
			if err := syscall.Kill(target, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			select {
			case <-s.exited:
			case <-time.After(s.wait):
				t.Fatal("the broker did not die of SIGKILL")
			}
			died := time.Now()
			for what, fd := range fds {
				// The keeper ends the tree once it hears of the broker's
				// death; on a loaded machine that takes what it takes.
				if !waitPidfd(fd, time.Until(died.Add(waitTimeout))) {
					t.Errorf("%s (pid %d) still running %v after the broker was killed", what, tree[what], waitTimeout)
				}
			}
		})
	}
}

// parentOf returns pid's parent, from /proc.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	fields := bytes.Fields(stat[bytes.LastIndexByte(stat, ')')+1:])
	ppid, err := strconv.Atoi(string(fields[1]))
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}
