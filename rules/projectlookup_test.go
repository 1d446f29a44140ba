package rules

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestProjectFilesLookup: the project files of a session are looked up from
// its directory: inside home up to home, past any .git; outside home up to
// the repository's root; never above; lexically, so that neither a linked
// directory nor ".." leads the walk elsewhere; and, outside home with no
// .git on the way, only the session's own.
func TestProjectFilesLookup(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	must(t, err)
	home := filepath.Join(root, "home")
	repo := filepath.Join(home, "src", "repo")
	worktree := filepath.Join(home, "src", "worktree")
	elsewhere := filepath.Join(root, "elsewhere", "repo")
	for _, d := range []string{filepath.Join(repo, ".git"), filepath.Join(repo, "sub", "deep"), filepath.Join(worktree, "sub"),
		filepath.Join(home, "notes", "a"), filepath.Join(root, "tmp", "x", "y"), filepath.Join(elsewhere, ".git"), filepath.Join(elsewhere, "dir")} {
		must(t, os.MkdirAll(d, 0o755))
	}
	writeFile(t, filepath.Join(worktree, ".git"), "gitdir: /somewhere/.git/worktrees/w\n", 0o644)
	// repo/out is a link to another repository's directory.
	must(t, os.Symlink(filepath.Join(elsewhere, "dir"), filepath.Join(repo, "out")))
	files := func(dirs ...string) []string {
		var out []string
		for _, d := range dirs {
			out = append(out, filepath.Join(d, ProjectFileName))
		}
		return out
	}
	for _, c := range []struct {
		name, dir string
		want      []string
	}{
		{"repository_root_in_home", repo, files(repo, filepath.Join(home, "src"), home)},
		{"in_home_past_the_git_directory_to_home", filepath.Join(repo, "sub", "deep"), files(filepath.Join(repo, "sub", "deep"), filepath.Join(repo, "sub"), repo, filepath.Join(home, "src"), home)},
		{"in_home_past_a_git_file_to_home", filepath.Join(worktree, "sub"), files(filepath.Join(worktree, "sub"), worktree, filepath.Join(home, "src"), home)},
		{"up_to_home_without_git", filepath.Join(home, "notes", "a"), files(filepath.Join(home, "notes", "a"), filepath.Join(home, "notes"), home)},
		{"home_itself", home, files(home)},
		{"dot_dot_cleaned_first", filepath.Join(repo, "sub", "deep", "..", "..", "sub"), files(filepath.Join(repo, "sub"), repo, filepath.Join(home, "src"), home)},
		{"dot_dot_never_above_home", home + "/src/../../home/src", files(filepath.Join(home, "src"), home)},
		{"linked_directory_walks_its_own_path", filepath.Join(repo, "out"), files(filepath.Join(repo, "out"), repo, filepath.Join(home, "src"), home)},
		{"outside_home_dot_dot_never_above_the_repository", elsewhere + "/dir/../../repo/dir", files(filepath.Join(elsewhere, "dir"), elsewhere)},
		{"outside_home_without_git_only_its_own", filepath.Join(root, "tmp", "x", "y"), files(filepath.Join(root, "tmp", "x", "y"))},
		{"outside_home_in_a_repository", filepath.Join(elsewhere, "dir"), files(filepath.Join(elsewhere, "dir"), elsewhere)},
		{"none", "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ProjectFiles(c.dir, home); !slices.Equal(got, c.want) {
				t.Errorf("ProjectFiles(%s) =\n  %q\nwant\n  %q", c.dir, got, c.want)
			}
		})
	}
	// Outside home, a .git counts only in a directory that is the user's
	// own, reached through such directories: in a world-writable one (as
	// /tmp) anyone can make a .git and a project file.
	shared := filepath.Join(root, "shared")
	must(t, os.MkdirAll(filepath.Join(shared, ".git"), 0o755))
	must(t, os.MkdirAll(filepath.Join(shared, "mine", "work"), 0o755))
	must(t, os.Chmod(shared, 0o1777))
	if got, want := ProjectFiles(filepath.Join(shared, "mine", "work"), home), files(filepath.Join(shared, "mine", "work")); !slices.Equal(got, want) {
		t.Errorf("below a world-writable directory holding .git: %q, want only the session's own %q", got, want)
	}
	// A repository inside the shared directory, the user's own, still is one.
	must(t, os.MkdirAll(filepath.Join(shared, "mine", ".git"), 0o755))
	if got, want := ProjectFiles(filepath.Join(shared, "mine", "work"), home), files(filepath.Join(shared, "mine", "work"), filepath.Join(shared, "mine")); !slices.Equal(got, want) {
		t.Errorf("in the user's own repository below a shared directory: %q, want %q", got, want)
	}
	// A directory on the way that only the group may write breaks the walk too.
	groupDir := filepath.Join(root, "group")
	must(t, os.MkdirAll(filepath.Join(groupDir, ".git"), 0o755))
	must(t, os.MkdirAll(filepath.Join(groupDir, "sub", "deeper"), 0o755))
	must(t, os.Chmod(filepath.Join(groupDir, "sub"), 0o775))
	if got, want := ProjectFiles(filepath.Join(groupDir, "sub", "deeper"), home), files(filepath.Join(groupDir, "sub", "deeper")); !slices.Equal(got, want) {
		t.Errorf("through a group-writable directory: %q, want only the session's own %q", got, want)
	}
	if os.Getuid() != 0 {
		t.Log("not root: the case of a repository owned by another user is not run (it needs chown)")
	} else {
		other := filepath.Join(root, "other")
		must(t, os.MkdirAll(filepath.Join(other, ".git"), 0o755))
		must(t, os.MkdirAll(filepath.Join(other, "mine"), 0o755))
		must(t, os.Chown(other, 4242, 4242))
		if got, want := ProjectFiles(filepath.Join(other, "mine"), home), files(filepath.Join(other, "mine")); !slices.Equal(got, want) {
			t.Errorf("below a repository owned by another user (uid 4242): %q, want only the session's own %q", got, want)
		}
	}
	if !holdsGit("/") {
		if got := ProjectFiles("/", home); got != nil {
			t.Errorf("ProjectFiles(/) = %q: / holds no .git", got)
		}
		if got := ProjectFiles("/", "/"); got != nil {
			t.Errorf("ProjectFiles(/) with HOME=/ = %q: / holds no .git", got)
		}
	}
}

