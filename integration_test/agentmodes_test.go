//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The tests in this file pin how the broker keeps a session out of the
// agent's own modes in which the agent decides by itself (README, "Modes"):
// the session set-up response is held until the broker's own switch to the
// agent's asking mode is answered, no editor message for the session reaches
// the agent before, the user is told once, and the editor may not switch
// back unless the user allows the mode.

// Agents as their initialize responses name them (agentInfo.name), with a
// mode in which each decides by itself and the one in which it asks.
const (
	claudeAgent = "@agentclientprotocol/claude-agent-acp"
	codexAgent  = "@agentclientprotocol/codex-acp"
	geminiAgent = "gemini-cli"
)

// initializeAs plays initialize: the editor advertises caps, the agent
// names itself agent and answers with protocol version v.
func initializeAs(d *decider, agent, caps string, v int) {
	d.EditorToAgent(fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%d,"clientCapabilities":%s,"clientInfo":{"name":"test-editor","version":"1"}}}`, v, caps))
	d.AgentToEditor(fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":%d,"agentCapabilities":{"loadSession":true},"authMethods":[],"agentInfo":{"name":%q,"version":"1.0.0"}}}`, v, agent))
}

// newSessionIn is the editor's session/new for the decider's directories.
func newSessionIn(d *decider) string {
	return d.expand(`{"jsonrpc":"2.0","id":"new-1","method":"session/new","params":{"cwd":"$CWD","additionalDirectories":["$LIB"],"mcpServers":[]}}`)
}

// modesResponse answers session/new with the session in mode, as ACP's
// session modes.
func modesResponse(mode string) string {
	return `{"jsonrpc":"2.0","id":"new-1","result":{"sessionId":"sess_1","modes":{"currentModeId":"` + mode + `","availableModes":[{"id":"default","name":"Manual"},{"id":"` + mode + `","name":"` + mode + `"}]}}}`
}

// configResponse answers session/new with the session's mode as a config
// option of category "mode" (v2 names the option's id configId).
func configResponse(mode string, v2 bool) string {
	id := `"id":"mode"`
	if v2 {
		id = `"configId":"mode"`
	}
	return `{"jsonrpc":"2.0","id":"new-1","result":{"sessionId":"sess_1","configOptions":[{` + id + `,"name":"Mode","category":"mode","type":"select","currentValue":"` + mode + `","options":[{"value":"workspace-write","name":"Workspace access"},{"value":"` + mode + `","name":"` + mode + `"}]},{"id":"model","name":"Model","category":"model","type":"select","currentValue":"gpt","options":[]}]}}`
}

type rpcRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func sameJSON(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}

// expectSwitch requires the agent's next line to be the broker's own
// request method with params, under an id of the broker's, and returns the
// id. The line joins the dry run's transcript as the broker's.
func expectSwitch(d *decider, method, params string) string {
	d.t.Helper()
	line := d.AgentRecv()
	var r rpcRequest
	if err := json.Unmarshal([]byte(line), &r); err != nil || r.Method != method || !sameJSON(string(r.Params), params) {
		d.t.Fatalf("agent received\n  %s\nwant the broker's %s with params %s", clip(line), method, params)
	}
	if !strings.HasPrefix(string(r.ID), `"acp-broker-`) {
		d.t.Fatalf("the broker's switch has the id %s, not one of the broker's own", r.ID)
	}
	d.recordSent("broker->agent", line)
	return string(r.ID)
}

// editorQuiet requires the editor to receive nothing for a moment.
func editorQuiet(d *decider) {
	d.t.Helper()
	if line, err := d.out.take(300*time.Millisecond, nil); err == nil {
		d.t.Fatalf("the editor received, while the broker's switch was unanswered:\n  %s", clip(string(line)))
	}
}

