//go:build linux

package integration

import "testing"

// githubAllRules trusts every tool of the github server.
const githubAllRules = "[[rule]]\nid = \"github-all\"\ndecision = \"allow\"\nmcp = \"github/*\"\n"

// TestMCPNamesThatSplitTwoWaysAreAsked: rules name an MCP tool as
// server/tool, and github-all allows github/*. A call whose server name
// holds a '/' (Codex's rawInput.server, Gemini's "tool (server MCP Server)"
// title), a Codex title "Tool: a/b/c", or a Claude name mcp__a__b__c that
// splits into server and tool in two ways may be another server's
// (github/evil, github__get_issue): none is allowed by the rule, each goes
// to the human, and `rules explain` says the same. github's own get_issue
// still is allowed.
func TestMCPNamesThatSplitTwoWaysAreAsked(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: githubAllRules})
	d.play(t, []decideCase{
		{name: "codex_server_with_a_slash",
			req:    permission(`1`, `{"toolCallId":"c1","title":"get_secrets","kind":"other","rawInput":{"server":"github/evil","tool":"get_secrets","arguments":{}}}`, codexOptions),
			answer: answer(`1`, "denied")},
		{name: "codex_title_with_two_slashes",
			req:    permission(`2`, `{"toolCallId":"c2","title":"Tool: github/evil/get_secrets","kind":"other"}`, codexOptions),
			answer: answer(`2`, "denied")},
		{name: "gemini_server_with_a_slash",
			req:    permission(`3`, `{"toolCallId":"c3","title":"get_secrets (github/evil MCP Server)","kind":"other"}`, geminiOptions),
			answer: answer(`3`, "cancel")},
		{name: "claude_name_that_splits_twice",
			req:    claudeMCPRequest(4, "c4", "github", "get_issue__x", `{}`),
			answer: answer(`4`, "reject")},
		{name: "githubs_own_tool_is_still_allowed",
			req:    claudeMCPRequest(5, "c5", "github", "get_issue", `{"number":1}`),
			option: "allow"},
	})
}
