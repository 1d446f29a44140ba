//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The tests in this file pin how the broker governs subagents' child
// sessions (ACP's unstable subagents, as claude-agent-acp 0.101 and
// codex-acp 2.6 announce them): a child the agent announced on a session
// the editor opened is decided with that session's rules, where the child
// works; nothing the agent says of a child gives it more than its parent
// has; and the parent's cancel and close reach every child.

// subagentsInit is an editor's initialize that advertises subagents.
const subagentsInit = `{"protocolVersion":1,"clientInfo":{"name":"zed","version":"0.300.0"},"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true,"subagents":{}}}`

// subagentUpdate is the agent's announcement (or later update) of a child
// on parent, as claude-agent-acp sends it: fields are the update's members
// after sessionId (title, cwd, state, ...), raw JSON.
func subagentUpdate(parent, child, fields string) string {
	if fields != "" {
		fields = "," + fields
	}
	return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + parent + `","update":{"sessionUpdate":"subagent_update","sessionId":"` + child + `"` + fields + `}}}`
}

// childPermission is a session/request_permission of session sess.
func childPermission(sess, id, toolCall, options string) string {
	return permissionIn(`"`+sess+`"`, id, toolCall, options)
}

// claudeChildBash is the toolCall of a child's Bash request as
// claude-agent-acp 0.101 sends it: with the parent's tool use in _meta.
func claudeChildBash(id, command string) string {
	c, _ := json.Marshal(command)
	return `{"toolCallId":"` + id + `","name":"Bash","status":"pending","rawInput":{"command":` + string(c) + `,"description":"run it"},"title":` + string(c) + `,"kind":"execute","_meta":{"claudeCode":{"toolName":"Bash","parentToolUseId":"toolu_parent"}}}`
}

// childEdit is the toolCall of an edit of path (as given: relative or not).
func childEdit(id, path string) string {
	return `{"toolCallId":"` + id + `","name":"Edit","title":"Edit ` + path + `","kind":"edit","rawInput":{"file_path":"` + path + `"},"locations":[{"path":"` + path + `"}]}`
}

