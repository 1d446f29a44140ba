package permission

import (
	"bytes"
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

// TestRuleSourceNotesProjectProblemsOncePerVersion: a broken project file in
// the start directory does not fail the rule source; its problem is noted in
// the audit log once per version of the file, not at every reload another
// file causes.
func TestRuleSourceNotesProjectProblemsOncePerVersion(t *testing.T) {
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	project := filepath.Join(repo, rules.ProjectFileName)
	write := func(path, content string) {
		t.Helper()
		if err := rules.WriteFileAtomic(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	write(project, "[ask]\nroute = \"channels\"\n[[rule]]\ncomand = \"x\"\n")
	loc := rules.Locations{User: filepath.Join(dir, "config.toml"), StateDir: filepath.Join(dir, "state"), Home: filepath.Join(dir, "home")}
	src, warnings, err := NewRuleSource(rules.LoadOptions{Locations: loc}, repo, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("a broken project file stopped the rule source: %v", err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "is asked until the file is fixed") {
		t.Fatalf("warnings = %q", warnings)
	}
	var log bytes.Buffer
	src.AuditTo(&Audit{w: nopCloser{&log}}, "agent")
	notes := func() []Record {
		t.Helper()
		var out []Record
		for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
			if line == "" {
				continue
			}
			var r Record
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		return out
	}
	if n := notes(); len(n) != 1 || n[0].Method != "rules/load" || n[0].Decision != "warning" || !strings.Contains(n[0].Reason, "unknown key") {
		t.Fatalf("notes = %+v", n)
	}
	// Another file changes: reloaded, not noted again.
	write(loc.User, "# changed\n")
	time.Sleep(RecheckInterval)
	if p, err := src.Policy(repo); err != nil || p.ProjectError == nil {
		t.Fatalf("Policy: %v, %v", p, err)
	}
	if n := notes(); len(n) != 1 {
		t.Fatalf("noted again for another file's change: %+v", n)
	}
	// The project file changes: its ignored [ask] is noted.
	time.Sleep(10 * time.Millisecond)
	write(project, "[ask]\nroute = \"channels\"\n")
	time.Sleep(RecheckInterval)
	if p, err := src.Policy(repo); err != nil || p.ProjectError != nil {
		t.Fatalf("Policy: %v, %v", p, err)
	}
	if n := notes(); len(n) != 2 || !strings.Contains(n[1].Reason, "ignored [ask]") {
		t.Fatalf("notes = %+v", n)
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// TestPolicyRechecksFilesAtMostEveryInterval: the rules of a directory are
// checked for changes at most every RecheckInterval, so back-to-back
// requests (and the mode guard, asked at every editor message) cost no stat
// of the rule files; an edit applies from RecheckInterval after it, and at
// once after Changed (a remembered answer this broker stored).
func TestPolicyRechecksFilesAtMostEveryInterval(t *testing.T) {
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	// The broker's own files are protected paths: apart from the project.
	user := filepath.Join(dir, "conf", "config.toml")
	if err := os.MkdirAll(filepath.Dir(user), 0o700); err != nil {
		t.Fatal(err)
	}
	rule := func(decision string) string {
		return "[[rule]]\nid = \"make-" + decision + "\"\ndecision = \"" + decision + "\"\ncommand = \"make\"\n"
	}
	write := func(content string) {
		t.Helper()
		if err := rules.WriteFileAtomic(user, []byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	write(rule("allow"))
	loc := rules.Locations{User: user, StateDir: filepath.Join(dir, "conf", "state"), Home: filepath.Join(dir, "conf", "home")}
	src, _, err := NewRuleSource(rules.LoadOptions{Locations: loc}, repo, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ruleID := func() string {
		t.Helper()
		p, err := src.Policy(repo)
		if err != nil {
			t.Fatal(err)
		}
		req := rules.ReadToolCall(map[string]json.RawMessage{"kind": json.RawMessage(`"execute"`), "rawInput": json.RawMessage(`{"command":"make"}`)}, rules.Context{Cwd: repo, Home: loc.Home})
		v := p.Decide(req)
		if v.Rule == nil {
			t.Fatalf("no rule decided make: %+v", v)
		}
		return v.Rule.ID
	}
	if id := ruleID(); id != "make-allow" {
		t.Fatalf("decided by %q, want make-allow", id)
	}

	// A stat allocates (its FileInfo): a policy that is not rechecked does
	// not. Runs that cross an interval recheck (some 50 allocations each),
	// which a busy machine that pauses the test makes more likely: the
	// fewest of a few rounds is the cost of a call.
	allocs := testing.AllocsPerRun(100, func() { _, _ = src.Policy(repo) })
	for range 4 {
		allocs = min(allocs, testing.AllocsPerRun(100, func() { _, _ = src.Policy(repo) }))
	}
	if allocs >= 1 {
		t.Errorf("Policy allocates %.0f times per call: it stats the files every time", allocs)
	}

	write(rule("deny"))
	time.Sleep(RecheckInterval)
	if id := ruleID(); id != "make-deny" {
		t.Errorf("%v after the edit, decided by %q, want make-deny", RecheckInterval, id)
	}

	write(rule("allow"))
	src.Changed()
	if id := ruleID(); id != "make-allow" {
		t.Errorf("after Changed, decided by %q, want make-allow", id)
	}
}
