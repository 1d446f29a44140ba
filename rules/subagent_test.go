package rules

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestForSubagent(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	project, lib, out := filepath.Join(root, "p"), filepath.Join(root, "lib"), filepath.Join(root, "out")
	bare := filepath.Join(project, "bare.git")
	for _, d := range []string{filepath.Join(project, "wt"), lib, out, filepath.Join(bare, "objects")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(bare, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(out, filepath.Join(project, "link")); err != nil {
		t.Fatal(err)
	}
	parent := Context{Cwd: project, Roots: []string{lib}}
	for _, c := range []struct {
		name, workDir string
		workDirs      []string
		cwd, dir      string
		roots         []string
	}{
		{"inherited", project, []string{lib}, project, "", []string{lib}},
		{"worktree_inside", filepath.Join(project, "wt"), []string{lib, out}, filepath.Join(project, "wt"), "", []string{lib}},
		{"in_the_additional_directory", lib, nil, lib, "", nil},
		{"outside", out, []string{out}, project, out, []string{lib}},
		{"through_a_link", filepath.Join(project, "link"), nil, project, filepath.Join(project, "link"), []string{lib}},
		{"dot_dot", project + "/../out", nil, project, project + "/../out", []string{lib}},
		{"in_a_bare_repository", bare, nil, project, bare, []string{lib}},
		{"relative", "wt", nil, project, "wt", []string{lib}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := parent.ForSubagent(c.workDir, c.workDirs)
			if got.Cwd != c.cwd || got.Dir != c.dir || len(got.Roots) != len(c.roots) || (len(c.roots) > 0 && got.Roots[0] != c.roots[0]) {
				t.Errorf("ForSubagent(%q, %q) = cwd %q, dir %q, roots %q; want %q, %q, %q", c.workDir, c.workDirs, got.Cwd, got.Dir, got.Roots, c.cwd, c.dir, c.roots)
			}
		})
	}
	// Outside, a relative path is made absolute there, and the directory
	// is an access of its own.
	req := ReadToolCall(map[string]json.RawMessage{"kind": json.RawMessage(`"edit"`), "locations": json.RawMessage(`[{"path":"src/a.go"}]`)}, parent.ForSubagent(out, nil))
	var paths []string
	for _, p := range req.Paths {
		paths = append(paths, p.Abs)
	}
	if len(paths) != 2 || paths[0] != filepath.Join(out, "src/a.go") || paths[1] != out {
		t.Errorf("paths of an edit of src/a.go by a subagent in %s: %q", out, paths)
	}
	if req := ReadToolCall(map[string]json.RawMessage{"kind": json.RawMessage(`"read"`)}, parent.ForSubagent("wt", nil)); len(req.NotUnderstood) == 0 {
		t.Error("a subagent's relative cwd is understood")
	}
}
