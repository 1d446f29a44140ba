//go:build linux

package mcp

import (
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestHubListensOnFirstProxiedServer: a broker's hub opens no socket at
// start-up; the first set-up that names a stdio server opens it, in a
// fresh 0700 directory, and later ones reuse it. A set-up without one
// leaves the hub closed.
func TestHubListensOnFirstProxiedServer(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	h := &Hub{Exe: "/opt/acp-broker", Catalog: CatalogIn(t.TempDir()), Log: slog.New(slog.DiscardHandler), Policy: defaultPolicy, Governor: &fakeGovernor{}}
	t.Cleanup(func() { h.Close() })

	none := `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/work/proj","mcpServers":[{"type":"http","name":"web","url":"https://mcp.example/x","headers":[]}]}}`
	if out, _, _ := rewrite(t, h, none); out != nil {
		t.Fatalf("an http server was rewritten: %s", out)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 || h.Path() != "" {
		t.Fatalf("the hub opened a socket (%q) before any stdio server was proxied: %v", h.Path(), entries)
	}

	register(t, h, "notes", "s1", "notes-server")
	path := h.Path()
	if filepath.Dir(filepath.Dir(path)) != tmp {
		t.Fatalf("socket %q is not in a fresh directory under TMPDIR %s", path, tmp)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("socket directory: %v, %v; want mode 0700", fi, err)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the hub does not listen on %s: %v", path, err)
	}
	c.Close()
	register(t, h, "other", "s2", "other-server")
	if h.Path() != path {
		t.Errorf("a second set-up opened another socket: %s, then %s", path, h.Path())
	}
}

// TestClosedHubRefusesSetUps: once the hub is closed, a set-up naming a
// stdio server is refused rather than sent with a socket nobody serves.
func TestClosedHubRefusesSetUps(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	h := &Hub{Exe: "/opt/acp-broker", Log: slog.New(slog.DiscardHandler), Policy: defaultPolicy, Governor: &fakeGovernor{}}
	h.Close()
	frame := `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/work/proj","mcpServers":[{"name":"notes","command":"notes-server","args":[],"env":[]}]}}`
	m := parse(t, frame)
	if out, _, _, err := h.Rewrite(m); err == nil {
		t.Fatalf("a closed hub rewrote the set-up: %s", out)
	}
}
