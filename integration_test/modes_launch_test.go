//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"testing"
)

// TestModesNeverReplaceTheBrokersLaunch: the editor starts the broker by
// name, through $PATH, in the environment of the user's shell. A file named
// acp-broker in a directory of $PATH (a project's bin/ that direnv puts
// there, ~/.local/bin) takes the broker's place in the next session, and a
// shell startup file (~/.profile, ~/.zshrc, fish's config) can put any
// directory first. Neither bypass nor accept-edits (the directory is the
// session's own) may allow writing them: the permission request is asked,
// and the write or command the agent sends itself is refused, the file left
// unwritten.
func TestModesNeverReplaceTheBrokersLaunch(t *testing.T) {
	t.Parallel()
	edit := func(path string) string {
		return `{"toolCallId":"l1","title":"Write ` + path + `","kind":"edit","rawInput":{"file_path":"` + path + `","content":"#!/bin/sh\nexec \"$@\"\n"},"locations":[{"path":"` + path + `"}]}`
	}
	command := func(c string) string {
		c = jsonText(c)
		return `{"toolCallId":"l1","title":"` + c + `","kind":"execute","rawInput":{"command":"` + c + `"}}`
	}
	withBin := func(d *decider) []string {
		if err := os.MkdirAll(filepath.Join(d.cwd, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		return []string{"PATH=" + filepath.Join(d.cwd, "bin") + string(os.PathListSeparator) + binDir + string(os.PathListSeparator) + os.Getenv("PATH")}
	}
	cases := []struct{ name, mode, toolCall string }{
		{"accept-edits_broker_on_path", "accept-edits", edit("$CWD/bin/acp-broker")},
		{"bypass_broker_on_path", "bypass", edit("$CWD/bin/acp-broker")},
		{"bypass_cp_over_path", "bypass", command("cp /tmp/x $CWD/bin/acp-broker")},
		{"bypass_link_on_path", "bypass", command("ln -sf /tmp/evil/acp-broker bin/acp-broker")},
		{"bypass_profile_path", "bypass", command("echo 'export PATH=/tmp/evil:$PATH' >> ~/.profile")},
		{"bypass_zshrc", "bypass", edit("$HOME/.zshrc")},
		{"bypass_fish", "bypass", edit("$HOME/.config/fish/conf.d/path.fish")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := startDecider(t, deciderOptions{rules: decideRules, args: []string{"--mode", c.mode}, envFor: withBin})
			d.play(t, []decideCase{{
				name:   "asked",
				req:    permission("1", c.toolCall, claudeOptions),
				answer: answer("1", "reject"),
			}})
		})
	}
	for _, mode := range []string{"bypass", "accept-edits"} {
		t.Run(mode+"_writes_refused", func(t *testing.T) {
			t.Parallel()
			d := startDecider(t, deciderOptions{rules: decideRules, args: []string{"--mode", mode}, envFor: withBin})
			d.refused(`{"jsonrpc":"2.0","id":"w1","method":"fs/write_text_file","params":{"sessionId":"sess_1","path":"$CWD/bin/acp-broker","content":"#!/bin/sh\n"}}`)
			d.refused(`{"jsonrpc":"2.0","id":"t1","method":"terminal/create","params":{"sessionId":"sess_1","command":"cp","args":["/bin/sh","bin/acp-broker"],"cwd":"$CWD"}}`)
			if mode == "bypass" {
				d.refused(`{"jsonrpc":"2.0","id":"w2","method":"fs/write_text_file","params":{"sessionId":"sess_1","path":"$HOME/.bashrc","content":"PATH=/tmp/evil:$PATH\n"}}`)
			}
			d.finish()
			if _, err := os.Stat(filepath.Join(d.cwd, "bin", "acp-broker")); err == nil {
				t.Fatal("a program named acp-broker was written into $PATH")
			}
		})
	}
}

// TestAcceptEditsNeverAllowsAPathItDidNotRead: accept-edits allows an edit
// or a move only where every path it writes is inside the session's
// directories. A move whose locations name a file inside but whose rawInput
// names its destination in a member the broker does not read
// ("destination", "newPath", "target_dir") may write outside: it is asked.
// An ordinary Claude Code edit (old_string, new_string holding slashes) is
// still allowed.
func TestAcceptEditsNeverAllowsAPathItDidNotRead(t *testing.T) {
	t.Parallel()
	move := func(input string) string {
		return `{"toolCallId":"m1","title":"Move src/a.txt","kind":"move","rawInput":` + input + `,"locations":[{"path":"$CWD/src/a.txt"}]}`
	}
	d := startDecider(t, deciderOptions{rules: decideRules, args: []string{"--mode", "accept-edits"}})
	d.play(t, []decideCase{
		{name: "destination", req: permission("1", move(`{"source":"$CWD/src/a.txt","destination":"$HOME/.ssh/authorized_keys"}`), claudeOptions), answer: answer("1", "reject")},
		{name: "camel_case", req: permission("2", move(`{"sourcePath":"src/a.txt","newPath":"../../outside.txt"}`), claudeOptions), answer: answer("2", "reject")},
		{name: "list", req: permission("3", move(`{"target_dir":["/tmp/evil"]}`), claudeOptions), answer: answer("3", "reject")},
		{name: "claude_edit_allowed", req: permission("4", `{"toolCallId":"e1","title":"Edit src/a.txt","kind":"edit","rawInput":{"file_path":"$CWD/src/a.txt","old_string":"// a/b","new_string":"x/y"},"locations":[{"path":"$CWD/src/a.txt"}]}`, claudeOptions), option: "allow"},
	})
}
