//go:build linux

package integration

import (
	"strings"
	"testing"
)

// mcpNamesRules trusts the notes server's annotations and lists one of its
// tools as read-only: both relax calls to "notes".
const mcpNamesRules = "[mcp.notes]\ntrust_annotations = true\nread_only_tools = [\"search_notes\"]\n"

// TestMCPNameCollisionNeverRelaxes: when a session has two MCP servers whose
// names an agent may confuse (the same name, the same name in another case,
// or names that Claude's mcp__server__tool or Gemini's server_tool make
// one), the trusted, proxied notes server's read-only hints and its
// read_only_tools relax no call to "notes": the agent may route it to the
// other server. Without a collision the same calls are allowed.
func TestMCPNameCollisionNeverRelaxes(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, other string }{
		{"none", ""},
		{"same_name_http", `{"type":"http","name":"notes","url":"https://mcp.example.invalid/mcp","headers":[]}`},
		{"same_name_sse", `{"type":"sse","name":"notes","url":"https://mcp.example.invalid/sse","headers":[]}`},
		{"same_name_stdio", `{"name":"notes","command":"/usr/bin/other-notes","args":[],"env":[]}`},
		{"other_case", `{"type":"http","name":"Notes","url":"https://mcp.example.invalid/mcp","headers":[]}`},
		{"upper_case_stdio", `{"name":"NOTES","command":"/usr/bin/other-notes","args":[],"env":[]}`},
		{"gemini_mangling", `{"type":"http","name":"notes_read","url":"https://mcp.example.invalid/mcp","headers":[]}`},
		{"claude_mangling", `{"type":"http","name":"notes__read","url":"https://mcp.example.invalid/mcp","headers":[]}`},
		{"punctuation_mangled", `{"type":"http","name":"notes.read","url":"https://mcp.example.invalid/mcp","headers":[]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			servers := `[{"name":"notes","command":"$MCPSERVER","args":[],"env":[]},{"type":"http","name":"web","url":"https://mcp.example.invalid/mcp","headers":[]}]`
			if c.other != "" {
				servers = strings.TrimSuffix(servers, "]") + "," + c.other + "]"
			}
			d := startDecider(t, deciderOptions{rules: mcpNamesRules, mcpServers: servers})
			d.noisy = true
			notes, _ := d.connectThroughAgent(t, entryNamed(t, d.setup, "notes"))
			listTools(t, notes)
			requests := []string{
				claudeMCPRequest(1, "tc-1", "notes", "read_note", `{"name":"a"}`),
				// Codex names the server and tool in rawInput.
				`{"jsonrpc":"2.0","id":2,"method":"session/request_permission","params":{"sessionId":"sess_1","toolCall":{"toolCallId":"tc-2","title":"Tool: notes/read_note","kind":"other","rawInput":{"server":"notes","tool":"read_note","arguments":{"name":"a"}}},"options":` + codexOptions + `}}`,
				// Listed in read_only_tools.
				claudeMCPRequest(3, "tc-3", "notes", "search_notes", `{"query":"q"}`),
			}
			options := []string{"allow", "approved", "allow"}
			for i, req := range requests {
				ok := d.step(t, "request "+requestID(t, req), func() {
					if c.other == "" {
						d.decided(req, options[i])
						return
					}
					d.asked(req, answer(requestID(t, req), "reject"))
					rec := waitAudit(t, d.audit, "the request", byToolCall("tc-"+requestID(t, req)))
					if !strings.Contains(rec.Reason, "which an agent may confuse") {
						t.Errorf("asked with reason %q", rec.Reason)
					}
				})
				if !ok {
					return
				}
			}
			if c.other != "" {
				d.step(t, "the set-up is noted", func() {
					d.WaitStderr("the warning", func(l string) bool { return strings.Contains(l, "names an agent may confuse") })
					rec := waitAudit(t, d.audit, "the rewrite", func(r auditRecord) bool { return r.Decision == "rewritten" })
					if !strings.Contains(rec.Reason, "names collide: always asked") {
						t.Errorf("rewrite reason %q", rec.Reason)
					}
				})
			}
			d.finish()
		})
	}
}

// TestMCPHintsStayInTheirSession: a session whose own "notes" is an http
// server (not proxied, never listed) gets no relaxation from what another
// session's proxied, trusted "notes" said of its tools; nor does a session
// that has no "notes" at all (a server the agent configured itself). (What
// the user's own config says of a name, read_only_tools, applies to the
// name in every session, as rules do.)
func TestMCPHintsStayInTheirSession(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: mcpNamesRules, mcpServers: notesServer})
	notes, _ := d.connectThroughAgent(t, entryNamed(t, d.setup, "notes"))
	listTools(t, notes)
	inSession := func(session, req string) string {
		return strings.Replace(req, `"sessionId":"sess_1"`, `"sessionId":"`+session+`"`, 1)
	}
	steps := []struct {
		name string
		run  func()
	}{
		{"relaxed_in_its_own_session", func() {
			d.decided(claudeMCPRequest(1, "tc-1", "notes", "read_note", `{"name":"a"}`), "allow")
		}},
		{"not_in_a_session_whose_notes_is_http", func() {
			d.EditorToAgent(d.expand(`{"jsonrpc":"2.0","id":"new-2","method":"session/new","params":{"cwd":"$CWD","mcpServers":[{"type":"http","name":"notes","url":"https://evil.example.invalid/mcp","headers":[]}]}}`))
			d.AgentToEditor(`{"jsonrpc":"2.0","id":"new-2","result":{"sessionId":"sess_2"}}`)
			d.asked(inSession("sess_2", claudeMCPRequest(2, "tc-2", "notes", "read_note", `{"name":"a"}`)), answer("2", "reject"))
		}},
		{"not_in_a_session_without_notes", func() {
			d.EditorToAgent(d.expand(`{"jsonrpc":"2.0","id":"new-3","method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
			d.AgentToEditor(`{"jsonrpc":"2.0","id":"new-3","result":{"sessionId":"sess_3"}}`)
			d.asked(inSession("sess_3", claudeMCPRequest(4, "tc-4", "notes", "read_note", `{"name":"a"}`)), answer("4", "reject"))
		}},
		{"still_relaxed_in_its_own_session", func() {
			d.decided(claudeMCPRequest(5, "tc-5", "notes", "read_note", `{"name":"a"}`), "allow")
		}},
	}
	for _, s := range steps {
		if !d.step(t, s.name, s.run) {
			return
		}
	}
	d.finish()
}
