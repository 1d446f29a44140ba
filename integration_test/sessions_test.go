//go:build linux

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The tests in this file attack what the broker knows of sessions and tool
// calls: a request is decided only with the directory of a session the
// editor opened, and only on what the agent announced.

// sessionRules adds a project deny rule (in the session's own
// .acp-broker.toml) to the user rules of the decision tests.
const sessionProjectRules = `[[rule]]
id = "project-no-deploy"
decision = "deny"
command = "make deploy *"
`

// permissionIn is permission for another session (raw JSON, "" for none).
func permissionIn(session, id, toolCall, options string) string {
	p := permission(id, toolCall, options)
	if session == "" {
		return strings.Replace(p, `"sessionId":"sess_1",`, "", 1)
	}
	return strings.Replace(p, `"sessionId":"sess_1"`, `"sessionId":`+session, 1)
}

// TestUnknownSessionIsNeverDecided: a request naming a session the editor
// did not open (invented, a case variant of the real one, closed, never
// named) is asked: no rule of the session's directory applies to it, so
// nothing is allowed, and only a deny rule that matches what can be read
// still denies. Writes and terminals of such a session are refused. The
// real session keeps its directory whatever the agent floods.
func TestUnknownSessionIsNeverDecided(t *testing.T) {
	d := startDecider(t, deciderOptions{rules: decideRules, project: sessionProjectRules})
	d.noisy = true
	allowedHere := []struct{ name, toolCall string }{
		{"git_status_allowed_by_a_user_rule", `{"toolCallId":"u1","title":"git status","kind":"execute","rawInput":{"command":"git status"}}`},
		{"read_in_the_project", `{"toolCallId":"u2","title":"Read README.md","kind":"read","rawInput":{"file_path":"$CWD/README.md"},"locations":[{"path":"$CWD/README.md"}]}`},
		{"relative_edit_under_an_allowed_dot_rule", `{"toolCallId":"u3","title":"Edit src/app.ts","kind":"edit","rawInput":{"file_path":"src/app.ts"},"locations":[{"path":"src/app.ts"}]}`},
	}
	deniedHere := []struct{ name, toolCall string }{
		{"edit_under_a_denied_dot_rule", `{"toolCallId":"u4","title":"Edit gen/api.ts","kind":"edit","rawInput":{"file_path":"$CWD/gen/api.ts"},"locations":[{"path":"$CWD/gen/api.ts"}]}`},
		{"command_the_project_denies", `{"toolCallId":"u5","title":"make deploy prod","kind":"execute","rawInput":{"command":"make deploy prod"}}`},
	}
	n := 100
	for _, sess := range []string{`"sess_x"`, `"SESS_1"`, `"sess_1 "`, `42`, ``} {
		for _, c := range append(allowedHere, deniedHere...) {
			n++
			if !d.step(t, fmt.Sprintf("%s_%s", strings.Trim(sess, `"`), c.name), func() {
				d.asked(permissionIn(sess, fmt.Sprint(n), c.toolCall, claudeOptions), answer(fmt.Sprint(n), "reject"))
			}) {
				return
			}
		}
	}
	// A deny rule of the user's, which needs no directory, still denies.
	if !d.step(t, "user_deny_still_denies", func() {
		d.decided(permissionIn(`"sess_x"`, "200", `{"toolCallId":"u6","title":"git push --force origin main","kind":"execute","rawInput":{"command":"git push --force origin main"}}`, claudeOptions), "reject")
	}) {
		return
	}
	// Writes and terminals of a session the editor did not open are
	// refused; the editor never sees them.
	for i, req := range []string{
		`{"jsonrpc":"2.0","id":300,"method":"fs/write_text_file","params":{"sessionId":"sess_x","path":"$CWD/src/app.ts","content":"x"}}`,
		`{"jsonrpc":"2.0","id":301,"method":"fs/write_text_file","params":{"path":"$CWD/src/app.ts","content":"x"}}`,
		`{"jsonrpc":"2.0","id":302,"method":"terminal/create","params":{"sessionId":"sess_x","command":"ls"}}`,
		`{"jsonrpc":"2.0","id":303,"method":"terminal/create","params":{"sessionId":"SESS_1","command":"git","args":["status"]}}`,
	} {
		if !d.step(t, fmt.Sprintf("refused_%d", i), func() {
			req = d.expand(req)
			mark := d.marker()
			d.AgentSend(req, mark)
			if got := d.EditorRecv(); got != mark {
				d.t.Fatalf("the editor got %s", clip(got))
			}
			msg := expectError(d.t, d.AgentRecv(), requestID(d.t, req), -32000)
			if !strings.Contains(msg, "did not open session") && !strings.Contains(msg, "names no session") {
				d.t.Errorf("error message %q", msg)
			}
		}) {
			return
		}
	}

	// A flood of updates for 1,500 invented sessions leaves the real one
	// its directory: its rules still decide.
	if !d.step(t, "flood", func() {
		var flood []string
		for i := range 1500 {
			flood = append(flood, fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"fake-%d","update":{"sessionUpdate":"tool_call","toolCallId":"x","kind":"read","title":"x"}}}`, i))
		}
		d.AgentToEditor(flood...)
		d.decided(permission(`400`, `{"toolCallId":"f1","title":"Edit src/app.ts","kind":"edit","rawInput":{"file_path":"$CWD/src/app.ts"},"locations":[{"path":"$CWD/src/app.ts"}]}`, claudeOptions), "allow")
		d.decided(permission(`401`, `{"toolCallId":"f2","title":"Edit gen/api.ts","kind":"edit","rawInput":{"file_path":"$CWD/gen/api.ts"},"locations":[{"path":"$CWD/gen/api.ts"}]}`, claudeOptions), "reject")
		d.decided(permission(`402`, `{"toolCallId":"f3","title":"make deploy prod","kind":"execute","rawInput":{"command":"make deploy prod"}}`, claudeOptions), "reject")
	}) {
		return
	}
	// Once closed, the session is unknown again.
	if !d.step(t, "closed", func() {
		d.EditorToAgent(`{"jsonrpc":"2.0","id":"close-1","method":"session/close","params":{"sessionId":"sess_1"}}`)
		d.AgentToEditor(`{"jsonrpc":"2.0","id":"close-1","result":{}}`)
		d.asked(permission(`500`, `{"toolCallId":"c1","title":"git status","kind":"execute","rawInput":{"command":"git status"}}`, claudeOptions), answer(`500`, "reject"))
		d.refusedUnopened(`{"jsonrpc":"2.0","id":501,"method":"fs/write_text_file","params":{"sessionId":"sess_1","path":"$CWD/src/app.ts","content":"x"}}`)
	}) {
		return
	}
	// A session/new the agent fails opens nothing; session/load opens the
	// session the editor named, whatever id the agent answers with.
	if !d.step(t, "failed_new_and_load", func() {
		d.EditorToAgent(d.expand(`{"jsonrpc":"2.0","id":"new-2","method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
		d.AgentToEditor(`{"jsonrpc":"2.0","id":"new-2","error":{"code":-32603,"message":"no","data":{"sessionId":"sess_2"}}}`)
		d.asked(permissionIn(`"sess_2"`, `600`, `{"toolCallId":"l1","title":"git status","kind":"execute","rawInput":{"command":"git status"}}`, claudeOptions), answer(`600`, "reject"))
		d.EditorToAgent(d.expand(`{"jsonrpc":"2.0","id":"load-1","method":"session/load","params":{"sessionId":"sess_3","cwd":"$CWD","mcpServers":[]}}`))
		d.AgentToEditor(`{"jsonrpc":"2.0","id":"load-1","result":{"sessionId":"sess_4"}}`)
		d.decided(permissionIn(`"sess_3"`, `601`, `{"toolCallId":"l2","title":"git status","kind":"execute","rawInput":{"command":"git status"}}`, claudeOptions), "allow")
		d.asked(permissionIn(`"sess_4"`, `602`, `{"toolCallId":"l3","title":"git status","kind":"execute","rawInput":{"command":"git status"}}`, claudeOptions), answer(`602`, "reject"))
	}) {
		return
	}
	// A new session the agent gives the id of one already open (sess_3,
	// in the project) would have that session's requests judged in the
	// other's directory (here the home directory, where no project rule
	// denies): both are one id, so nothing of it is decided, and its
	// writes are refused.
	if !d.step(t, "new_session_reusing_an_open_id", func() {
		d.EditorToAgent(d.expand(`{"jsonrpc":"2.0","id":"new-3","method":"session/new","params":{"cwd":"$HOME","mcpServers":[]}}`))
		d.AgentToEditor(`{"jsonrpc":"2.0","id":"new-3","result":{"sessionId":"sess_3"}}`)
		d.asked(permissionIn(`"sess_3"`, `700`, `{"toolCallId":"r1","title":"git status","kind":"execute","rawInput":{"command":"git status"}}`, claudeOptions), answer(`700`, "reject"))
		d.asked(permissionIn(`"sess_3"`, `701`, `{"toolCallId":"r2","title":"make deploy prod","kind":"execute","rawInput":{"command":"make deploy prod"}}`, claudeOptions), answer(`701`, "reject"))
		d.EditorToAgent(d.expand(`{"jsonrpc":"2.0","id":"fork-1","method":"session/fork","params":{"sessionId":"sess_3","cwd":"$CWD","mcpServers":[]}}`))
		d.AgentToEditor(`{"jsonrpc":"2.0","id":"fork-1","result":{"sessionId":"sess_3"}}`)
		d.asked(permissionIn(`"sess_3"`, `702`, `{"toolCallId":"r3","title":"git status","kind":"execute","rawInput":{"command":"git status"}}`, claudeOptions), answer(`702`, "reject"))
	}) {
		return
	}
	d.finish()
	audit, _ := os.ReadFile(d.audit)
	if !strings.Contains(string(audit), `the editor did not open session \"sess_x\"`) {
		t.Errorf("no audit line says why sess_x was asked:\n%s", audit)
	}
}

// refusedUnopened is refused for a session the editor did not open.
func (d *decider) refusedUnopened(req string) {
	d.t.Helper()
	req = d.expand(req)
	mark := d.marker()
	d.AgentSend(req, mark)
	if got := d.EditorRecv(); got != mark {
		d.t.Fatalf("the editor got %s", clip(got))
	}
	if msg := expectError(d.t, d.AgentRecv(), requestID(d.t, req), -32000); !strings.Contains(msg, "did not open session") {
		d.t.Errorf("error message %q", msg)
	}
}

// TestNullDoesNotEraseTheAnnouncement: null in a tool_call_update, or in
// the permission request's own toolCall, leaves what the agent announced,
// and a request that says something else than the announcement (another
// command, kind, path, tool) is never allowed.
func TestNullDoesNotEraseTheAnnouncement(t *testing.T) {
	d := startDecider(t, deciderOptions{rules: decideRules})
	sshRead := func(id string) string {
		return toolCallUpdate("tool_call", `"toolCallId":"`+id+`","title":"Read ~/.ssh/id_ed25519","kind":"read","status":"pending","rawInput":{"file_path":"$HOME/.ssh/id_ed25519"},"locations":[{"path":"$HOME/.ssh/id_ed25519"}]`)
	}
	install := func(id string) string {
		return toolCallUpdate("tool_call", `"toolCallId":"`+id+`","title":"npm install left-pad","kind":"execute","status":"pending","rawInput":{"command":"npm install left-pad"},"_meta":{"claudeCode":{"toolName":"Bash"}}`)
	}
	readme := `"rawInput":{"file_path":"$CWD/README.md"},"locations":[{"path":"$CWD/README.md"}]`
	d.play(t, []decideCase{
		{
			name:   "request_with_null_locations_and_input",
			before: []string{sshRead("n1")},
			req:    permission(`1`, `{"toolCallId":"n1","title":"Read README.md","kind":"read","locations":null,"rawInput":null}`, claudeOptions),
			answer: answer(`1`, "reject"),
		},
		{
			name:   "update_with_nulls_before_the_request",
			before: []string{sshRead("n2"), toolCallUpdate("tool_call_update", `"toolCallId":"n2","title":"Read README.md","locations":null,"rawInput":null,"kind":null`)},
			req:    permission(`2`, `{"toolCallId":"n2"}`, claudeNewOptions),
			answer: answer(`2`, "reject"),
		},
		{
			name:   "null_input_hides_a_denied_command",
			before: []string{install("n3")},
			req:    permission(`3`, `{"toolCallId":"n3","title":"git status","rawInput":null}`, claudeOptions),
			option: "reject",
		},
		{
			name:   "update_with_null_input_hides_a_denied_command",
			before: []string{install("n4"), toolCallUpdate("tool_call_update", `"toolCallId":"n4","title":"git status","rawInput":null,"_meta":null`)},
			req:    permission(`4`, `{"toolCallId":"n4","title":"git status"}`, claudeOptions),
			option: "reject",
		},
		{
			name:   "nested_null_command_hiding_a_denied_one_is_rejected",
			before: []string{install("n5")},
			req:    permission(`5`, `{"toolCallId":"n5","title":"git status","rawInput":{"command":null}}`, claudeOptions),
			option: "reject",
		},
		{
			// What may run is the announced, denied, command.
			name:   "request_with_another_command_hiding_a_denied_one_is_rejected",
			before: []string{install("n6")},
			req:    permission(`6`, `{"toolCallId":"n6","title":"git status","rawInput":{"command":"git status"}}`, claudeOptions),
			option: "reject",
		},
		{
			// The first disagreeing request did not become the announcement.
			name:   "the_same_disagreeing_request_again_is_rejected",
			req:    permission(`66`, `{"toolCallId":"n6","title":"git status","rawInput":{"command":"git status"}}`, claudeOptions),
			option: "reject",
		},
		{
			name:   "request_with_another_command_is_asked",
			before: []string{toolCallUpdate("tool_call", `"toolCallId":"n61","title":"make build","kind":"execute","status":"pending","rawInput":{"command":"make build"}`)},
			req:    permission(`61`, `{"toolCallId":"n61","title":"git status","rawInput":{"command":"git status"}}`, claudeOptions),
			answer: answer(`61`, "reject"),
		},
		{
			name:   "request_for_an_allowed_path_hiding_a_denied_one_is_rejected",
			before: []string{toolCallUpdate("tool_call", `"toolCallId":"n62","title":"Edit gen/api.go","kind":"edit","status":"pending","rawInput":{"file_path":"$CWD/gen/api.go"},"locations":[{"path":"$CWD/gen/api.go"}]`)},
			req:    permission(`62`, `{"toolCallId":"n62","title":"Edit src/api.go","kind":"edit","rawInput":{"file_path":"$CWD/src/api.go"},"locations":[{"path":"$CWD/src/api.go"}]}`, claudeOptions),
			option: "reject",
		},
		{
			name:   "request_with_other_locations_is_asked",
			before: []string{sshRead("n7")},
			req:    permission(`7`, `{"toolCallId":"n7","title":"Read README.md","kind":"read",`+readme+`}`, claudeOptions),
			answer: answer(`7`, "reject"),
		},
		{
			name:   "request_with_another_kind_is_asked",
			before: []string{toolCallUpdate("tool_call", `"toolCallId":"n8","title":"Edit README.md","kind":"edit","status":"pending",`+readme)},
			req:    permission(`8`, `{"toolCallId":"n8","title":"Read README.md","kind":"read"}`, claudeOptions),
			answer: answer(`8`, "reject"),
		},
		{
			name:   "request_with_another_tool_name_is_asked",
			before: []string{toolCallUpdate("tool_call", `"toolCallId":"n9","title":"git status","kind":"execute","status":"pending","rawInput":{"command":"git status"},"_meta":{"claudeCode":{"toolName":"Bash"}}`)},
			req:    permission(`9`, `{"toolCallId":"n9","title":"git status","_meta":{"claudeCode":{"toolName":"Read"}}}`, claudeOptions),
			answer: answer(`9`, "reject"),
		},
		{
			name:   "second_tool_call_with_less_keeps_the_first",
			before: []string{sshRead("n10"), toolCallUpdate("tool_call", `"toolCallId":"n10","title":"Read README.md","kind":"read","status":"pending"`)},
			req:    permission(`10`, `{"toolCallId":"n10","title":"Read README.md"}`, claudeOptions),
			answer: answer(`10`, "reject"),
		},
		{
			// Repeating the announcement, in another spelling, is agreeing.
			name:   "request_repeating_the_announcement_is_decided",
			before: []string{toolCallUpdate("tool_call", `"toolCallId":"n11","title":"Read README.md","kind":"read","status":"pending",`+readme)},
			req:    permission(`11`, `{"toolCallId":"n11","kind":"read","locations":[ {"line":null,"path":"$CWD/README.md"} ],"rawInput":{ "file_path" : "$CWD/README.md" }}`, claudeOptions),
			option: "allow",
		},
		{
			name:   "request_adding_to_the_input_is_decided",
			before: []string{toolCallUpdate("tool_call", `"toolCallId":"n13","title":"git status","kind":"execute","status":"pending","rawInput":{"command":"git status"}`)},
			req:    permission(`13`, `{"toolCallId":"n13","title":"git status","rawInput":{"command":"git status","reason":"see what changed"}}`, claudeOptions),
			option: "allow",
		},
		{
			name:   "request_dropping_from_the_input_is_asked",
			before: []string{toolCallUpdate("tool_call", `"toolCallId":"n14","title":"git status","kind":"execute","status":"pending","rawInput":{"command":"git status","cwd":"$ROOT"}`)},
			req:    permission(`14`, `{"toolCallId":"n14","title":"git status","rawInput":{"command":"git status"}}`, claudeOptions),
			answer: answer(`14`, "reject"),
		},
		{
			name:   "request_filling_in_a_placeholder_is_decided",
			before: []string{toolCallUpdate("tool_call", `"toolCallId":"n12","title":"Terminal","kind":"execute","status":"pending","rawInput":{}`)},
			req:    permission(`12`, `{"toolCallId":"n12","title":"git status","rawInput":{"command":"git status"}}`, claudeOptions),
			option: "allow",
		},
	})
	audit, _ := os.ReadFile(filepath.Join(d.root, "audit.jsonl"))
	if !strings.Contains(string(audit), "is not what the agent announced") {
		t.Errorf("no audit line names the disagreement:\n%s", audit)
	}
}
