//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The tests in this file pin that a directory a request names itself
// (Codex's rawInput.cwd, terminal/create's cwd: the model chooses it) only
// makes its relative paths absolute: `./` rules and the accept-edits roots
// stay the session's own directories, and a command in a directory outside
// them is asked, whatever rule allows the command.

// anchorDirs makes, next to the decider's session, a directory outside its
// roots ($ROOT/other) and a link in the project leading there ($CWD/out).
func anchorDirs(t *testing.T, d *decider) {
	t.Helper()
	for _, dir := range []string{filepath.Join(d.root, "other", "src"), filepath.Join(homeDir)} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(d.root, "other"), filepath.Join(d.cwd, "out")); err != nil {
		t.Fatal(err)
	}
}

// codexPatch is a Codex patch approval for one path, relative or not, in a
// cwd of its own choosing.
func codexPatch(id, cwd, path string) string {
	return permission(id, `{"toolCallId":"p`+id+`","title":"Edit `+path+`","kind":"edit","status":"pending","rawInput":{"cwd":"`+cwd+`","changes":{"`+path+`":{"type":"update","unified_diff":"@@ -1 +1 @@\n-a\n+b\n"}}}}`, codexOptions)
}

// codexExec is a Codex command approval in a cwd of its own choosing.
func codexExec(id, cwd, command string) string {
	return permission(id, `{"toolCallId":"e`+id+`","title":"`+command+`","kind":"execute","status":"pending","rawInput":{"command":["/bin/bash","-lc","`+command+`"],"cwd":"`+cwd+`"}}`, codexOptions)
}

// TestAnchorsStayTheSessions: permission requests whose rawInput.cwd points
// elsewhere are not allowed by `./src/**` nor by a command rule; deny rules
// still see where the paths really are. `rules explain` agrees on each.
func TestAnchorsStayTheSessions(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules})
	anchorDirs(t, d)
	for i, c := range []struct {
		name, req string
		decision  string // allow, deny or ask
	}{
		{"patch_src_in_another_directory", codexPatch("1", "$ROOT/other", "src/x.go"), "ask"},
		{"patch_src_in_another_directory_by_dotdot", codexPatch("2", "$CWD/../other", "src/x.go"), "ask"},
		{"patch_src_in_a_link_out_of_the_project", codexPatch("3", "$CWD/out", "src/x.go"), "ask"},
		{"patch_src_as_a_diff_in_another_directory", permission(`4`, `{"toolCallId":"p4","title":"Edit src/x.go","kind":"edit","rawInput":{"cwd":"$ROOT/other"},"content":[{"type":"diff","path":"src/x.go","oldText":"a","newText":"b"}]}`, codexOptions), "ask"},
		{"patch_src_in_home", codexPatch("5", "$HOME", "src/x.go"), "ask"},
		{"patch_src_with_a_relative_cwd", codexPatch("6", "src/..", "src/x.go"), "ask"},
		{"patch_src_in_the_sessions_directory", codexPatch("7", "$CWD", "src/x.go"), "allow"},
		{"patch_src_in_the_sessions_directory_by_dotdot", codexPatch("8", "$CWD/src/..", "src/x.go"), "allow"},
		{"deny_of_gen_in_the_sessions_directory", codexPatch("9", "$CWD", "gen/x.go"), "deny"},
		{"deny_of_gen_from_a_subdirectory", codexPatch("10", "$CWD/src", "../gen/x.go"), "deny"},
		{"deny_of_gen_from_another_directory", codexPatch("11", "$ROOT/other", "$CWD/gen/x.go"), "deny"},
		{"allowed_command_in_another_directory", codexExec("12", "$ROOT/other", "git status"), "ask"},
		{"allowed_command_in_home", codexExec("13", "$HOME", "git status"), "ask"},
		{"allowed_command_in_a_link_out_of_the_project", codexExec("14", "$CWD/out", "git status"), "ask"},
		{"allowed_command_in_a_relative_cwd", codexExec("15", "src", "git status"), "ask"},
		{"allowed_command_in_a_subdirectory", codexExec("16", "$CWD/src", "git status"), "allow"},
		{"allowed_command_in_an_additional_directory", codexExec("17", "$LIB", "git status"), "allow"},
		{"denied_command_in_another_directory", codexExec("18", "$ROOT/other", "git push --force origin"), "deny"},
	} {
		id := itoa(i + 1)
		if id != requestID(t, c.req) {
			t.Fatalf("test bug: %s has id %s, want %s", c.name, requestID(t, c.req), id)
		}
		ok := d.step(t, c.name, func() {
			switch c.decision {
			case "allow":
				d.decided(c.req, "approved")
			case "deny":
				d.decided(c.req, "denied")
			default:
				d.asked(c.req, answer(id, "denied"))
			}
		})
		if !ok {
			return
		}
	}
	d.finish()
}