// worktree makes a directory for a child under the session's project
// (as Claude Code's Agent isolation "worktree" does), with src and gen.
func (d *decider) worktree(t *testing.T, rel string) string {
	t.Helper()
	dir := filepath.Join(d.root, rel)
	for _, sub := range []string{"src", "gen"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestSubagentDecidedWithParentRulesInItsCwd: a child announced with a cwd
// inside the parent's directories is decided by the parent's rules (user
// and project), with `./` anchored at the child's cwd; its writes and
// terminals are judged the same; a grandchild inherits; the audit line
// names parent and child.
func TestSubagentDecidedWithParentRulesInItsCwd(t *testing.T) {
	d := startDecider(t, deciderOptions{rules: decideRules, project: sessionProjectRules, initialize: subagentsInit})
	wt := d.worktree(t, "project/.claude/worktrees/agent-a1")
	wtJSON := jsonText(wt)
	child := "a3f09c2d1b7e4f6a8" // 17 hex digits, as claude-agent-acp names them
	steps := []struct {
		name string
		f    func()
	}{
		{"announce", func() {
			d.AgentToEditor(subagentUpdate("sess_1", child, `"title":"Explore","state":{"state":"running"}`))
			d.AgentToEditor(subagentUpdate("sess_1", child, `"cwd":"`+wtJSON+`"`))
		}},
		{"user_rule_allows", func() {
			d.decided(childPermission(child, "10", claudeChildBash("c1", "git status"), claudeOptions), "allow")
		}},
		{"user_rule_denies", func() {
			d.decided(childPermission(child, "11", claudeChildBash("c2", "git push --force origin main"), claudeOptions), "reject")
		}},
		{"parents_project_rule_denies", func() {
			d.decided(childPermission(child, "12", claudeChildBash("c3", "make deploy prod"), claudeOptions), "reject")
		}},
		{"dot_rule_at_the_childs_cwd_allows_a_relative_edit", func() {
			d.decided(childPermission(child, "13", childEdit("c4", "src/a.go"), claudeOptions), "allow")
		}},
		{"dot_rule_at_the_childs_cwd_allows_an_absolute_edit_there", func() {
			d.decided(childPermission(child, "14", childEdit("c5", wtJSON+"/src/b.go"), claudeOptions), "allow")
		}},
		{"dot_deny_at_the_childs_cwd", func() {
			d.decided(childPermission(child, "15", childEdit("c6", "gen/x.go"), claudeOptions), "reject")
		}},
		{"the_parents_src_is_not_the_childs_dot", func() {
			d.asked(childPermission(child, "16", childEdit("c7", "$CWD/src/a.go"), claudeOptions), answer("16", "reject"))
		}},
		{"announced_then_asked_like_the_parent", func() {
			d.AgentToEditor(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + child + `","update":{"sessionUpdate":"tool_call","toolCallId":"c8","title":"npm install left-pad","kind":"execute","rawInput":{"command":"npm install left-pad"}}}}`)
			d.decided(childPermission(child, "17", `{"toolCallId":"c8","title":"git status","kind":"execute","rawInput":{"command":"git status"}}`, claudeOptions), "reject")
		}},
		{"write_allowed_by_the_rules_is_forwarded", func() {
			w := d.expand(`{"jsonrpc":"2.0","id":18,"method":"fs/write_text_file","params":{"sessionId":"` + child + `","path":"` + wtJSON + `/src/c.go","content":"x"}}`)
			d.AgentToEditor(w)
			d.EditorToAgent(`{"jsonrpc":"2.0","id":18,"result":{}}`)
		}},
		{"terminal_allowed_by_the_rules_is_forwarded", func() {
			term := `{"jsonrpc":"2.0","id":19,"method":"terminal/create","params":{"sessionId":"` + child + `","command":"git","args":["status"],"cwd":"` + wtJSON + `"}}`
			d.AgentToEditor(term)
			d.EditorToAgent(`{"jsonrpc":"2.0","id":19,"result":{"terminalId":"term-1"}}`)
		}},
		{"grandchild_inherits_the_childs_cwd", func() {
			d.AgentToEditor(subagentUpdate(child, "grandchild-1", `"title":"Deeper"`))
			d.decided(childPermission("grandchild-1", "20", childEdit("g1", "src/d.go"), claudeOptions), "allow")
			d.decided(childPermission("grandchild-1", "21", claudeChildBash("g2", "make deploy prod"), claudeOptions), "reject")
		}},
		{"cwd_null_is_back_to_the_parents_directory", func() {
			d.AgentToEditor(subagentUpdate("sess_1", child, `"cwd":null`))
			d.decided(childPermission(child, "22", childEdit("c9", "$CWD/src/a.go"), claudeOptions), "allow")
			d.decided(childPermission(child, "23", childEdit("c10", "src/a.go"), claudeOptions), "allow")
		}},
	}
	for _, s := range steps {
		if !d.step(t, s.name, s.f) {
			return
		}
	}
	d.finish()
	lines := auditLines(t, d.audit)
	for _, id := range []string{"c1", "c2", "g1"} {
		l, ok := lines[id]
		if !ok {
			t.Errorf("no audit line for tool call %s", id)
			continue
		}
		want := map[string]string{"c1": child, "c2": child, "g1": "grandchild-1"}[id]
		parent := map[string]string{"c1": "sess_1", "c2": "sess_1", "g1": child}[id]
		if l["session"] != want || l["parent_session"] != parent {
			t.Errorf("audit line of %s names session %v, parent %v; want %s, %s", id, l["session"], l["parent_session"], want, parent)
		}
	}
}

// auditLines reads the audit log, keyed by tool call id.
func auditLines(t *testing.T, path string) map[string]map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			if id, ok := m["tool_call_id"].(string); ok {
				out[id] = m
			}
		}
	}
	return out
}