// repoWithSub makes home/repo (a repository) with a session directory
// repo/sub, and writes repo's project file.
func repoWithSub(t *testing.T, project string) (loc Locations, repo, sub string) {
	t.Helper()
	loc, _ = testLocations(t)
	repo = filepath.Join(loc.Home, "repo")
	sub = filepath.Join(repo, "sub")
	must(t, os.MkdirAll(filepath.Join(repo, ".git"), 0o755))
	must(t, os.MkdirAll(sub, 0o755))
	writeFile(t, filepath.Join(repo, ProjectFileName), project, 0o644)
	return loc, repo, sub
}

const repoProject = `
[[rule]]
id = "repo-deny-deploy"
decision = "deny"
command = "make deploy *"

[[rule]]
id = "repo-deny-secrets"
decision = "deny"
path = "./secrets/**"

[[rule]]
id = "repo-allow-make"
decision = "allow"
command = "make *"
`

// TestProjectFileAboveTheSessionApplies: a session in repo/sub gets
// repo/.acp-broker.toml's rules: its denies at once, its allows only once it
// is trusted; its ./ is repo, where it was written.
func TestProjectFileAboveTheSessionApplies(t *testing.T) {
	loc, repo, sub := repoWithSub(t, repoProject)
	ctx := Context{Cwd: sub, Home: loc.Home}
	read := func(path string) *Request {
		return ReadToolCall(toolCall(t, `{"kind":"read","rawInput":{"file_path":"`+path+`"}}`), ctx)
	}
	p, warnings, err := Load(LoadOptions{Locations: loc, ProjectDir: sub})
	must(t, err)
	if files := p.ProjectFiles(); len(files) != 1 || files[0].Path != filepath.Join(repo, ProjectFileName) {
		t.Fatalf("project files in force: %v", files)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "'acp-broker trust "+repo+"'") {
		t.Errorf("warnings = %q, want the hint to trust %s", warnings, repo)
	}
	if v := p.Decide(command(t, "make deploy prod", ctx)); v.Decision != Deny || v.Rule == nil || v.Rule.ID != "repo-deny-deploy" {
		t.Errorf("make deploy in repo/sub: %s (%s)", v.Decision, v.Reason)
	}
	if v := p.Decide(read(filepath.Join(repo, "secrets", "key"))); v.Decision != Deny {
		t.Errorf("repo/secrets/key from repo/sub: %s (%s), want the repository's ./secrets/** to deny it", v.Decision, v.Reason)
	}
	if v := p.Decide(read(filepath.Join(sub, "secrets", "key"))); v.Decision != Allow {
		t.Errorf("repo/sub/secrets/key: %s (%s), want the default (./ is repo, not the session's directory)", v.Decision, v.Reason)
	}
	if v := p.Decide(command(t, "make build", ctx)); v.Decision != Ask {
		t.Errorf("make build, the untrusted repository's allow: %s", v.Decision)
	}
	if _, _, err := Trust(loc.StateDir, repo); err != nil {
		t.Fatal(err)
	}
	p, _, err = Load(LoadOptions{Locations: loc, ProjectDir: sub})
	must(t, err)
	if v := p.Decide(command(t, "make build", ctx)); v.Decision != Allow {
		t.Errorf("make build, the trusted repository's allow: %s (%s)", v.Decision, v.Reason)
	}
}

