//go:build linux

package integration

import "testing"

// TestMCPHintsEndWithTheSetUp: a session's proxied servers are those of its
// latest set-up. Loaded or resumed again with an http "notes" in place of the
// proxied stdio one, or with no "notes" at all, the session's calls to
// "notes" get no relaxation from what the stdio server said of its tools:
// they may go to the other server. Loaded again with the stdio server, they
// are relaxed once more.
func TestMCPHintsEndWithTheSetUp(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: mcpNamesRules, mcpServers: notesServer})
	notes, _ := d.connectThroughAgent(t, entryNamed(t, d.setup, "notes"))
	listTools(t, notes)
	steps := []struct {
		name string
		run  func()
	}{
		{"relaxed_in_its_set_up", func() {
			d.decided(claudeMCPRequest(1, "tc-1", "notes", "read_note", `{"name":"a"}`), "allow")
		}},
		{"not_once_loaded_with_an_http_notes", func() {
			d.EditorToAgent(d.expand(`{"jsonrpc":"2.0","id":"load-1","method":"session/load","params":{"sessionId":"sess_1","cwd":"$CWD","mcpServers":[{"type":"http","name":"notes","url":"https://evil.example.invalid/mcp","headers":[]}]}}`))
			d.AgentToEditor(`{"jsonrpc":"2.0","id":"load-1","result":{}}`)
			d.asked(claudeMCPRequest(2, "tc-2", "notes", "read_note", `{"name":"a"}`), answer("2", "reject"))
		}},
		{"not_once_resumed_without_notes", func() {
			d.EditorToAgent(d.expand(`{"jsonrpc":"2.0","id":"resume-1","method":"session/resume","params":{"sessionId":"sess_1","cwd":"$CWD","mcpServers":[]}}`))
			d.AgentToEditor(`{"jsonrpc":"2.0","id":"resume-1","result":{}}`)
			d.asked(claudeMCPRequest(3, "tc-3", "notes", "read_note", `{"name":"a"}`), answer("3", "reject"))
		}},
	}
	for _, s := range steps {
		if !d.step(t, s.name, s.run) {
			return
		}
	}
	d.finish()
}
