package rules

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const projectRules = `
[[rule]]
id = "p-allow-make"
decision = "allow"
command = "make *"

[[rule]]
id = "p-deny-deploy"
decision = "deny"
command = "make deploy *"
`

// TestProjectFileIsReadOnlyIfRegularAndSmall: a project file that is a
// device, a pipe, a link out of the project, a directory or too large is
// never read; Load goes on with the other layers and the policy asks for
// everything, naming why, and at once (a FIFO or /dev/zero must not block
// or grow the broker).
func TestProjectFileIsReadOnlyIfRegularAndSmall(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "rules.toml")
	writeFile(t, outside, projectRules, 0o644)
	tests := []struct {
		name  string
		setup func(t *testing.T, repo, path string)
		want  string
	}{
		{"dev_zero", func(t *testing.T, repo, path string) { must(t, os.Symlink("/dev/zero", path)) }, "outside the project"},
		{"own_stdin", func(t *testing.T, repo, path string) { must(t, os.Symlink("/proc/self/fd/0", path)) }, "symbolic link"},
		{"proc_file", func(t *testing.T, repo, path string) { must(t, os.Symlink("/proc/self/environ", path)) }, "outside the project"},
		{"file_outside", func(t *testing.T, repo, path string) { must(t, os.Symlink(outside, path)) }, "outside the project"},
		{"relative_link_out", func(t *testing.T, repo, path string) {
			rel, err := filepath.Rel(repo, outside)
			must(t, err)
			must(t, os.Symlink(rel, path))
		}, "outside the project"},
		{"dangling_link", func(t *testing.T, repo, path string) { must(t, os.Symlink("nowhere.toml", path)) }, "does not lead to a file"},
		{"link_to_a_link_out", func(t *testing.T, repo, path string) {
			must(t, os.Symlink("/dev/zero", filepath.Join(repo, "inner")))
			must(t, os.Symlink("inner", path))
		}, "outside the project"},
		{"fifo", func(t *testing.T, repo, path string) { must(t, syscall.Mkfifo(path, 0o644)) }, "a named pipe"},
		{"fifo_inside_through_a_link", func(t *testing.T, repo, path string) {
			must(t, syscall.Mkfifo(filepath.Join(repo, "pipe"), 0o644))
			must(t, os.Symlink("pipe", path))
		}, "a named pipe"},
		{"directory", func(t *testing.T, repo, path string) { must(t, os.Mkdir(path, 0o755)) }, "a directory"},
		{"huge", func(t *testing.T, repo, path string) {
			writeFile(t, path, "# "+strings.Repeat("x", MaxProjectFileSize)+"\n", 0o644)
		}, "more than"},
		{"unreadable", func(t *testing.T, repo, path string) {
			if os.Geteuid() == 0 {
				t.Skip("root reads any file")
			}
			writeFile(t, path, projectRules, 0o000)
		}, "permission denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loc, repo := testLocations(t)
			writeFile(t, loc.User, "[[rule]]\nid = \"user-deny-rm\"\ndecision = \"deny\"\ncommand = \"rm *\"\n[[rule]]\ndecision = \"allow\"\ncommand = \"make *\"\n", 0o600)
			tt.setup(t, repo, filepath.Join(repo, ProjectFileName))
			done := make(chan struct{})
			var p *Policy
			var warnings []string
			var err error
			go func() {
				defer close(done)
				p, warnings, err = Load(LoadOptions{Locations: loc, ProjectDir: repo})
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Load hangs on the project file")
			}
			must(t, err)
			if p.ProjectError == nil || !strings.Contains(p.ProjectError.Error(), tt.want) {
				t.Fatalf("ProjectError = %v, want it to say %q", p.ProjectError, tt.want)
			}
			if len(p.ProjectNotes) != 1 || len(warnings) != 1 || !strings.Contains(warnings[0], "is asked until the file is fixed") {
				t.Errorf("notes = %q, warnings = %q", p.ProjectNotes, warnings)
			}
			if f := p.ProjectFiles(); len(f) > 0 {
				t.Errorf("a project file that was not read is in the policy: %+v", f)
			}
			ctx := Context{Cwd: repo, Home: loc.Home}
			// The user's allow is asked, with the reason; the user's deny stands.
			if v := p.Decide(command(t, "make build", ctx)); v.Decision != Ask || v.Source != "project file" || !strings.Contains(v.Reason, tt.want) {
				t.Errorf("make build: %s (%s: %s)", v.Decision, v.Source, v.Reason)
			}
			if v := p.Decide(command(t, "rm -rf build", ctx)); v.Decision != Deny || v.Rule == nil || v.Rule.ID != "user-deny-rm" {
				t.Errorf("rm -rf build: %s (%s)", v.Decision, v.Reason)
			}
			read := ReadToolCall(toolCall(t, `{"kind":"read","rawInput":{"file_path":"`+repo+`/README.md"}}`), ctx)
			if v := p.Decide(read); v.Decision != Ask {
				t.Errorf("a read allowed by default: %s (%s)", v.Decision, v.Reason)
			}
			for _, mode := range []string{"bypass", "accept-edits"} {
				if v := ApplyMode(p.Decide(command(t, "make build", ctx)), command(t, "make build", ctx), mode); v.Decision == Allow {
					t.Errorf("mode %s allowed what the broken project file makes asked", mode)
				}
			}
			if _, _, err := Trust(loc.StateDir, repo); err == nil {
				t.Error("acp-broker trust accepted a file it cannot read safely")
			}
		})
	}
}