// TestSubdirectoryProjectFileCannotWeakenTheRepository (attack): a
// .acp-broker.toml placed in a subdirectory, closer to the session than the
// repository's, does not shadow the repository's deny rules, whether it is
// trusted or not, allows everything, or does not parse.
func TestSubdirectoryProjectFileCannotWeakenTheRepository(t *testing.T) {
	const allowAll = `
mode = "bypass"
read_only = "allow"

[[rule]]
decision = "allow"
command = ["make *", "make deploy *"]

[[rule]]
decision = "allow"
path = ["/**", "./**"]
`
	for _, c := range []struct {
		name, content string
		trust         bool
	}{
		{"untrusted_allow_all", allowAll, false},
		{"trusted_allow_all", allowAll, true},
		{"empty", "", false},
		{"broken", "[[rule]]\ncomand = \"x\"\n", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			loc, repo, sub := repoWithSub(t, repoProject)
			writeFile(t, filepath.Join(sub, ProjectFileName), c.content, 0o644)
			if c.trust {
				_, _, err := Trust(loc.StateDir, sub)
				must(t, err)
			}
			p, _, err := Load(LoadOptions{Locations: loc, ProjectDir: sub})
			must(t, err)
			ctx := Context{Cwd: sub, Home: loc.Home}
			deploy := command(t, "make deploy prod", ctx)
			if v := ApplyMode(p.Decide(deploy), deploy, modeOf(p)); v.Decision != Deny {
				t.Errorf("make deploy: %s (%s), want the repository's deny", v.Decision, v.Reason)
			}
			secret := ReadToolCall(toolCall(t, `{"kind":"read","rawInput":{"file_path":"`+filepath.Join(repo, "secrets", "key")+`"}}`), ctx)
			if v := p.Decide(secret); v.Decision != Deny {
				t.Errorf("repo/secrets/key: %s (%s), want the repository's deny", v.Decision, v.Reason)
			}
		})
	}
}

