//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/acp-broker/acp-broker/session"
)

// TestAgentStartErrorStatus: only the system's refusal to run the agent's
// file gives a shell's status (127: it or its interpreter is missing; 126:
// it cannot be run); a failure of the broker's own on the way there (its
// keeper executable missing, no descriptors left for the pipes) is 1.
func TestAgentStartErrorStatus(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	badInterpreter := write("bad-interpreter.sh", "#!/no/such/interpreter\n")
	junk := write("junk", "not a program, and no #! line\n")
	ok := write("ok.sh", "#!/bin/sh\nexit 0\n")
	start := func(path, keeper string) error {
		a, err := session.StartAgent(path, []string{path}, keeper)
		if err == nil {
			t.Fatalf("%s started (under keeper %q): %v", path, keeper, a)
		}
		return err
	}
	for _, c := range []struct {
		what string
		err  error
		want int
	}{
		{"a missing #! interpreter", start(badInterpreter, ""), 127},
		{"a file the system does not run", start(junk, ""), 126},
		{"a missing keeper", start(ok, filepath.Join(dir, "no-such-keeper")), 1},
		{"no descriptors for the pipes", fmt.Errorf("starting agent: %w", os.NewSyscallError("pipe2", syscall.EMFILE)), 1},
	} {
		got := -1
		if ue := (*exitError)(nil); errors.As(agentStartError(c.err), &ue) {
			got = ue.code
		}
		if got != c.want {
			t.Errorf("%s (%v): exit status %d, want %d", c.what, c.err, got, c.want)
		}
	}
}
