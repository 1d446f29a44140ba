package permission

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acp-broker/acp-broker/rules"
)

// TestRuleSourceReloadsTheProjectFilesFound: a running broker's rules for a
// session in repo/sub follow the project files the lookup finds: a file that
// appears at the repository's root applies, its edit applies, and a .git
// that appears in sub (making sub a repository of its own) ends the lookup
// there, as a fresh load would.
func TestRuleSourceReloadsTheProjectFilesFound(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	repo := filepath.Join(home, "repo")
	sub := filepath.Join(repo, "sub")
	for _, d := range []string{filepath.Join(repo, ".git"), sub} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	loc := rules.Locations{User: filepath.Join(dir, "conf", "config.toml"), StateDir: filepath.Join(dir, "state"), Home: home}
	src, _, err := NewRuleSource(rules.LoadOptions{Locations: loc}, sub, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	decide := func() rules.Decision {
		t.Helper()
		p, err := src.Policy(sub)
		if err != nil {
			t.Fatal(err)
		}
		req := rules.ReadToolCall(map[string]json.RawMessage{"kind": json.RawMessage(`"execute"`), "rawInput": json.RawMessage(`{"command":"make deploy"}`)}, rules.Context{Cwd: sub, Home: home})
		return p.Decide(req).Decision
	}
	write := func(path, content string) {
		t.Helper()
		if err := rules.WriteFileAtomic(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(RecheckInterval)
	}
	if d := decide(); d != rules.Ask {
		t.Fatalf("before any project file: %s", d)
	}
	write(filepath.Join(repo, rules.ProjectFileName), "[[rule]]\ndecision = \"deny\"\ncommand = \"make deploy\"\n")
	if d := decide(); d != rules.Deny {
		t.Errorf("after the repository's file appeared: %s, want deny", d)
	}
	write(filepath.Join(repo, rules.ProjectFileName), "[[rule]]\ndecision = \"ask\"\ncommand = \"make deploy\"\n")
	if d := decide(); d != rules.Ask {
		t.Errorf("after its edit: %s, want ask", d)
	}
	write(filepath.Join(repo, rules.ProjectFileName), "[[rule]]\ndecision = \"deny\"\ncommand = \"make deploy\"\n")
	if d := decide(); d != rules.Deny {
		t.Fatalf("after the edit back: %s, want deny", d)
	}
	// (attack) The agent runs git init in sub: inside home the walk goes on
	// to home, so the repository's deny stands.
	write(filepath.Join(sub, ".git"), "gitdir: elsewhere\n")
	if d := decide(); d != rules.Deny {
		t.Errorf("after a .git appeared in sub: %s, want deny (the repository's file still applies)", d)
	}
}

// TestRuleSourceKeepsTheDeniesOfAProjectFileNoLongerLookedUp: outside home,
// a .git that appears in the session's directory ends the lookup there, but
// the repository's file that was in force keeps its deny rules (not its
// allows) until the broker restarts, and is warned about.
func TestRuleSourceKeepsTheDeniesOfAProjectFileNoLongerLookedUp(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	repo := filepath.Join(dir, "srv", "repo")
	sub := filepath.Join(repo, "sub")
	for _, d := range []string{filepath.Join(repo, ".git"), sub, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := rules.WriteFileAtomic(filepath.Join(repo, rules.ProjectFileName), []byte("[[rule]]\ndecision = \"deny\"\ncommand = \"make deploy\"\n")); err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	loc := rules.Locations{User: filepath.Join(dir, "conf", "config.toml"), StateDir: filepath.Join(dir, "state"), Home: home}
	src, _, err := NewRuleSource(rules.LoadOptions{Locations: loc}, sub, slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	decide := func() rules.Decision {
		t.Helper()
		p, err := src.Policy(sub)
		if err != nil {
			t.Fatal(err)
		}
		req := rules.ReadToolCall(map[string]json.RawMessage{"kind": json.RawMessage(`"execute"`), "rawInput": json.RawMessage(`{"command":"make deploy"}`)}, rules.Context{Cwd: sub, Home: home})
		return p.Decide(req).Decision
	}
	if d := decide(); d != rules.Deny {
		t.Fatalf("before: %s, want deny", d)
	}
	if err := os.Mkdir(filepath.Join(sub, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(RecheckInterval)
	if d := decide(); d != rules.Deny {
		t.Errorf("after a .git appeared in sub: %s, want deny (kept from the file in force before)", d)
	}
	// A later reload, for another change, keeps it too.
	if err := rules.WriteFileAtomic(filepath.Join(sub, rules.ProjectFileName), []byte("[[rule]]\ndecision = \"ask\"\ncommand = \"ls\"\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(RecheckInterval)
	if d := decide(); d != rules.Deny {
		t.Errorf("after another reload: %s, want deny", d)
	}
	if !strings.Contains(logged.String(), "level=WARN") || !strings.Contains(logged.String(), "no longer looked up") {
		t.Errorf("no warning logged about the file dropped from the lookup:\n%s", logged.String())
	}
}
