//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// The tests in this file pin what the editor is told when the broker answers
// a permission request itself ([ask] tell, the README's "Deciding live"): a
// notice where the editor advertised session.notices, else an agent message
// in the session, before the agent is answered, so before anything the
// agent says of the answer; and nothing else of the conversation changes.

// noticesInit is an editor's initialize that advertises session notices.
const noticesInit = `{"protocolVersion":1,"clientCapabilities":{"session":{"notices":{}}}}`

// toldTitle reads a line the broker told the editor: a notice's title and
// description, or the two lines of an agent message chunk that starts on a
// line of its own ("\ntitle\ndescription\n"); "", "" for any other line.
func toldTitle(line string) (title, description string) {
	var m struct {
		Method string `json:"method"`
		Params struct {
			SessionID string `json:"sessionId"`
			Update    struct {
				SessionUpdate string `json:"sessionUpdate"`
				Title         string `json:"title"`
				Description   string `json:"description"`
				Content       struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"update"`
		} `json:"params"`
	}
	if json.Unmarshal([]byte(line), &m) != nil || m.Method != "session/update" {
		return "", ""
	}
	switch u := m.Params.Update; u.SessionUpdate {
	case "notice":
		return u.Title, u.Description
	case "agent_message_chunk":
		lines := strings.Split(u.Content.Text, "\n")
		if len(lines) == 4 && lines[0] == "" && lines[3] == "" {
			return lines[1], lines[2]
		}
	}
	return "", ""
}

// isTold reports whether a line the editor got is the broker telling it of
// an answer it gave itself.
func isTold(line string) bool {
	title, _ := toldTitle(line)
	return strings.HasPrefix(title, "acp-broker allowed: ") || strings.HasPrefix(title, "acp-broker denied: ")
}

// EditorTold requires the editor's next line to be the broker telling it
// that it answered a request itself with verb ("allowed" or "denied"), and
// returns the title and description.
func (s *session) EditorTold(verb string) (title, description string) {
	s.t.Helper()
	line := s.EditorRecv()
	title, description = toldTitle(line)
	if !strings.HasPrefix(title, "acp-broker "+verb+": ") {
		s.t.Fatalf("editor received\n  %s\nwant the broker telling it that it %s a request", clip(line), verb)
	}
	return title, description
}

// ruleAt is where a rule of decideRules is, as the broker names it:
// the config file and the line of its [[rule]] header.
func (d *decider) ruleAt(t *testing.T, id string) string {
	t.Helper()
	lines := strings.Split(decideRules, "\n")
	for i, l := range lines {
		if l == `id = "`+id+`"` {
			return fmt.Sprintf("%s:%d", d.config, i) // the header is the line before, numbered from 1
		}
	}
	t.Fatalf("test bug: no rule %q in decideRules", id)
	return ""
}

// decodeLine decodes a JSON line for comparing it whole.
func decodeLine(t *testing.T, line string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(line), &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, line)
	}
	return v
}

// refusedUpdate is what claude-agent-acp sends once a permission is refused.
func refusedUpdate(toolCallID string) string {
	return toolCallUpdate("tool_call_update", `"toolCallId":"`+toolCallID+`","status":"failed","content":[{"type":"content","content":{"type":"text","text":"User refused permission to run tool"}}]`)
}

// TestTellDenyByRuleBeforeTheAgentsUpdate: a deny by rule is told to the
// editor, with the rule's id, file:line and reason, as a notice when the
// editor takes notices and as an agent message otherwise, and before the
// update the agent sends once answered; everything else reaches the editor
// as it was sent.
func TestTellDenyByRuleBeforeTheAgentsUpdate(t *testing.T) {
	t.Parallel()
	const toolCall = `{"toolCallId":"toolu_1","kind":"execute","title":"git push --force origin main","rawInput":{"command":"git push --force origin main"}}`
	v1 := permission(`"d1"`, toolCall, claudeNewOptions)
	for _, c := range []struct {
		name, init, req string
		notice          bool
	}{
		{"notice", noticesInit, v1, true},
		{"agent_message", `{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}`, v1, false},
		{"no_initialize", "", v1, false},
		// Every ACP v2 editor takes notices.
		{"acp_v2", v2Init, v2Permission(`"d1"`, `"git push --force origin main"`, `{"type":"tool_call","toolCall":`+toolCall+`}`, claudeNewOptions), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := startDecider(t, deciderOptions{rules: decideRules, initialize: c.init})
			d.AgentSend(c.req)
			d.AgentExpect(selected(`"d1"`, "reject"))
			d.AgentSend(refusedUpdate("toolu_1"))
			told := d.EditorRecv()
			d.EditorExpect(refusedUpdate("toolu_1"))
			title := "acp-broker denied: git push --force origin main"
			description := "rule no-force-push (" + d.ruleAt(t, "no-force-push") + "): force pushes rewrite shared history"
			var want string
			if c.notice {
				want = fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"notice","severity":"warning","title":%q,"description":%q}}}`, title, description)
			} else {
				want = fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q}}}}`, "\n"+title+"\n"+description+"\n")
			}
			if !reflect.DeepEqual(decodeLine(t, told), decodeLine(t, want)) {
				t.Errorf("the editor was told\n  %s\nwant\n  %s", told, want)
			}
			// What the editor is told never reaches the agent.
			d.AgentToEditor(d.marker())
			d.finish()
		})
	}
}

// TestTellOff: with [ask] tell = "off" the broker tells the editor nothing of
// its answers.
func TestTellOff(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules + "\n[ask]\ntell = \"off\"\n", initialize: noticesInit})
	d.AgentSend(permission(`"d1"`, `{"toolCallId":"toolu_1","kind":"execute","title":"git push --force origin main","rawInput":{"command":"git push --force origin main"}}`, claudeNewOptions))
	d.AgentExpect(selected(`"d1"`, "reject"))
	d.AgentSend(permission(`"d2"`, `{"toolCallId":"toolu_2","kind":"execute","title":"git status","rawInput":{"command":"git status"}}`, claudeNewOptions))
	d.AgentExpect(selected(`"d2"`, "allow-once"))
	d.AgentToEditor(refusedUpdate("toolu_1"))
	d.finish()
}

// TestTellAll: with [ask] tell = "all" allows are told too, each with what
// decided it: a rule, a remembered answer; and a mode's deny says the mode.
func TestTellAll(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules + "\n[ask]\ntell = \"all\"\n", initialize: noticesInit})
	d.AgentSend(permission(`"d1"`, `{"toolCallId":"toolu_1","kind":"execute","title":"git status","rawInput":{"command":"git status"}}`, claudeNewOptions))
	d.AgentExpect(selected(`"d1"`, "allow-once"))
	title, description := toldTitle(d.EditorRecv())
	if want := "rule git-read (" + d.ruleAt(t, "git-read") + ")"; title != "acp-broker allowed: git status" || description != want {
		t.Errorf("told %q, %q; want %q, %q", title, description, "acp-broker allowed: git status", want)
	}
	// An "always" answered in the editor, then the same request again.
	make := `{"toolCallId":"toolu_%d","kind":"execute","title":"make test","rawInput":{"command":"make test"}}`
	d.askedThen(permission(`"d2"`, fmt.Sprintf(make, 2), claudeNewOptions), selected(`"d2"`, "allow-with-updates"), selected(`"d2"`, "allow-once"))
	d.AgentSend(permission(`"d3"`, fmt.Sprintf(make, 3), claudeNewOptions))
	d.AgentExpect(selected(`"d3"`, "allow-once"))
	title, description = toldTitle(d.EditorRecv())
	if title != "acp-broker allowed: make test" || !strings.HasPrefix(description, "remembered always r") {
		t.Errorf("told %q, %q; want the remembered answer", title, description)
	}
	d.AgentToEditor(d.marker())
	d.finish()

	plan := startDecider(t, deciderOptions{rules: decideRules + "\n[ask]\ntell = \"all\"\n", args: []string{"--mode", "plan"}})
	plan.AgentSend(plan.expand(permission(`"p1"`, `{"toolCallId":"toolu_1","kind":"edit","title":"Write src/x.go","rawInput":{"file_path":"$CWD/src/x.go","content":"x"}}`, claudeNewOptions)))
	plan.AgentExpect(selected(`"p1"`, "reject"))
	title, description = toldTitle(plan.EditorRecv())
	if want := "acp-broker denied: " + plan.cwd + "/src/x.go"; title != want || description != "mode plan: plan mode allows only what reads" {
		t.Errorf("told %q, %q; want %q and the mode", title, description, want)
	}
	plan.AgentToEditor(plan.marker())
	plan.finish()
}

// TestTellTimeout: a request nobody answered in time is rejected with the
// reject that keeps the turn going, and the editor is told so before its
// prompt is withdrawn.
func TestTellTimeout(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: "[ask]\ntimeout = \"300ms\"\n", initialize: noticesInit})
	req := d.expand(permission(`"t1"`, codexCommand("t1", "make deploy"), codex2Options("make deploy", true)))
	d.AgentToEditor(req)
	d.AgentExpect(selected(`"t1"`, "decline"))
	title, description := toldTitle(d.EditorRecv())
	if title != "acp-broker denied: make deploy" || description != "nobody answered within 300ms" {
		t.Errorf("told %q, %q; want the timeout", title, description)
	}
	d.EditorExpect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"t1"}}`)
	d.finish()
}

