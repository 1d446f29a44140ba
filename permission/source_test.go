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
	if p, err := src.Policy(repo); err != nil || p.ProjectError == nil {
		t.Fatalf("Policy: %v, %v", p, err)
	}
	if n := notes(); len(n) != 1 {
		t.Fatalf("noted again for another file's change: %+v", n)
	}
	// The project file changes: its ignored [ask] is noted.
	time.Sleep(10 * time.Millisecond)
	write(project, "[ask]\nroute = \"channels\"\n")
	if p, err := src.Policy(repo); err != nil || p.ProjectError != nil {
		t.Fatalf("Policy: %v, %v", p, err)
	}
	if n := notes(); len(n) != 2 || !strings.Contains(n[1].Reason, "ignored [ask]") {
		t.Fatalf("notes = %+v", n)
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
