//go:build linux

package integration

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestDeadBrokersSocketDirectoryIsRemovedByTheNext: a broker killed with
// SIGKILL cannot remove the directory of its MCP proxies' socket; the next
// broker of the user to start removes it, and leaves a live broker's alone.
func TestDeadBrokersSocketDirectoryIsRemovedByTheNext(t *testing.T) {
	t.Parallel()
	// A temporary directory of the test's own, where these brokers make
	// their sockets' directories and look for dead ones.
	tmp, err := os.MkdirTemp("", "acpb-hubs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	env := []string{"TMPDIR=" + tmp}
	socketDir := func(d *decider) string {
		return filepath.Dir(entryNamed(t, d.setup, "notes").proxyFlag(t, "--socket"))
	}

	killed := startDecider(t, deciderOptions{mcpServers: notesServer, env: env})
	killedDir := socketDir(killed)
	live := startDecider(t, deciderOptions{mcpServers: notesServer, env: env})
	liveDir := socketDir(live)
	if killedDir == liveDir || filepath.Dir(killedDir) != tmp {
		t.Fatalf("the brokers' socket directories are %s and %s; want two in %s", killedDir, liveDir, tmp)
	}
	// The second broker started while the first was alive: it left the
	// first one's directory.
	mustExist(t, killedDir, "a live broker's socket directory, after another broker started")

	if err := killed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-killed.exited
	mustExist(t, killedDir, "the directory of a broker killed with SIGKILL (which cannot remove it)")

	// startDecider returns once the broker relays the session: its start-up
	// is over.
	startDecider(t, deciderOptions{env: env})
	if _, err := os.Lstat(killedDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the killed broker's socket directory %s is still there after the next broker started (%v)", killedDir, err)
	}
	mustExist(t, liveDir, "a live broker's socket directory, after another broker started")
	c, err := net.Dial("unix", filepath.Join(liveDir, "s"))
	if err != nil {
		t.Fatalf("the live broker's hub no longer listens: %v", err)
	}
	c.Close()
}

func mustExist(t *testing.T, path, what string) {
	t.Helper()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("%s is gone: %v", what, err)
	}
}