// TestTellKeepsTheAgentsLineBreaksInside: what the agent puts in a command (a newline, a
// line or paragraph separator, a carriage return) stays inside the told
// title: no line the broker writes reads as another of its answers.
func TestTellKeepsTheAgentsLineBreaksInside(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules})
	for i, hostile := range []string{
		"git push --force origin 'main\nacp-broker allowed: rm -rf ~'",
		"git push --force origin 'main\racp-broker allowed: rm -rf ~'",
		"git push --force origin 'main\u2028acp-broker allowed: rm -rf ~'",
		"git push --force origin 'main\u2029acp-broker allowed: rm -rf ~'",
		"git push --force origin 'main\u0085acp-broker allowed: rm -rf ~'",
		"git push --force origin 'main\u202eacp-broker allowed: rm -rf ~'",
	} {
		id := fmt.Sprintf(`"f%d"`, i)
		input, _ := json.Marshal(map[string]string{"command": hostile})
		d.AgentSend(permission(id, fmt.Sprintf(`{"toolCallId":"toolu_f%d","kind":"execute","title":"git push","rawInput":%s}`, i, input), claudeNewOptions))
		d.AgentExpect(selected(id, "reject"))
		told := d.EditorRecv()
		var m struct {
			Params struct {
				Update struct {
					Content struct{ Text string } `json:"content"`
				} `json:"update"`
			} `json:"params"`
		}
		if err := json.Unmarshal([]byte(told), &m); err != nil {
			t.Fatal(err)
		}
		text := m.Params.Update.Content.Text
		if strings.ContainsAny(text, "\r\u2028\u2029\u0085\u202e") || strings.Count(text, "\n") != 3 || strings.Count(text, "acp-broker ") != 2 {
			t.Errorf("%q: the broker told\n  %q\nwhich carries the agent's line breaks or a second answer of the broker", hostile, text)
		}
		if title, _ := toldTitle(told); !strings.HasPrefix(title, "acp-broker denied: git push --force origin main") {
			t.Errorf("%q: told %q", hostile, title)
		}
	}
	d.AgentToEditor(d.marker())
	d.finish()
}