// TestSubagentOutsideTheProject: a child whose cwd the agent placed outside
// the parent's directories (by its path, through a link, relative, or
// named as an additional directory) gets nothing from `./` rules: its
// paths are outside the project, its directory is an access of its own,
// and deny rules still apply.
func TestSubagentOutsideTheProject(t *testing.T) {
	d := startDecider(t, deciderOptions{rules: decideRules, project: sessionProjectRules, initialize: subagentsInit})
	elsewhere := d.worktree(t, "elsewhere")
	if err := os.Symlink(elsewhere, filepath.Join(d.cwd, "link-out")); err != nil {
		t.Fatal(err)
	}
	n := 100
	next := func() string { n++; return fmt.Sprint(n) }
	for _, c := range []struct{ name, cwd, dirs string }{
		{"outside", jsonText(elsewhere), ""},
		{"through_a_link", "$CWD/link-out", ""},
		{"in_the_parents_additional_directory_of_its_own", jsonText(elsewhere), `"additionalDirectories":["` + jsonText(elsewhere) + `"]`},
	} {
		child := "child-" + c.name
		if !d.step(t, c.name, func() {
			fields := `"cwd":"` + c.cwd + `"`
			if c.dirs != "" {
				fields += "," + c.dirs
			}
			d.AgentToEditor(d.expand(subagentUpdate("sess_1", child, fields)))
			// A command rule alone does not cover running in a directory
			// outside the project.
			id := next()
			d.asked(childPermission(child, id, claudeChildBash("o"+id, "git status"), claudeOptions), answer(id, "reject"))
			id = next()
			d.asked(childPermission(child, id, childEdit("o"+id, "src/a.go"), claudeOptions), answer(id, "reject"))
			id = next()
			d.asked(childPermission(child, id, childEdit("o"+id, "$CWD/src/a.go"), claudeOptions), answer(id, "reject"))
			// Deny rules, the user's and the parent's project's, still deny.
			id = next()
			d.decided(childPermission(child, id, claudeChildBash("o"+id, "git push --force origin main"), claudeOptions), "reject")
			id = next()
			d.decided(childPermission(child, id, claudeChildBash("o"+id, "make deploy prod"), claudeOptions), "reject")
			// Writes there are not forwarded on the strength of a ./ rule.
			id = next()
			w := d.expand(`{"jsonrpc":"2.0","id":` + id + `,"method":"fs/write_text_file","params":{"sessionId":"` + child + `","path":"` + jsonText(elsewhere) + `/src/a.go","content":"x"}}`)
			d.AgentSend(w)
			if got := d.EditorRecv(); got == w {
				d.t.Fatalf("a write outside the project was forwarded as allowed: %s", clip(got))
			}
			d.drainOwnPrompt(id)
			// Back in the parent's directory, its ./ rules are the child's.
			d.AgentToEditor(subagentUpdate("sess_1", child, `"cwd":null`))
			id = next()
			d.decided(childPermission(child, id, childEdit("o"+id, "src/a.go"), claudeOptions), "allow")
		}) {
			return
		}
	}
	// A cwd that is not an absolute path says nothing the broker can
	// read: nothing of the child is decided, its writes are refused.
	if !d.step(t, "relative_cwd", func() {
		d.AgentToEditor(subagentUpdate("sess_1", "child-relative", ``))
		d.AgentToEditor(subagentUpdate("sess_1", "child-relative", `"cwd":"../elsewhere"`))
		d.asked(childPermission("child-relative", "300", claudeChildBash("r1", "git status"), claudeOptions), answer("300", "reject"))
		w := d.expand(`{"jsonrpc":"2.0","id":301,"method":"fs/write_text_file","params":{"sessionId":"child-relative","path":"$CWD/src/a.go","content":"x"}}`)
		mark := d.marker()
		d.AgentSend(w, mark)
		d.EditorExpect(mark)
		expectError(d.t, d.AgentRecv(), "301", -32000)
	}) {
		return
	}
	d.noisy = true
	d.finish()
}