// TestAnchorsAcceptEdits: in accept-edits mode, an edit is allowed only
// inside the session's own directories, whatever cwd the request names:
// with rawInput.cwd = $HOME, neither ~/.gitconfig nor ~/.bashrc is.
func TestAnchorsAcceptEdits(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules, args: []string{"--mode", "accept-edits"}})
	anchorDirs(t, d)
	d.play(t, []decideCase{
		{name: "gitconfig_from_a_cwd_of_home", req: codexPatch("1", "$HOME", ".gitconfig"), answer: answer("1", "denied")},
		{name: "bashrc_from_a_cwd_of_home", req: codexPatch("2", "$HOME", ".bashrc"), answer: answer("2", "denied")},
		{name: "gitconfig_from_a_cwd_of_home_claude_shape", req: permission(`3`, `{"toolCallId":"p3","title":"Edit .gitconfig","kind":"edit","rawInput":{"cwd":"$HOME","file_path":".gitconfig"},"locations":[{"path":".gitconfig"}]}`, claudeOptions), answer: answer("3", "reject")},
		{name: "inside_the_project_from_a_cwd_of_home", req: codexPatch("4", "$HOME", "$CWD/README.md"), answer: answer("4", "denied")},
		{name: "inside_a_link_out_of_the_project", req: codexPatch("5", "$CWD/out", "x.go"), answer: answer("5", "denied")},
		{name: "another_directory_named_like_the_project", req: codexPatch("6", "$CWD-evil", "x.go"), answer: answer("6", "denied")},
		{name: "inside_the_project_from_its_own_cwd", req: codexPatch("7", "$CWD", "README.md"), option: "approved"},
		{name: "inside_an_additional_directory", req: codexPatch("8", "$LIB", "x.go"), option: "approved"},
	})
}

// TestDefendModes: the writes and terminals an agent sends without asking
// are decided in the broker's mode too: accept-edits lets a write inside the
// session's directories through and asks about one outside; plan refuses
// both.
func TestDefendModes(t *testing.T) {
	t.Parallel()
	t.Run("accept-edits", func(t *testing.T) {
		t.Parallel()
		d := startDecider(t, deciderOptions{rules: decideRules, args: []string{"--mode", "accept-edits"}})
		d.step(t, "inside", func() {
			d.forwardedAtOnce(writeReq(`1`, "$CWD/README.md"), `{"jsonrpc":"2.0","id":1,"result":null}`)
		})
		d.step(t, "in_an_additional_directory", func() {
			d.forwardedAtOnce(writeReq(`2`, "$LIB/x.go"), `{"jsonrpc":"2.0","id":2,"result":null}`)
		})
		d.step(t, "gitconfig", func() {
			d.heldAsked(d.t, writeReq(`3`, "$HOME/.gitconfig"), homeDir+"/.gitconfig", "reject_once", "")
		})
		d.step(t, "a_terminal_is_no_edit", func() {
			d.heldAsked(d.t, terminalReq(`4`, `"command":"make","cwd":"$CWD"`), "make", "reject_once", "")
		})
		d.finish()
	})
	t.Run("plan", func(t *testing.T) {
		t.Parallel()
		d := startDecider(t, deciderOptions{rules: decideRules, args: []string{"--mode", "plan"}})
		d.step(t, "write", func() {
			if msg := d.refused(writeReq(`1`, "$CWD/README.md")); !strings.Contains(msg, "plan") {
				d.t.Errorf("error message %q does not name the mode", msg)
			}
		})
		d.step(t, "terminal_a_rule_allows", func() {
			d.refused(terminalReq(`2`, `"command":"git","args":["status"],"cwd":"$CWD"`))
		})
		d.finish()
	})
}

// TestAnchorsTerminalCwd: a terminal/create whose cwd is outside the
// session's directories is asked with the broker's own prompt even when a
// rule allows its command; inside them, the rule applies.
func TestAnchorsTerminalCwd(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules})
	anchorDirs(t, d)
	steps := []struct {
		name, cwd string
		held      bool
	}{
		{"another_directory", "$ROOT/other", true},
		{"another_directory_by_dotdot", "$CWD/../other", true},
		{"a_link_out_of_the_project", "$CWD/out", true},
		{"home", "$HOME", true},
		{"a_sibling_named_like_the_project", "$CWD-evil", true},
		// A relative cwd is refused: TestDefendUnanchoredRefused.
		{"the_sessions_directory", "$CWD", false},
		{"a_subdirectory", "$CWD/src", false},
		{"an_additional_directory", "$LIB", false},
	}
	for i, s := range steps {
		req := terminalReq(itoa(i+1), `"command":"git","args":["status"],"cwd":"`+s.cwd+`"`)
		ok := d.step(t, s.name, func() {
			if s.held {
				d.heldAsked(d.t, req, "git status", "reject_once", "")
				return
			}
			d.forwardedAtOnce(req, `{"jsonrpc":"2.0","id":`+itoa(i+1)+`,"result":{"terminalId":"t"}}`)
		})
		if !ok {
			return
		}
	}
	d.finish()
}
