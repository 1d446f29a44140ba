package rules

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestRequestDirectoryNeverMovesTheSessionsAnchors: a request's own cwd
// (Codex's rawInput.cwd) makes its relative paths and arguments absolute,
// but `./` patterns and the accept-edits roots stay the session's, and a
// cwd outside the session's directories is an access only a path rule can
// allow.
func TestRequestDirectoryNeverMovesTheSessionsAnchors(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	must(t, err)
	home := filepath.Join(dir, "home")
	repo := filepath.Join(dir, "repo")
	lib := filepath.Join(dir, "lib")
	other := filepath.Join(dir, "other")
	for _, d := range []string{home, filepath.Join(repo, "src"), filepath.Join(repo, "gen"), lib, filepath.Join(other, "src")} {
		must(t, os.MkdirAll(d, 0o755))
	}
	// A link in the project that leads out of it, and one outside that
	// leads into it; and a session whose directory is a link.
	must(t, os.Symlink(other, filepath.Join(repo, "out")))
	must(t, os.Symlink(repo, filepath.Join(dir, "into")))
	linked := filepath.Join(dir, "linked")
	must(t, os.Symlink(repo, linked))

	f, err := Parse("user.toml", User, `
[[rule]]
id = "edit-src"
decision = "allow"
kind = "edit"
path = "./src/**"

[[rule]]
id = "no-gen"
decision = "deny"
path = "./gen/**"

[[rule]]
id = "read-tools"
decision = "allow"
command = ["cat *", "make"]

[[rule]]
id = "builds"
decision = "allow"
path = "`+dir+`/builds/**"
`)
	must(t, err)
	p := NewPolicy([]*File{f}, home, nil)
	ctx := Context{Cwd: repo, Roots: []string{lib}, Home: home}
	patch := func(cwd, path string) string {
		b, _ := json.Marshal(map[string]any{"kind": "edit", "rawInput": map[string]any{"cwd": cwd, "changes": map[string]any{path: map[string]string{"type": "update"}}}})
		return string(b)
	}
	exec := func(cwd, command string) string {
		b, _ := json.Marshal(map[string]any{"kind": "execute", "rawInput": map[string]any{"cwd": cwd, "command": []string{"/bin/bash", "-lc", command}}})
		return string(b)
	}
	for _, c := range []struct {
		name, mode, call string
		want             Decision
	}{
		{"patch of src/x.go in the session's dir", "default", patch(repo, "src/x.go"), Allow},
		{"patch of src/x.go in the session's dir, its cwd with ..", "default", patch(repo+"/src/..", "src/x.go"), Allow},
		{"patch of src/x.go in another dir", "default", patch(other, "src/x.go"), Ask},
		{"patch of src/x.go in another dir, by ..", "default", patch(repo+"/../other", "src/x.go"), Ask},
		{"patch of src/x.go in a link out of the project", "default", patch(repo+"/out", "src/x.go"), Ask},
		{"patch of src/x.go in a link into the project", "default", patch(dir+"/into", "src/x.go"), Ask},
		{"patch in an additional directory, which ./ covers too", "default", patch(lib, "src/x.go"), Allow},
		{"deny of ./gen still sees gen/x under the session's dir", "default", patch(repo, "gen/x.go"), Deny},
		{"deny of ./gen sees gen/x in a subdirectory cwd", "default", patch(repo+"/src", "../gen/x.go"), Deny},
		{"deny of ./gen still sees an absolute path from elsewhere", "bypass", patch(other, repo+"/gen/x.go"), Deny},
		{"accept-edits: .gitconfig from a cwd of $HOME", "accept-edits", patch(home, ".gitconfig"), Ask},
		{"accept-edits: .bashrc from a cwd of $HOME", "accept-edits", patch(home, ".bashrc"), Ask},
		{"accept-edits: an absolute path inside, cwd $HOME", "accept-edits", patch(home, repo+"/README.md"), Ask},
		{"accept-edits: inside, cwd the session's dir", "accept-edits", patch(repo, "README.md"), Allow},
		{"accept-edits: inside an additional directory, cwd that directory", "accept-edits", patch(lib, "x.go"), Allow},
		{"a command in the session's dir", "default", exec(repo, "cat README.md"), Allow},
		{"a command in a subdirectory", "default", exec(repo+"/src", "make"), Allow},
		{"a command in an additional directory", "default", exec(lib, "make"), Allow},
		{"a command outside the roots", "default", exec(other, "make"), Ask},
		{"a command in $HOME", "default", exec(home, "cat README.md"), Ask},
		{"a command in a link out of the project", "default", exec(repo+"/out", "make"), Ask},
		{"a command in a cwd a path rule allows", "default", exec(dir+"/builds/a", "make"), Allow},
		{"bypass allows a command outside the roots", "bypass", exec(other, "make"), Allow},
		{"plan mode never", "plan", exec(other, "cat x"), Deny},
		{"a relative cwd is not understood", "bypass", `{"kind":"execute","rawInput":{"cwd":"src","command":["make"]}}`, Ask},
		{"an empty cwd is not understood", "bypass", `{"kind":"execute","rawInput":{"cwd":"","command":["make"]}}`, Ask},
		{"a cwd in ~/.ssh is protected", "bypass", exec(home+"/.ssh", "make"), Ask},
		{"a cwd in .git is protected", "bypass", exec(other+"/.git", "make"), Ask},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctx
			ctx.Mode = c.mode
			req := ReadToolCall(toolCall(t, c.call), ctx)
			v := ApplyMode(p.Decide(req), req, c.mode)
			if v.Decision != c.want {
				t.Errorf("decision %s (%s: %s), want %s; parts %+v", v.Decision, v.Source, v.Reason, c.want, v.Parts)
			}
		})
	}

	// A session opened through a link: the agent may name its directory as
	// the link resolves.
	viaLink := Context{Cwd: linked, Home: home}
	for _, cwd := range []string{repo, repo + "/src", linked + "/src"} {
		req := ReadToolCall(toolCall(t, exec(cwd, "cat README.md")), viaLink)
		if v := p.Decide(req); v.Decision != Allow {
			t.Errorf("a command in %s, the session's directory through a link: %s (%s)", cwd, v.Decision, v.Reason)
		}
	}
	if v := p.Decide(ReadToolCall(toolCall(t, exec(other, "cat README.md")), viaLink)); v.Decision != Ask {
		t.Errorf("a command outside a linked session's directory: %s", v.Decision)
	}

	// Relative arguments and redirections are read where the command runs.
	req := ReadToolCall(toolCall(t, exec(home+"/.ssh", "cat id_rsa")), ctx)
	if reason, ok := p.Protected(req); !ok || reason != `argument "id_rsa" names a protected path (~/.ssh/**)` {
		t.Errorf("cat id_rsa in ~/.ssh: %q %v", reason, ok)
	}
	req = ReadToolCall(toolCall(t, exec(other, "echo x > notes.txt")), ctx)
	if req.Dir != other || len(req.Paths) != 2 || req.Paths[0].Abs != other+"/notes.txt" || !req.Paths[1].WorkDir {
		t.Errorf("a redirection in another dir: Dir %q, paths %+v", req.Dir, req.Paths)
	}
}
