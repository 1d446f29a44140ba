//go:build linux

package integration

import (
	"testing"
)

// TestSessionAlwaysIsRememberedForTheSessionOnly: an "always" whose option
// lasts the session (gemini-cli's proceed_always, proceed_always_server and
// proceed_always_tool, which it never persists; claude-agent-acp's
// allow-with-updates named "... during this session"; any option whose name
// says "for this session", "this conversation") is remembered by the broker
// for that session only, not in the project where every later session would
// find it: the human agreed to no more. An option for good (gemini-cli's
// proceed_always_and_save, claude-agent-acp's "don't ask again for ...
// commands") is still remembered in the project, and one named for the turn
// not at all.
func TestSessionAlwaysIsRememberedForTheSessionOnly(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{})
	d.EditorToAgent(d.expand(`{"jsonrpc":"2.0","id":"new-2","method":"session/new","params":{"cwd":"$CWD","additionalDirectories":["$LIB"],"mcpServers":[]}}`))
	d.AgentToEditor(`{"jsonrpc":"2.0","id":"new-2","result":{"sessionId":"sess_2","modes":{"currentModeId":"default","availableModes":[]}}}`)

	geminiExec := func(id, title string) string {
		return `{"toolCallId":"run_shell_command-` + id + `","title":"` + title + `","kind":"execute","status":"pending","content":[]}`
	}
	geminiMCP := func(id, tool string) string {
		return `{"toolCallId":"` + tool + `-` + id + `","title":"` + tool + ` (github MCP Server)","kind":"other","status":"pending","content":[]}`
	}
	claudeEdit := func(id, file string) string {
		return `{"toolCallId":"` + id + `","title":"Edit ` + file + `","kind":"edit","rawInput":{"file_path":"$CWD/` + file + `","old_string":"a","new_string":"b"}}`
	}
	claudeEditSession := `[{"optionId":"allow-with-updates","name":"Yes, allow all edits during this session","kind":"allow_always"},{"optionId":"allow-once","name":"Yes","kind":"allow_once"},{"optionId":"reject","name":"No","kind":"reject_once"}]`
	claudeEditProject := `[{"optionId":"allow-with-updates","name":"Yes, and always allow access to src/ from this project","kind":"allow_always"},{"optionId":"allow-once","name":"Yes","kind":"allow_once"},{"optionId":"reject","name":"No","kind":"reject_once"}]`
	namedTurn := `[{"optionId":"yes-turn","name":"Yes, for the rest of this turn","kind":"allow_always"},{"optionId":"yes","name":"Yes","kind":"allow_once"},{"optionId":"no","name":"No","kind":"reject_once"}]`

	cases := []struct {
		name         string
		first, again string // the same request, in sess_1 and then in sess_2
		options      string
		chosen, once string
		// inProject: remembered for every session of the project.
		inProject bool
		// nothing: not remembered at all.
		nothing bool
	}{
		{name: "gemini_proceed_always", first: geminiExec("a1", "make docs"), again: geminiExec("a2", "make docs"), options: geminiOptions, chosen: "proceed_always", once: "proceed_once"},
		{name: "gemini_for_this_session", first: geminiExec("b1", "make lint"), again: geminiExec("b2", "make lint"), options: geminiSaveOptions, chosen: "proceed_always", once: "proceed_once"},
		{name: "gemini_all_server_tools", first: geminiMCP("c1", "create_issue"), again: geminiMCP("c2", "create_issue"), options: geminiMCPOptions, chosen: "proceed_always_server", once: "proceed_once"},
		{name: "gemini_one_tool", first: geminiMCP("d1", "close_issue"), again: geminiMCP("d2", "close_issue"), options: geminiMCPOptions, chosen: "proceed_always_tool", once: "proceed_once"},
		{name: "claude_edits_during_this_session", first: claudeEdit("e1", "src/a.ts"), again: claudeEdit("e2", "src/a.ts"), options: claudeEditSession, chosen: "allow-with-updates", once: "allow-once"},
		{name: "named_for_the_turn", first: geminiExec("f1", "make fmt"), again: geminiExec("f2", "make fmt"), options: namedTurn, chosen: "yes-turn", once: "yes", nothing: true},
		{name: "gemini_for_all_future_sessions", first: geminiExec("g1", "make dist"), again: geminiExec("g2", "make dist"), options: geminiSaveOptions, chosen: "proceed_always_and_save", once: "proceed_once", inProject: true},
		{name: "claude_from_this_project", first: claudeEdit("h1", "src/b.ts"), again: claudeEdit("h2", "src/b.ts"), options: claudeEditProject, chosen: "allow-with-updates", once: "allow-once", inProject: true},
	}
	n := 0
	for _, c := range cases {
		if !d.step(t, c.name, func() {
			n++
			first := permission(d.quoteID(n, 1), c.first, c.options)
			d.answeredAs(first, c.chosen, c.once)
			// In its own session the answer stands, unless it was for
			// the turn.
			again := permission(d.quoteID(n, 2), c.again, c.options)
			if c.nothing {
				d.asked(again, answer(d.quoteID(n, 2), c.once))
			} else {
				d.liveOnly("an answer remembered for this session, or one the dry run reads from the store")
				d.decided(again, c.once)
			}
			// In another session of the same project only an answer for
			// good stands.
			other := permissionIn(`"sess_2"`, d.quoteID(n, 3), c.again, c.options)
			if c.inProject {
				d.decided(other, c.once)
			} else {
				d.asked(other, answer(d.quoteID(n, 3), c.once))
			}
		}) {
			return
		}
	}
	d.finish()
}

// quoteID is a request id for step n's request i.
func (d *decider) quoteID(n, i int) string {
	return `"s` + string(rune('0'+n)) + `-` + string(rune('0'+i)) + `"`
}