// expectTold requires the editor's next line to be the broker's own
// session/update telling the user about the session's mode: a notice when
// notices is set, else an agent message; it returns its text.
func expectTold(d *decider, notices bool, warning bool) string {
	d.t.Helper()
	line := d.EditorRecv()
	var m struct {
		Method string `json:"method"`
		Params struct {
			SessionID string `json:"sessionId"`
			Update    struct {
				SessionUpdate string `json:"sessionUpdate"`
				Severity      string `json:"severity"`
				Title         string `json:"title"`
				Description   string `json:"description"`
				Content       struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"update"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(line), &m); err != nil || m.Method != "session/update" || m.Params.SessionID != "sess_1" {
		d.t.Fatalf("editor received\n  %s\nwant the broker's session/update about the mode", clip(line))
	}
	u := m.Params.Update
	switch {
	case notices && u.SessionUpdate == "notice":
		want := "info"
		if warning {
			want = "warning"
		}
		if u.Severity != want || u.Title == "" || u.Description == "" {
			d.t.Fatalf("the notice %s has not severity %q, a title and a description", clip(line), want)
		}
		return u.Title + ": " + u.Description
	case !notices && u.SessionUpdate == "agent_message_chunk" && u.Content.Type == "text" && u.Content.Text != "":
		return u.Content.Text
	}
	d.t.Fatalf("editor received\n  %s\nwant a %s", clip(line), map[bool]string{true: "notice", false: "text agent_message_chunk"}[notices])
	return ""
}

const bashGitStatus = `{"toolCallId":"m1","title":"git status","kind":"execute","rawInput":{"command":"git status"}}`

// TestModeBlindSessionSwitchedBeforeTheEditorLearnsOfIt: for every mode in
// which a known agent decides by itself, a session/new answered in that mode
// is held; the broker's own session/set_mode to the agent's asking mode goes
// to the agent first; a session/prompt the editor sent right after
// session/new reaches the agent only once the agent has answered the switch;
// the editor then gets the agent's response unchanged and is told, once,
// what was changed and why; the switch's answer never reaches it; and the
// session is decided by the rules as usual.
func TestModeBlindSessionSwitchedBeforeTheEditorLearnsOfIt(t *testing.T) {
	t.Parallel()
	cases := []struct{ agent, blind, asking string }{
		{claudeAgent, "auto", "default"},
		{claudeAgent, "bypassPermissions", "default"},
		{claudeAgent, "dontAsk", "default"},
		{codexAgent, "agent", "workspace-write"},
		{codexAgent, "agent-full-access", "workspace-write"},
		{geminiAgent, "yolo", "default"},
	}
	for _, c := range cases {
		t.Run(c.agent+"_"+c.blind, func(t *testing.T) {
			t.Parallel()
			d := startDecider(t, deciderOptions{rules: decideRules, open: func(d *decider) {
				initializeAs(d, c.agent, `{"fs":{"readTextFile":true}}`, 1)
			}})
			d.EditorToAgent(newSessionIn(d))
			prompt := `{"jsonrpc":"2.0","id":"p1","method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"touch x"}]}}`
			d.EditorSend(prompt)
			response := modesResponse(c.blind)
			d.AgentSend(response)
			id := expectSwitch(d, "session/set_mode", `{"sessionId":"sess_1","modeId":"`+c.asking+`"}`)
			editorQuiet(d)
			d.AgentSend(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`)
			d.EditorExpect(response)
			text := expectTold(d, false, false)
			for _, want := range []string{c.blind, c.asking, "allow_modes"} {
				if !strings.Contains(text, want) {
					t.Errorf("the user is told %q, which does not name %q", text, want)
				}
			}
			d.AgentExpect(prompt)
			d.decided(permission("1", bashGitStatus, claudeNewOptions), "allow-once")
			d.AgentToEditor(`{"jsonrpc":"2.0","id":"p1","result":{"stopReason":"end_turn"}}`)
			d.finish()
		})
	}
}

// TestModeConfigOptionSwitched: an agent whose mode is a session config
// option of category "mode" is switched with session/set_config_option on
// that option; under ACP v2 the value is tagged "type":"id" and the option
// named by configId.
func TestModeConfigOptionSwitched(t *testing.T) {
	t.Parallel()
	for _, v := range []int{1, 2} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			t.Parallel()
			d := startDecider(t, deciderOptions{rules: decideRules, open: func(d *decider) {
				initializeAs(d, codexAgent, `{}`, v)
			}})
			d.EditorToAgent(newSessionIn(d))
			response := configResponse("agent", v == 2)
			d.AgentSend(response)
			want := `{"sessionId":"sess_1","configId":"mode","value":"workspace-write"}`
			if v == 2 {
				want = `{"sessionId":"sess_1","configId":"mode","type":"id","value":"workspace-write"}`
			}
			id := expectSwitch(d, "session/set_config_option", want)
			// codex-acp announces the change, then answers with the options.
			update := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"config_option_update","configOptions":[{"id":"mode","name":"Mode","category":"mode","type":"select","currentValue":"workspace-write","options":[]}]}}}`
			d.AgentSend(update, `{"jsonrpc":"2.0","id":`+id+`,"result":{"configOptions":[{"id":"mode","name":"Mode","category":"mode","type":"select","currentValue":"workspace-write","options":[]}]}}`)
			d.EditorExpect(response)
			expectTold(d, false, false)
			d.EditorExpect(update)
			d.decided(permission("1", bashGitStatus, claudeNewOptions), "allow-once")
			d.finish()
		})
	}
}
