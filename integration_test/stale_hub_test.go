//go:build linux

package integration

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

	// The next broker removes it in the background, and says so.
	next := startDecider(t, deciderOptions{env: env, args: []string{"--log-level", "debug"}})
	next.WaitStderr("the removal of "+killedDir, func(line string) bool {
		return strings.Contains(line, "removed a dead broker's MCP socket directory") && strings.Contains(line, killedDir)
	})
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

// TestStaleHubCleanupNeverHoldsTheStartup: the agent runs as the broker's
// user and shares its temporary directory, so it can plant, where a dead
// hub's lock file would be, a FIFO, which waits for a writer when opened.
// The next broker still relays the session, and leaves the FIFO.
func TestStaleHubCleanupNeverHoldsTheStartup(t *testing.T) {
	t.Parallel()
	tmp, err := os.MkdirTemp("", "acpb-hubs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	planted := filepath.Join(tmp, "acp-broker-mcp-planted")
	if err := os.Mkdir(planted, 0o700); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(planted, "lock")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(planted, "s"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	// As a dead broker's would be, an hour after it died.
	then := time.Now().Add(-time.Hour)
	if err := os.Chtimes(planted, then, then); err != nil {
		t.Fatal(err)
	}

	d := startDecider(t, deciderOptions{env: []string{"TMPDIR=" + tmp}, args: []string{"--log-level", "debug"}})
	d.EditorToAgent(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[]}}`)
	d.AgentToEditor(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`)
	d.WaitStderr("the end of the clean-up", func(line string) bool {
		return strings.Contains(line, "looked for dead brokers' MCP socket directories")
	})
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode().Type() != fs.ModeNamedPipe {
		t.Errorf("the planted FIFO is gone or changed: %v, %v", fi, err)
	}
}

func mustExist(t *testing.T, path, what string) {
	t.Helper()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("%s is gone: %v", what, err)
	}
}