// TestProjectFileLinkInsideTheProject: a link to a regular file inside the
// project is read like the file itself.
func TestProjectFileLinkInsideTheProject(t *testing.T) {
	loc, repo := testLocations(t)
	writeFile(t, filepath.Join(repo, "config", "broker.toml"), projectRules, 0o644)
	must(t, os.Symlink(filepath.Join("config", "broker.toml"), filepath.Join(repo, ProjectFileName)))
	p, _, err := Load(LoadOptions{Locations: loc, ProjectDir: repo})
	must(t, err)
	if p.ProjectError != nil || len(p.ProjectFiles()) == 0 {
		t.Fatalf("ProjectError = %v", p.ProjectError)
	}
	if v := p.Decide(command(t, "make deploy prod", Context{Cwd: repo, Home: loc.Home})); v.Decision != Deny {
		t.Errorf("the linked file's deny rule: %s", v.Decision)
	}
}

// TestBrokenProjectFileKeepsOnlyTheLastDenies: when a project file that was
// in force stops parsing, its deny and ask rules stay, its allow rules and
// settings go, and everything else is asked.
func TestBrokenProjectFileKeepsOnlyTheLastDenies(t *testing.T) {
	loc, repo := testLocations(t)
	path := filepath.Join(repo, ProjectFileName)
	writeFile(t, path, "mode = \"bypass\"\n"+projectRules, 0o644)
	_, _, err := Trust(loc.StateDir, repo)
	must(t, err)
	good, _, err := Load(LoadOptions{Locations: loc, ProjectDir: repo})
	must(t, err)
	ctx := Context{Cwd: repo, Home: loc.Home}
	if v := good.Decide(command(t, "make build", ctx)); v.Decision != Allow || good.Mode != "bypass" {
		t.Fatalf("trusted file: %s, mode %q", v.Decision, good.Mode)
	}
	writeFile(t, path, projectRules+"\n[[rule]]\ncomand = \"x\"\n", 0o644)
	broken, _, err := Load(LoadOptions{Locations: loc, ProjectDir: repo, LastProject: good.ProjectFiles()})
	must(t, err)
	if v := broken.Decide(command(t, "make build", ctx)); v.Decision != Ask || v.Source != "project file" {
		t.Errorf("make build: %s (%s)", v.Decision, v.Source)
	}
	if v := broken.Decide(command(t, "make deploy prod", ctx)); v.Decision != Deny || v.Rule == nil || v.Rule.ID != "p-deny-deploy" {
		t.Errorf("make deploy: %s (%s)", v.Decision, v.Reason)
	}
	if broken.Mode != "" {
		t.Errorf("the broken file's last mode %q stayed", broken.Mode)
	}
	// The good policy, perhaps still deciding a request, is unchanged.
	if v := good.Decide(command(t, "make build", ctx)); v.Decision != Allow {
		t.Errorf("the earlier policy changed: %s", v.Decision)
	}
	// A second broken version keeps the same denies.
	again, _, err := Load(LoadOptions{Locations: loc, ProjectDir: repo, LastProject: broken.ProjectFiles()})
	must(t, err)
	if v := again.Decide(command(t, "make deploy prod", ctx)); v.Decision != Deny {
		t.Errorf("make deploy after a second broken version: %s", v.Decision)
	}
	// WithoutProjectAllows: what stays when the project changed but the
	// other layers cannot be reloaded.
	cut := good.WithoutProjectAllows()
	if v := cut.Decide(command(t, "make build", ctx)); v.Decision != Ask || cut.Mode != "" {
		t.Errorf("without project allows: %s, mode %q", v.Decision, cut.Mode)
	}
	if v := cut.Decide(command(t, "make deploy prod", ctx)); v.Decision != Deny {
		t.Errorf("without project allows, deploy: %s", v.Decision)
	}
}

// TestTrustIsOfTheBytesParsed: the trust check hashes exactly what was
// parsed; trusting and then editing back to the trusted content trusts it
// again (trust is by content).
func TestTrustIsOfTheBytesParsed(t *testing.T) {
	loc, repo := testLocations(t)
	path := filepath.Join(repo, ProjectFileName)
	writeFile(t, path, projectRules, 0o644)
	_, _, err := Trust(loc.StateDir, repo)
	must(t, err)
	_, data, _, err := readProjectFile(repo)
	must(t, err)
	if trusted, _, err := isTrusted(loc.StateDir, path, data); err != nil || !trusted {
		t.Fatalf("trusted = %v, %v", trusted, err)
	}
	if trusted, changed, err := isTrusted(loc.StateDir, path, append(data, '#')); err != nil || trusted || !changed {
		t.Fatalf("other bytes: trusted = %v, changed = %v, %v", trusted, changed, err)
	}
}

func command(t *testing.T, cmd string, ctx Context) *Request {
	t.Helper()
	return ExampleRequest(Example{Text: cmd}, ctx)
}