// modeOf is the mode a policy sets, or default.
func modeOf(p *Policy) string {
	if p.Mode != "" {
		return p.Mode
	}
	return "default"
}

// TestNoProjectFileAboveHomeOrOutsideARepository (attack): a project file
// above the user's home, or above a session outside home in no repository
// (a world-writable /tmp), is never read: its rules do not apply and,
// broken, it does not make the session ask.
func TestNoProjectFileAboveHomeOrOutsideARepository(t *testing.T) {
	loc, _ := testLocations(t)
	above := filepath.Dir(loc.Home)
	inHome := filepath.Join(loc.Home, "proj")
	tmp := filepath.Join(above, "tmp", "session")
	must(t, os.MkdirAll(inHome, 0o755))
	must(t, os.MkdirAll(tmp, 0o755))
	const denyMake = "[[rule]]\ndecision = \"deny\"\ncommand = \"make *\"\n"
	for _, c := range []struct{ name, file, session string }{
		{"above_home_deny", filepath.Join(above, ProjectFileName), inHome},
		{"above_a_tmp_session_deny", filepath.Join(above, "tmp", ProjectFileName), tmp},
	} {
		for _, content := range []string{denyMake, "[[rule]]\ncomand = \"x\"\n"} {
			writeFile(t, c.file, content, 0o644)
			p, _, err := Load(LoadOptions{Locations: loc, ProjectDir: c.session})
			must(t, err)
			if len(p.ProjectFiles()) != 0 || p.ProjectError != nil {
				t.Errorf("%s: %s was read (files %v, error %v)", c.name, c.file, p.ProjectFiles(), p.ProjectError)
			}
			if v := p.Decide(command(t, "make build", Context{Cwd: c.session, Home: loc.Home})); v.Decision != Ask {
				t.Errorf("%s: make build %s (%s)", c.name, v.Decision, v.Reason)
			}
			must(t, os.Remove(c.file))
		}
	}
}

// TestProjectFilesStrictestModeAndRememberWin: among several trusted project
// files, the strictest mode and the narrowest remember scope apply, whichever
// file is nearer the session; a user's setting still beats them all.
func TestProjectFilesStrictestModeAndRememberWin(t *testing.T) {
	project := func(path, content string) *File {
		t.Helper()
		f, err := Parse(path, Project, content)
		must(t, err)
		f.Trusted = true
		return f
	}
	for _, c := range []struct {
		name           string
		near, far      string
		mode, remember string
	}{
		{"nearer_looser_mode_and_scope", "mode = \"bypass\"\nremember = \"user\"\n", "mode = \"plan\"\nremember = \"session\"\n", "plan", "session"},
		{"nearer_stricter", "mode = \"dont-ask\"\nremember = \"project\"\n", "mode = \"accept-edits\"\nremember = \"user\"\n", "dont-ask", "project"},
		{"dont_ask_beats_default", "mode = \"default\"\n", "mode = \"dont-ask\"\n", "dont-ask", ""},
		{"only_the_far_one_sets_it", "", "mode = \"accept-edits\"\nremember = \"project\"\n", "accept-edits", "project"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := NewPolicy([]*File{project("/r/sub/.acp-broker.toml", c.near), project("/r/.acp-broker.toml", c.far)}, "", nil)
			if p.Mode != c.mode || p.Remember != c.remember {
				t.Errorf("mode %q, remember %q; want %q, %q", p.Mode, p.Remember, c.mode, c.remember)
			}
		})
	}
	user, err := Parse("/u/config.toml", User, "mode = \"bypass\"\nremember = \"user\"\n")
	must(t, err)
	p := NewPolicy([]*File{user, project("/r/.acp-broker.toml", "mode = \"plan\"\nremember = \"session\"\n")}, "", nil)
	if p.Mode != "bypass" || p.Remember != "user" {
		t.Errorf("with the user's settings: mode %q, remember %q; want the user's", p.Mode, p.Remember)
	}
}