// drainOwnPrompt answers the broker's own prompt about the agent's request
// id (a write or terminal nobody allowed): the editor is shown a tool call
// of the broker's and asked; it rejects, and the agent gets an error.
func (d *decider) drainOwnPrompt(id string) {
	d.t.Helper()
	for {
		line := d.EditorRecv()
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal([]byte(line), &m)
		if m.Method == "session/request_permission" {
			d.EditorSend(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"outcome":{"outcome":"selected","optionId":"reject_once"}}}`)
			break
		}
	}
	expectError(d.t, d.AgentRecv(), id, -32000)
	d.EditorRecv() // the view of the held request, closed
}

// TestSubagentAnnouncementsThatGiveNothing: a child is taken only from the
// agent's own session/update on a session the editor opened (or on one of
// its children), when the editor advertised subagents, once: another
// session cannot take it over, an opened session is nobody's child, and an
// announcement peers may read differently makes nothing.
func TestSubagentAnnouncementsThatGiveNothing(t *testing.T) {
	gitStatus := func(id string) string { return claudeChildBash(id, "git status") }
	t.Run("editor_did_not_advertise_subagents", func(t *testing.T) {
		d := startDecider(t, deciderOptions{rules: decideRules, initialize: `{"protocolVersion":1,"clientCapabilities":{"subagents":null}}`})
		d.noisy = true
		d.AgentToEditor(subagentUpdate("sess_1", "kid", ""))
		d.asked(childPermission("kid", "1", gitStatus("k1"), claudeOptions), answer("1", "reject"))
		d.refusedUnopened(`{"jsonrpc":"2.0","id":2,"method":"fs/write_text_file","params":{"sessionId":"kid","path":"$CWD/src/a.go","content":"x"}}`)
		d.finish()
	})
	d := startDecider(t, deciderOptions{rules: decideRules, project: sessionProjectRules, initialize: subagentsInit})
	d.noisy = true
	// A second session the editor opened, in a directory of its own
	// without the project's deny rule.
	other := d.worktree(t, "other")
	d.EditorToAgent(`{"jsonrpc":"2.0","id":"new-2","method":"session/new","params":{"cwd":"` + jsonText(other) + `","mcpServers":[]}}`)
	d.AgentToEditor(`{"jsonrpc":"2.0","id":"new-2","result":{"sessionId":"sess_2"}}`)
	steps := []struct {
		name string
		f    func()
	}{
		{"announced_by_the_editor", func() {
			d.EditorToAgent(subagentUpdate("sess_1", "from-editor", ""))
			d.asked(childPermission("from-editor", "10", gitStatus("e1"), claudeOptions), answer("10", "reject"))
		}},
		{"announced_on_a_session_nobody_opened", func() {
			d.AgentToEditor(subagentUpdate("sess_x", "orphan", ""))
			d.asked(childPermission("orphan", "11", gitStatus("e2"), claudeOptions), answer("11", "reject"))
			d.AgentToEditor(subagentUpdate("orphan", "orphan-kid", ""))
			d.asked(childPermission("orphan-kid", "12", gitStatus("e3"), claudeOptions), answer("12", "reject"))
		}},
		{"an_opened_session_is_nobodys_child", func() {
			// sess_1 announced as sess_2's child keeps its own project's
			// deny rule and its own directory.
			d.AgentToEditor(subagentUpdate("sess_2", "sess_1", `"cwd":"`+jsonText(other)+`"`))
			d.decided(permission("13", claudeChildBash("e4", "make deploy prod"), claudeOptions), "reject")
			d.decided(permission("14", childEdit("e5", "src/a.go"), claudeOptions), "allow")
		}},
		{"a_child_keeps_its_parent", func() {
			d.AgentToEditor(subagentUpdate("sess_1", "kid", ""))
			d.AgentToEditor(subagentUpdate("sess_2", "kid", `"cwd":"`+jsonText(other)+`"`))
			// Still sess_1's: its project's deny rule, its directory.
			d.decided(childPermission("kid", "15", claudeChildBash("e6", "make deploy prod"), claudeOptions), "reject")
			d.decided(childPermission("kid", "16", childEdit("e7", "$CWD/src/a.go"), claudeOptions), "allow")
		}},
		{"a_parent_is_not_its_childs_child", func() {
			d.AgentToEditor(subagentUpdate("kid", "kid2", ""))
			d.AgentToEditor(subagentUpdate("kid2", "kid", `"cwd":"`+jsonText(other)+`"`))
			d.decided(childPermission("kid", "17", childEdit("e8", "$CWD/src/a.go"), claudeOptions), "allow")
			d.decided(childPermission("kid2", "18", childEdit("e9", "$CWD/src/a.go"), claudeOptions), "allow")
		}},
		{"an_announcement_peers_read_differently", func() {
			for i, upd := range []string{
				`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"subagent_update","sessionId":"twice","sessionId":"twice-b"}}}`,
				`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"subagent_update","SessionId":"cased"}}}`,
			} {
				d.AgentToEditor(upd)
				for j, sess := range []string{"twice", "twice-b", "cased"} {
					id := fmt.Sprintf("%d%d", 20+i, j)
					d.asked(childPermission(sess, id, gitStatus("a"+id), claudeOptions), answer(id, "reject"))
				}
			}
			// A later update of a known child that cannot be read exactly
			// leaves nothing of it decided.
			d.AgentToEditor(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"subagent_update","sessionId":"kid","cwd":"` + jsonText(other) + `","Cwd":"` + jsonText(d.cwd) + `"}}}`)
			d.asked(childPermission("kid", "30", gitStatus("a30"), claudeOptions), answer("30", "reject"))
		}},
	}
	for _, s := range steps {
		if !d.step(t, s.name, s.f) {
			return
		}
	}
	d.finish()
}

