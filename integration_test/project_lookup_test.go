//go:build linux

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// repoProject is the project file of a repository whose root is the
// decider's root: the session's directory, root/project, is one of its
// subdirectories.
const repoProject = `[[rule]]
id = "repo-no-deploy"
decision = "deny"
command = "make deploy *"

[[rule]]
id = "repo-no-secrets"
decision = "deny"
path = "./secrets/**"

[[rule]]
id = "repo-curl"
decision = "allow"
command = "curl *"
`

// TestProjectFileOfTheRepositoryAppliesInASubdirectory: a session opened in
// a subdirectory of a repository is decided with the repository's
// .acp-broker.toml, by the live broker and by rules explain alike (the
// decider cross-checks each request): its denies at once, its ./ at the
// repository's root, its allows once it is trusted; an edit of it takes
// effect live; and (attack) an allow-everything file placed in the session's
// directory, closer than the repository's, takes none of its denies away.
func TestProjectFileOfTheRepositoryAppliesInASubdirectory(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: projectUser, prepare: func(d *decider) {
		if err := os.Mkdir(filepath.Join(d.root, ".git"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFileAtomic(t, filepath.Join(d.root, ".acp-broker.toml"), repoProject)
	}})
	d.noisy = true // the untrusted project file is warned about
	curl := func(id string) string { return execReq(id, "curl https://example.com") }
	steps := []struct {
		name string
		run  func()
	}{
		{"repository_deny_beats_user_allow", func() { d.decided(execReq("1", "make deploy prod"), "reject") }},
		{"repository_dot_is_its_root", func() { d.decided(d.expand(readReq("2", "$ROOT/secrets/key")), "reject") }},
		{"session_dot_is_not_the_repository_dot", func() { d.decided(d.expand(readReq("3", "$CWD/secrets/key")), "allow") }},
		{"untrusted_repository_allow_ignored", func() { d.asked(curl("4"), answer("4", "reject")) }},
		{"trusted_repository_allow_applies", func() {
			trustProject(d.t, d, d.root)
			d.decided(curl("5"), "allow")
		}},
		{"closer_allow_all_file_does_not_shadow_the_repository", func() {
			writeFileAtomic(d.t, filepath.Join(d.cwd, ".acp-broker.toml"), "mode = \"bypass\"\n[[rule]]\ndecision = \"allow\"\ncommand = [\"make *\", \"make deploy *\"]\n[[rule]]\ndecision = \"allow\"\npath = \"/**\"\n")
			d.decided(execReq("6", "make deploy prod"), "reject")
			d.decided(d.expand(readReq("7", "$ROOT/secrets/key")), "reject")
		}},
		{"repository_edit_reloaded", func() {
			writeFileAtomic(d.t, filepath.Join(d.root, ".acp-broker.toml"), repoProject+"\n[[rule]]\nid = \"repo-no-clean\"\ndecision = \"deny\"\ncommand = \"make clean\"\n")
			d.decided(execReq("8", "make clean"), "reject")
			// The edit ended the trust.
			d.asked(curl("9"), answer("9", "reject"))
		}},
	}
	for _, s := range steps {
		if !d.step(t, s.name, s.run) {
			return
		}
	}
	d.finish()
}

// TestProjectFileDenyOutlivesAGitInitInTheSession (attack): the agent runs
// `git init` in the session's subdirectory of a repository in the user's
// home, which would make it a repository of its own. The walk goes on to
// home, so the repository's deny still applies, live and by explain.
func TestProjectFileDenyOutlivesAGitInitInTheSession(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: projectUser, prepare: func(d *decider) {
		if err := os.Mkdir(filepath.Join(d.root, ".git"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFileAtomic(t, filepath.Join(d.root, ".acp-broker.toml"), repoProject)
	}, envFor: func(d *decider) []string { return []string{"HOME=" + d.root} }})
	d.noisy = true // the untrusted project file is warned about
	steps := []struct {
		name string
		run  func()
	}{
		{"repository_deny_applies", func() { d.decided(execReq("1", "make deploy prod"), "reject") }},
		{"git_init_in_the_session_directory", func() {
			cmd := exec.Command("git", "init", "-q", d.cwd)
			if out, err := cmd.CombinedOutput(); err != nil {
				// The agent's git init made by hand: all the lookup sees.
				d.t.Logf("git init: %v %s; making .git by hand", err, out)
				if err := os.Mkdir(filepath.Join(d.cwd, ".git"), 0o755); err != nil {
					d.t.Fatal(err)
				}
			}
			afterChange()
			d.decided(execReq("2", "make deploy prod"), "reject")
			d.decided(d.expand(readReq("3", "$ROOT/secrets/key")), "reject")
		}},
	}
	for _, s := range steps {
		if !d.step(t, s.name, s.run) {
			return
		}
	}
	d.finish()
}
