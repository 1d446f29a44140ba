package rules

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestGeminiStatedDirectory: a Gemini CLI shell request (no rawInput, the
// command in the title) runs where its "[in DIR]" content says, so its
// arguments are read there: deny path rules see them, and a directory
// outside the session's is an access of its own. A statement whose
// directory cannot be told from the model's description after it is not
// understood, and only title commands read it.
func TestGeminiStatedDirectory(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	must(t, err)
	home := filepath.Join(dir, "home")
	repo := filepath.Join(dir, "repo")
	scratch := filepath.Join(home, ".gemini", "tmp", "repo")
	// A directory whose name holds the "] (" of a description.
	tricky := filepath.Join(repo, "src] (x")
	hooks := filepath.Join(repo, ".git", "hooks")
	for _, d := range []string{filepath.Join(repo, "src"), filepath.Join(repo, "gen"), scratch, tricky, hooks, filepath.Join(repo, ".git", "objects")} {
		must(t, os.MkdirAll(d, 0o755))
	}
	must(t, os.WriteFile(filepath.Join(repo, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
	f, err := Parse("user.toml", User, `
[[rule]]
id = "touch"
decision = "allow"
command = "touch *"

[[rule]]
id = "no-gen"
decision = "deny"
path = "./gen/**"
`)
	must(t, err)
	p := NewPolicy([]*File{f}, home, nil)
	ctx := Context{Cwd: repo, Home: home}
	gemini := func(command string, texts ...string) string {
		content := []any{}
		for _, text := range texts {
			content = append(content, map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": text}})
		}
		b, _ := json.Marshal(map[string]any{"toolCallId": "run_shell_command_1", "kind": "execute", "title": command, "status": "pending", "content": content, "locations": []any{}})
		return string(b)
	}
	const touch, redirect = "touch marker.txt", "echo made > out.txt"
	for _, c := range []struct {
		name, call string
		want       Decision
		dir        string
	}{
		{"no dir_path: the session's directory", gemini(touch, "[current working directory /elsewhere] (make it)"), Allow, repo},
		{"no content at all", gemini(touch), Allow, repo},
		{"a subdirectory", gemini(touch, "[in src]"), Allow, repo + "/src"},
		{"a subdirectory, with a description", gemini(touch, "[in src] (make the marker)"), Allow, repo + "/src"},
		{"in the background", gemini(touch, "[in src] [background]"), Allow, repo + "/src"},
		{"a description with brackets, in the background", gemini(touch, "[in src] (make [it]) [background]"), Allow, repo + "/src"},
		{"a redirection, in the session's directory", gemini(redirect), Ask, repo},
		{"a redirection into a denied directory", gemini(redirect, "[in gen]"), Deny, repo + "/gen"},
		{"a redirection into a denied directory, by ..", gemini(redirect, "[in src/../gen] (x)"), Deny, repo + "/gen"},
		{"a redirection into a denied directory, absolute", gemini(redirect, "[in "+repo+"/gen]"), Deny, repo + "/gen"},
		{"a repository's hooks", gemini("touch pre-commit", "[in .git/hooks]"), Ask, hooks},
		{"the same, in the session's directory", gemini("touch pre-commit"), Allow, repo},
		{"gemini-cli's own temporary directory", gemini(touch, "[in "+scratch+"]"), Ask, scratch},
		{"a reading that names no directory yields to one that does", gemini(touch, "[in src] (z] (y)"), Allow, repo + "/src"},
		{"the same, the other way", gemini(touch, "[in src] (x] [background]"), Allow, tricky},
		{"two readings that both name a directory", gemini(touch, "[in src] (x] (y)"), Ask, repo},
		{"an empty directory", gemini(touch, "[in ] (x)"), Ask, repo},
		{"two statements that differ", gemini(touch, "[in src]", "[in gen]"), Ask, repo + "/src"},
		{"a tilde is a directory name", gemini(touch, "[in ~]"), Allow, repo + "/~"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := ReadToolCall(toolCall(t, c.call), ctx)
			if v := p.Decide(req); v.Decision != c.want {
				t.Errorf("decision %s (%s: %s), want %s; paths %+v", v.Decision, v.Source, v.Reason, c.want, req.Paths)
			}
			if req.Dir != c.dir {
				t.Errorf("read in %q, want %q", req.Dir, c.dir)
			}
		})
	}

	// Only a command read from the title: Claude Code's and Codex's carry
	// theirs in rawInput, and a text of theirs says nothing of where.
	claude := `{"kind":"execute","title":"echo made > out.txt","rawInput":{"command":"echo made > out.txt"},"content":[{"type":"content","content":{"type":"text","text":"[in gen]"}}]}`
	if req := ReadToolCall(toolCall(t, claude), ctx); req.Dir != repo {
		t.Errorf("a rawInput command read in %q, want the session's directory", req.Dir)
	}
	// A stated directory outside the session's is reported as such.
	req := ReadToolCall(toolCall(t, gemini(touch, "[in "+scratch+"]")), ctx)
	if n := len(req.Paths); n == 0 || !req.Paths[n-1].WorkDir || req.Paths[n-1].From != statedDirFrom {
		t.Errorf("the stated directory is not an access of its own: %+v", req.Paths)
	}
}