// TestSubagentCancelCascades: the editor's session/cancel of a parent
// answers every pending permission request of it and of each of its
// descendants cancelled, exactly once, whether the editor or only the
// broker has it; the children's prompts are withdrawn at the editor, as is
// the broker's own prompt about a child's write; the editor's late answers
// are dropped. A cancel of a child reaches it and its children, not its
// parent.
func TestSubagentCancelCascades(t *testing.T) {
	d := startDecider(t, deciderOptions{rules: decideRules, initialize: subagentsInit})
	d.AgentToEditor(subagentUpdate("sess_1", "kid", ""), subagentUpdate("kid", "grandkid", ""))
	rm := func(id string) string { return claudeChildBash(id, "rm -rf build") }
	forward := func(req string) {
		d.AgentSend(req)
		d.EditorExpect(req)
	}
	parentReq := permission("1", rm("p1"), claudeOptions)
	kidReq := childPermission("kid", "2", rm("k1"), claudeOptions)
	grandReq := childPermission("grandkid", "3", rm("g1"), claudeOptions)
	// One request the broker holds with its own prompt: a child's write
	// no rule allows.
	write := d.expand(`{"jsonrpc":"2.0","id":4,"method":"fs/write_text_file","params":{"sessionId":"grandkid","path":"$CWD/notes.md","content":"x"}}`)
	var ownID string
	if !d.step(t, "pending", func() {
		forward(parentReq)
		forward(kidReq)
		forward(grandReq)
		d.AgentSend(write)
		for ownID == "" {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			_ = json.Unmarshal([]byte(d.EditorRecv()), &m)
			if m.Method == "session/request_permission" {
				ownID = string(m.ID)
			}
		}
		// The other session's request is not the cancel's.
		forward(childPermission("sess_other", "5", rm("x1"), claudeOptions))
	}) {
		return
	}
	if !d.step(t, "cancel_the_parent", func() {
		cancel := `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess_1"}}`
		d.EditorSend(cancel)
		d.AgentExpect(cancel)
		var got []string
		for range 4 {
			got = append(got, d.AgentRecv())
		}
		slices.Sort(got)
		want := []string{
			`{"jsonrpc":"2.0","id":1,"result":{"outcome":{"outcome":"cancelled"}}}`,
			`{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"cancelled"}}}`,
			`{"jsonrpc":"2.0","id":3,"result":{"outcome":{"outcome":"cancelled"}}}`,
		}
		var errs []string
		for _, l := range got {
			if strings.Contains(l, `"id":4,"error"`) {
				errs = append(errs, l)
			} else if !slices.Contains(want, l) {
				d.t.Errorf("the agent got %s", clip(l))
			}
		}
		if len(errs) != 1 {
			d.t.Errorf("the held write was answered %d times: %q", len(errs), got)
		}
		// At the editor: the children's prompts and the broker's own are
		// withdrawn (not the parent's: session/cancel names it), and the
		// held write's view is closed.
		var withdrawn []string
		for range 4 {
			l := d.EditorRecv()
			if strings.Contains(l, `"$/cancel_request"`) {
				var m struct {
					Params struct{ RequestID json.RawMessage } `json:"params"`
				}
				_ = json.Unmarshal([]byte(l), &m)
				withdrawn = append(withdrawn, string(m.Params.RequestID))
			} else if !strings.Contains(l, `"tool_call_update"`) {
				d.t.Errorf("the editor got %s", clip(l))
			}
		}
		slices.Sort(withdrawn)
		if want := []string{"2", "3", ownID}; !slices.Equal(withdrawn, sortedCopy(want)) {
			d.t.Errorf("withdrawn at the editor: %v, want %v", withdrawn, want)
		}
		// The editor's late answers reach nobody.
		d.EditorSend(
			`{"jsonrpc":"2.0","id":1,"result":{"outcome":{"outcome":"cancelled"}}}`,
			`{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`,
			`{"jsonrpc":"2.0","id":3,"result":{"outcome":{"outcome":"cancelled"}}}`,
		)
		// The other session's request is still the editor's to answer.
		d.EditorToAgent(answer("5", "reject"))
	}) {
		return
	}
	if !d.step(t, "cancel_a_child", func() {
		forward(permission("6", rm("p2"), claudeOptions))
		forward(childPermission("kid", "7", rm("k2"), claudeOptions))
		forward(childPermission("grandkid", "8", rm("g2"), claudeOptions))
		cancel := `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"kid"}}`
		d.EditorSend(cancel)
		d.AgentExpect(cancel)
		got := []string{d.AgentRecv(), d.AgentRecv()}
		slices.Sort(got)
		if want := []string{`{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"cancelled"}}}`, `{"jsonrpc":"2.0","id":8,"result":{"outcome":{"outcome":"cancelled"}}}`}; !slices.Equal(got, want) {
			d.t.Errorf("the agent got %q, want %q", got, want)
		}
		d.EditorExpect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":8}}`)
		d.EditorSend(`{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"cancelled"}}}`)
		// The parent's request is not the child's cancel's.
		d.EditorToAgent(answer("6", "reject"))
	}) {
		return
	}
	d.noisy = true
	d.finish()
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// TestSubagentSessionCloseEndsChildren: when the editor closes the parent,
// its children and theirs are unknown sessions again.
func TestSubagentSessionCloseEndsChildren(t *testing.T) {
	d := startDecider(t, deciderOptions{rules: decideRules, initialize: subagentsInit})
	d.noisy = true
	d.AgentToEditor(subagentUpdate("sess_1", "kid", ""), subagentUpdate("kid", "grandkid", ""))
	if !d.step(t, "open", func() {
		d.decided(childPermission("kid", "1", claudeChildBash("k1", "git status"), claudeOptions), "allow")
		d.decided(childPermission("grandkid", "2", claudeChildBash("g1", "git status"), claudeOptions), "allow")
	}) {
		return
	}
	if !d.step(t, "closed", func() {
		d.EditorToAgent(`{"jsonrpc":"2.0","id":"close-1","method":"session/close","params":{"sessionId":"sess_1"}}`)
		d.AgentToEditor(`{"jsonrpc":"2.0","id":"close-1","result":{}}`)
		d.asked(childPermission("kid", "3", claudeChildBash("k2", "git status"), claudeOptions), answer("3", "reject"))
		d.asked(childPermission("grandkid", "4", claudeChildBash("g2", "git status"), claudeOptions), answer("4", "reject"))
		d.refusedUnopened(`{"jsonrpc":"2.0","id":5,"method":"terminal/create","params":{"sessionId":"kid","command":"git","args":["status"]}}`)
		// Reopened, the session's old children stay unknown until announced anew.
		d.EditorToAgent(d.expand(`{"jsonrpc":"2.0","id":"load-1","method":"session/load","params":{"sessionId":"sess_1","cwd":"$CWD","mcpServers":[]}}`))
		d.AgentToEditor(`{"jsonrpc":"2.0","id":"load-1","result":{}}`)
		d.asked(childPermission("kid", "6", claudeChildBash("k3", "git status"), claudeOptions), answer("6", "reject"))
	}) {
		return
	}
	d.finish()
}
