//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// longGrace is a --shutdown-grace or --kill-grace no test waits out: a
// broker that exits within a session's wait (waitTimeout, a minute, which
// Wait enforces) did not wait for it, however loaded the machine.
const longGrace = time.Hour

// TestSignalInEveryPhase: SIGTERM, SIGINT and SIGHUP sent to the broker
// reach the agent whatever the broker is doing: before the editor said
// anything, mid-session, after the editor closed stdin while the broker
// waits out --shutdown-grace, and after the broker's own SIGTERM while it
// waits out --kill-grace. The agent dies of the signal and the broker exits
// at once with the agent's status, 128 + the signal, without waiting for
// the graces it was in.
func TestSignalInEveryPhase(t *testing.T) {
	t.Parallel()
	phases := []struct {
		name string
		// onSignal is the fake agent's -on-signal; a phase that needs the
		// agent to outlive the broker's own SIGTERM ignores signals, so it
		// is ended by the broker's SIGKILL after the signal under test
		// reached it.
		onSignal string
		reach    func(t *testing.T, s *session)
		status   func(sig syscall.Signal) int
	}{
		{"before_initialize", "die", func(t *testing.T, s *session) {}, died},
		{"mid_session", "die", func(t *testing.T, s *session) {
			s.EditorToAgent(msgInitialize)
			s.AgentToEditor(msgInitialized)
		}, died},
		{"after_stdin_closed", "die", func(t *testing.T, s *session) {
			s.EditorToAgent(msgInitialize)
			s.AgentToEditor(msgInitialized)
			s.CloseEditor()
			s.waitEvent('E')
		}, died},
		{"during_kill_grace", "ignore", func(t *testing.T, s *session) {
			s.EditorToAgent(msgInitialize)
			s.AgentToEditor(msgInitialized)
			s.CloseEditor()
			s.waitEvent('E')
			if got := s.waitEvent('S'); string(got[1:]) != "15" {
				t.Fatalf("agent got signal %s from the broker, want its SIGTERM (15)", got[1:])
			}
		}, func(syscall.Signal) int { return 128 + int(syscall.SIGKILL) }},
	}
	for _, phase := range phases {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
			t.Run(phase.name+"/"+sig.String(), func(t *testing.T) {
				t.Parallel()
				shutdownGrace, killGrace := longGrace, longGrace
				if phase.name == "during_kill_grace" {
					// The broker's SIGTERM comes soon; its SIGKILL ends the
					// test's agent, which ignores every signal.
					shutdownGrace, killGrace = 100*time.Millisecond, 3*time.Second
				}
				s := startFake(t, options{
					broker:     true,
					brokerArgs: []string{"--shutdown-grace", shutdownGrace.String(), "--kill-grace", killGrace.String()},
					agentArgs:  []string{"-on-eof", "ignore", "-on-signal", phase.onSignal},
				})
				phase.reach(t, s)
				if err := syscall.Kill(s.cmd.Process.Pid, sig); err != nil {
					t.Fatal(err)
				}
				if got := s.waitEvent('S'); string(got[1:]) != strconv.Itoa(int(sig)) {
					t.Errorf("agent got signal %s, want %d (%v)", got[1:], sig, sig)
				}
				// Within Wait's bound, so not after a longGrace.
				if got, want := s.Wait(), phase.status(sig); got != want {
					t.Errorf("broker exited with status %d, want %d\n%s", got, want, s.debug())
				}
				s.waitStreams()
			})
		}
	}
}

// died is the status of an agent killed by sig.
func died(sig syscall.Signal) int { return 128 + int(sig) }

// TestExitStatusMirrorsAgent: the broker exits with the agent's own exit
// code whatever it is, and with 128 + the signal when a signal ended the
// agent, also when the agent exits after the editor left.
func TestExitStatusMirrorsAgent(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		closeEditor bool
		end         func(s *session)
		status      int
	}{
		{"exit_1", false, func(s *session) { s.AgentExit(1) }, 1},
		{"exit_125", false, func(s *session) { s.AgentExit(125) }, 125},
		{"exit_255", false, func(s *session) { s.AgentExit(255) }, 255},
		{"killed_by_own_sigterm", false, func(s *session) { s.control(command('K', strconv.Itoa(int(syscall.SIGTERM)))) }, 128 + 15},
		{"exit_7_after_editor_left", true, func(s *session) { s.AgentExit(7) }, 7},
		{"sigkill_after_editor_left", true, func(s *session) { s.control(command('K', strconv.Itoa(int(syscall.SIGKILL)))) }, 128 + 9},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := startFake(t, options{broker: true, brokerArgs: []string{"--shutdown-grace", longGrace.String()},
				agentArgs: []string{"-on-eof", "ignore"}})
			s.EditorToAgent(msgInitialize)
			s.AgentToEditor(msgInitialized)
			if c.closeEditor {
				s.CloseEditor()
				s.waitEvent('E')
			}
			c.end(s)
			if got := s.Wait(); got != c.status {
				t.Errorf("broker exited with status %d, want %d\n%s", got, c.status, s.debug())
			}
		})
	}
}

// TestSignalReachesLeftovers: once the agent has exited, the broker ends
// what it left running with SIGTERM, then SIGKILL after --kill-grace; a
// signal the broker gets meanwhile reaches those leftovers at once. Here a
// leftover ignores SIGTERM (it only notes it) and exits on SIGINT, which the
// broker passes on.
func TestSignalReachesLeftovers(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "got-sigint")
	s := startFake(t, options{broker: true, brokerArgs: []string{"--kill-grace", longGrace.String()}})
	s.EditorToAgent(msgInitialize)
	s.AgentToEditor(msgInitialized)
	leftover := fmt.Sprintf(`trap "echo > %[1]s.term" TERM; trap "echo > %[1]s; exit 0" INT; echo > %[1]s.ready; while :; do sleep 0.05; done`, marker)
	spec, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", leftover}})
	s.control(command('C', string(spec)))
	waitForFile(t, marker+".ready")
	s.AgentExit(0)
	// The broker is in --kill-grace once the leftover has its SIGTERM.
	waitForFile(t, marker+".term")
	if err := syscall.Kill(s.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// Within Wait's bound, so not after --kill-grace.
	if got := s.Wait(); got != 0 {
		t.Errorf("broker exited with status %d, want the agent's 0\n%s", got, s.debug())
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the leftover never got the SIGINT: %v", err)
	}
}

func waitForFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(waitTimeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s never appeared", path)
}
