//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// expectShown requires the editor's next line to be the broker's own
// session/update showing the session in mode, which the agent agreed to:
// a current_mode_update, or a config_option_update with the options the
// agent's answer gave.
func expectShown(d *decider, session, mode string) {
	d.t.Helper()
	line := d.EditorRecv()
	var m struct {
		Method string `json:"method"`
		Params struct {
			SessionID string `json:"sessionId"`
			Update    struct {
				SessionUpdate string `json:"sessionUpdate"`
				CurrentModeID string `json:"currentModeId"`
				ConfigOptions []struct {
					Category     string `json:"category"`
					CurrentValue string `json:"currentValue"`
				} `json:"configOptions"`
			} `json:"update"`
		} `json:"params"`
	}
	if json.Unmarshal([]byte(line), &m) == nil && m.Method == "session/update" && m.Params.SessionID == session {
		u := m.Params.Update
		if u.SessionUpdate == "current_mode_update" && u.CurrentModeID == mode {
			return
		}
		if u.SessionUpdate == "config_option_update" {
			for _, o := range u.ConfigOptions {
				if o.Category == "mode" && o.CurrentValue == mode {
					return
				}
			}
		}
	}
	d.t.Fatalf("editor received\n  %s\nwant the broker's update showing %s in mode %q", clip(line), session, mode)
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
			expectShown(d, "sess_1", c.asking)
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
			expectShown(d, "sess_1", "workspace-write")
			// ACP v2 needs no capability for notices (and a v2 message
			// chunk needs a messageId): a v2 editor gets a notice.
			expectTold(d, v == 2, false)
			d.EditorExpect(update)
			d.decided(permission("1", bashGitStatus, claudeNewOptions), "allow-once")
			d.finish()
		})
	}
}

// openBlind initializes as agent and opens sess_1, answered in mode blind
// and switched to asking by the broker (the agent agrees); the user is told
// with a notice when notices is set.
func openBlind(agent, blind, asking string, notices bool) func(d *decider) {
	return func(d *decider) {
		caps := `{}`
		if notices {
			caps = `{"session":{"notices":{}}}`
		}
		initializeAs(d, agent, caps, 1)
		d.EditorToAgent(newSessionIn(d))
		response := modesResponse(blind)
		d.AgentSend(response)
		id := expectSwitch(d, "session/set_mode", `{"sessionId":"sess_1","modeId":"`+asking+`"}`)
		d.AgentSend(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`)
		d.EditorExpect(response)
		expectShown(d, "sess_1", asking)
		expectTold(d, notices, false)
	}
}

// modeUpdate is the agent's current_mode_update for sess_1.
func modeUpdate(mode string) string {
	return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"current_mode_update","currentModeId":"` + mode + `"}}}`
}

// TestModeNoticeOnlyWhereTheEditorHasNotices: an editor that advertised
// clientCapabilities.session.notices is told with a notice (info), any
// other with an agent message (see expectTold).
func TestModeNoticeOnlyWhereTheEditorHasNotices(t *testing.T) {
	t.Parallel()
	for _, notices := range []bool{true, false} {
		t.Run(fmt.Sprint("notices=", notices), func(t *testing.T) {
			t.Parallel()
			d := startDecider(t, deciderOptions{rules: decideRules, open: openBlind(claudeAgent, "auto", "default", notices)})
			d.finish()
			audit, _ := os.ReadFile(d.audit)
			if !strings.Contains(string(audit), `"decision":"switched"`) || !strings.Contains(string(audit), `"session":"sess_1"`) {
				t.Errorf("the audit log does not record the switch:\n%s", audit)
			}
		})
	}
}

// TestModeBackToBlindSwitchedAgain: a later current_mode_update or
// config_option_update that puts the session back in a blind mode (leaving
// plan mode into bypassPermissions, the agent's own doing) is relayed and
// switched again at once; the user was told already, and is not told twice.
// An editor message for the session waits until the agent answers.
func TestModeBackToBlindSwitchedAgain(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules, open: openBlind(claudeAgent, "auto", "default", true)})
	back := modeUpdate("bypassPermissions")
	d.AgentToEditor(back)
	id := expectSwitch(d, "session/set_mode", `{"sessionId":"sess_1","modeId":"default"}`)
	prompt := `{"jsonrpc":"2.0","id":"p1","method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"go on"}]}}`
	d.EditorSend(prompt)
	// The prompt waits for the answer: the agent's next line is the prompt
	// only after it.
	if line, err := d.in.take(300*time.Millisecond, nil); err == nil {
		t.Fatalf("the agent received, while the broker's switch was unanswered:\n  %s", clip(string(line)))
	}
	d.AgentSend(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`)
	expectShown(d, "sess_1", "default")
	d.AgentExpect(prompt)
	// The config option form: config_option_update back to auto.
	cfg := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"config_option_update","configOptions":[{"id":"mode","name":"Mode","category":"mode","type":"select","currentValue":"auto","options":[]}]}}}`
	d.AgentToEditor(cfg)
	id = expectSwitch(d, "session/set_config_option", `{"sessionId":"sess_1","configId":"mode","value":"default"}`)
	d.AgentSend(`{"jsonrpc":"2.0","id":` + id + `,"result":{"configOptions":[{"id":"mode","name":"Mode","category":"mode","type":"select","currentValue":"default","options":[]}]}}`)
	expectShown(d, "sess_1", "default")
	d.decided(permission("1", bashGitStatus, claudeNewOptions), "allow-once")
	d.AgentToEditor(`{"jsonrpc":"2.0","id":"p1","result":{"stopReason":"end_turn"}}`)
	d.finish()
}

// TestModeEditorMayNotChooseABlindMode: the editor's session/set_mode, or
// session/set_config_option on the mode option, to a mode in which the agent
// decides by itself is answered with an error saying why and never reaches
// the agent; to another mode it passes, and the mode is tracked once the
// agent agrees.
func TestModeEditorMayNotChooseABlindMode(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules, open: func(d *decider) {
		initializeAs(d, claudeAgent, `{}`, 1)
		d.EditorToAgent(newSessionIn(d))
		d.AgentToEditor(`{"jsonrpc":"2.0","id":"new-1","result":{"sessionId":"sess_1","modes":{"currentModeId":"default","availableModes":[]},"configOptions":[{"id":"mode","name":"Mode","category":"mode","type":"select","currentValue":"default","options":[]}]}}`)
	}})
	d.noisy = true // each refusal is a warning
	for i, req := range []string{
		`{"jsonrpc":"2.0","id":"m1","method":"session/set_mode","params":{"sessionId":"sess_1","modeId":"auto"}}`,
		`{"jsonrpc":"2.0","id":"m2","method":"session/set_config_option","params":{"sessionId":"sess_1","configId":"mode","value":"bypassPermissions"}}`,
	} {
		d.EditorSend(req)
		msg := expectError(t, d.EditorRecv(), fmt.Sprintf(`"m%d"`, i+1), -32602)
		for _, want := range []string{"decides by itself", "allow_modes"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the refusal %q does not say %q", msg, want)
			}
		}
	}
	// Not the mode option: passes.
	d.EditorToAgent(`{"jsonrpc":"2.0","id":"m3","method":"session/set_config_option","params":{"sessionId":"sess_1","configId":"model","value":"opus"}}`)
	d.AgentToEditor(`{"jsonrpc":"2.0","id":"m3","result":{"configOptions":[]}}`)
	d.EditorToAgent(`{"jsonrpc":"2.0","id":"m4","method":"session/set_mode","params":{"sessionId":"sess_1","modeId":"plan"}}`)
	d.AgentToEditor(`{"jsonrpc":"2.0","id":"m4","result":{}}`)
	// Plan: a command the rules allow is rejected without asking.
	d.decided(permission("1", bashGitStatus, claudeNewOptions), "reject")
	d.finish()
}

// TestModeAllowModes: with [agent] allow_modes = ["auto"] in the user's
// config, a session answered in auto is left there (the response is not
// held, nothing is sent to the agent), the editor may choose auto, and what
// the agent does ask about is decided by the rules; a blind mode the user
// did not allow is still switched and refused.
func TestModeAllowModes(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules + "\n[agent]\nallow_modes = [\"auto\"]\n", open: func(d *decider) {
		initializeAs(d, claudeAgent, `{}`, 1)
		d.EditorToAgent(newSessionIn(d))
		d.AgentToEditor(modesResponse("auto"))
	}})
	d.noisy = true // the refusal is a warning
	d.EditorToAgent(`{"jsonrpc":"2.0","id":"m1","method":"session/set_mode","params":{"sessionId":"sess_1","modeId":"auto"}}`)
	d.AgentToEditor(`{"jsonrpc":"2.0","id":"m1","result":{}}`)
	d.decided(permission("1", bashGitStatus, claudeNewOptions), "allow-once")
	d.EditorSend(`{"jsonrpc":"2.0","id":"m2","method":"session/set_mode","params":{"sessionId":"sess_1","modeId":"bypassPermissions"}}`)
	expectError(t, d.EditorRecv(), `"m2"`, -32602)
	d.AgentToEditor(modeUpdate("bypassPermissions"))
	id := expectSwitch(d, "session/set_mode", `{"sessionId":"sess_1","modeId":"default"}`)
	d.AgentSend(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`)
	expectShown(d, "sess_1", "default")
	expectTold(d, false, false)
	d.finish()
}

// TestModeProjectFileCannotAllowModes: a project file's [agent] is refused
// (`rules check` fails with where and why), its sessions are asked for
// everything as for any project file that does not parse, and the session
// is switched out of auto all the same.
func TestModeProjectFileCannotAllowModes(t *testing.T) {
	t.Parallel()
	project := "[agent]\nallow_modes = [\"auto\"]\nmodes = \"keep\"\n"
	d := startDecider(t, deciderOptions{rules: decideRules, project: project, open: openBlind(claudeAgent, "auto", "default", false)})
	d.noisy = true // the project file's problem is a warning
	d.asked(permission("1", bashGitStatus, claudeNewOptions), answer("1", "reject"))
	d.finish()

	cmd := exec.Command(brokerBin, "rules", "check")
	cmd.Dir = d.cwd
	cmd.Env = append(testEnv(), d.env...)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("rules check passed a project file with [agent]:\n%s", out)
	}
	want := filepath.Join(d.cwd, ".acp-broker.toml") + ":1:1: [agent] cannot be set in a project file"
	if !strings.Contains(string(out), want) {
		t.Errorf("rules check says\n%s\nwant %q", out, want)
	}
}

// TestModeKeep: [agent] modes = "keep" turns it all off: a session answered
// in auto is not held nor switched, the editor may choose bypassPermissions,
// and what the agent asks about is decided by the rules as usual.
func TestModeKeep(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules + "\n[agent]\nmodes = \"keep\"\n", open: func(d *decider) {
		initializeAs(d, claudeAgent, `{}`, 1)
		d.EditorToAgent(newSessionIn(d))
		d.AgentToEditor(modesResponse("auto"))
	}})
	d.EditorToAgent(`{"jsonrpc":"2.0","id":"m1","method":"session/set_mode","params":{"sessionId":"sess_1","modeId":"bypassPermissions"}}`)
	d.AgentToEditor(`{"jsonrpc":"2.0","id":"m1","result":{}}`)
	d.decided(permission("1", bashGitStatus, claudeNewOptions), "allow-once")
	d.finish()
}

// TestModeUnknownAgentUntouched: an agent the broker does not know (its
// agentInfo.name, or one that gives none) is never switched, whatever its
// modes are called, and the editor's set_mode passes.
func TestModeUnknownAgentUntouched(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"my-agent", "claude-agent-acp", ""} {
		t.Run("name="+name, func(t *testing.T) {
			t.Parallel()
			d := startDecider(t, deciderOptions{rules: decideRules, open: func(d *decider) {
				initializeAs(d, name, `{}`, 1)
				d.EditorToAgent(newSessionIn(d))
				d.AgentToEditor(modesResponse("auto"))
			}})
			d.EditorToAgent(`{"jsonrpc":"2.0","id":"m1","method":"session/set_mode","params":{"sessionId":"sess_1","modeId":"yolo"}}`)
			d.AgentToEditor(`{"jsonrpc":"2.0","id":"m1","result":{}}`)
			d.decided(permission("1", bashGitStatus, claudeNewOptions), "allow-once")
			d.finish()
		})
	}
}

// TestModeSwitchFailingFailsClosed: when the agent refuses the broker's
// switch, the editor still gets the session (and a warning), and every
// request of the session is asked, even what a rule allows, while a deny
// rule still denies; the user is told why.
func TestModeSwitchFailingFailsClosed(t *testing.T) {
	t.Parallel()
	for _, notices := range []bool{true, false} {
		t.Run(fmt.Sprint("notices=", notices), func(t *testing.T) {
			t.Parallel()
			d := startDecider(t, deciderOptions{rules: decideRules, open: func(d *decider) {
				caps := `{}`
				if notices {
					caps = `{"session":{"notices":{}}}`
				}
				initializeAs(d, geminiAgent, caps, 1)
				d.EditorToAgent(newSessionIn(d))
				response := modesResponse("yolo")
				d.AgentSend(response)
				id := expectSwitch(d, "session/set_mode", `{"sessionId":"sess_1","modeId":"default"}`)
				d.AgentSend(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32603,"message":"Cannot enable privileged approval modes"}}`)
				d.EditorExpect(response)
				text := expectTold(d, notices, true)
				if !strings.Contains(text, "every request of this session is asked") {
					t.Errorf("the user is told %q, which does not say that every request is asked", text)
				}
			}})
			d.noisy = true // the failure is logged as a warning
			d.asked(permission("1", bashGitStatus, geminiOptions), answer("1", "cancel"))
			d.decided(permission("2", `{"toolCallId":"m2","title":"git push --force origin main","kind":"execute","rawInput":{"command":"git push --force origin main"}}`, geminiOptions), "cancel")
			// A write the rules allow outright (edit-src) is held and asked
			// with the broker's own prompt, not forwarded.
			d.heldAsked(t, `{"jsonrpc":"2.0","id":"w1","method":"fs/write_text_file","params":{"sessionId":"sess_1","path":"$CWD/src/x.go","content":"package x\n"}}`, "src/x.go", "reject_once", "")
			d.finish()
			if !strings.Contains(d.stderrText(), "could not switch") {
				t.Errorf("stderr does not say the switch failed:\n%s", d.stderrText())
			}
			audit, _ := os.ReadFile(d.audit)
			if !strings.Contains(string(audit), `"decision":"switch failed"`) {
				t.Errorf("the audit log does not record the failed switch:\n%s", audit)
			}
		})
	}
}

// TestModeIDsNeverCollide: the broker's own requests to the agent carry ids
// of the broker's (acp-broker-N): an editor request with such an id is
// refused, so the agent's answer to it can never be taken for the answer to
// a switch, and an agent response with such an id that answers nothing of
// the broker's is dropped, never relayed.
func TestModeIDsNeverCollide(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules, open: openBlind(claudeAgent, "auto", "default", false)})
	d.noisy = true
	for _, id := range []string{`"acp-broker-1"`, `"acp-broker-2"`, `"acp-broker-x"`} {
		d.EditorSend(`{"jsonrpc":"2.0","id":` + id + `,"method":"session/set_mode","params":{"sessionId":"sess_1","modeId":"plan"}}`)
		expectError(t, d.EditorRecv(), id, -32600)
	}
	d.AgentSend(`{"jsonrpc":"2.0","id":"acp-broker-1","result":{}}`)
	d.AgentToEditor(d.marker())
	d.finish()
}

// TestModeLoadHoldsThePrompt: session/load names its session, so the editor
// may send a prompt for it before the agent answers: the prompt waits until
// the session's mode is settled.
func TestModeLoadHoldsThePrompt(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules, open: func(d *decider) {
		initializeAs(d, claudeAgent, `{}`, 1)
	}})
	d.EditorToAgent(d.expand(`{"jsonrpc":"2.0","id":"l1","method":"session/load","params":{"sessionId":"sess_1","cwd":"$CWD","mcpServers":[]}}`))
	prompt := `{"jsonrpc":"2.0","id":"p1","method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"again"}]}}`
	d.EditorSend(prompt)
	replayed := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"before"}}}}`
	d.AgentToEditor(replayed)
	response := `{"jsonrpc":"2.0","id":"l1","result":{"modes":{"currentModeId":"bypassPermissions","availableModes":[]}}}`
	d.AgentSend(response)
	id := expectSwitch(d, "session/set_mode", `{"sessionId":"sess_1","modeId":"default"}`)
	d.AgentSend(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`)
	d.EditorExpect(response)
	expectShown(d, "sess_1", "default")
	expectTold(d, false, false)
	d.AgentExpect(prompt)
	d.AgentToEditor(`{"jsonrpc":"2.0","id":"p1","result":{"stopReason":"end_turn"}}`)
	d.finish()
}

// TestModeAgentModeIsTheSessionsMode (item 7): the rules and the broker's
// modes see the agent's real mode, however it changed: Claude Code's
// acceptEdits and Gemini CLI's autoEdit are the broker's accept-edits (an
// edit inside the project that no rule allows is allowed), plan is plan (a
// command the rules allow is rejected), and a rule's modes matcher follows;
// the asking mode leaves the config's mode; --mode overrides them all.
func TestModeAgentModeIsTheSessionsMode(t *testing.T) {
	t.Parallel()
	edit := permission("1", `{"toolCallId":"e1","title":"Edit README.md","kind":"edit","rawInput":{"file_path":"$CWD/README.md"},"locations":[{"path":"$CWD/README.md"}]}`, claudeNewOptions)
	rules := decideRules + `
[[rule]]
id = "no-tests-in-plan"
decision = "deny"
command = "npm test"
modes = ["plan"]
`
	npmTest := permission("3", `{"toolCallId":"n1","title":"npm test","kind":"execute","rawInput":{"command":"npm test"}}`, claudeNewOptions)
	t.Run("claude", func(t *testing.T) {
		t.Parallel()
		d := startDecider(t, deciderOptions{rules: rules, open: func(d *decider) {
			initializeAs(d, claudeAgent, `{}`, 1)
			d.EditorToAgent(newSessionIn(d))
			d.AgentToEditor(modesResponse("default"))
		}})
		d.asked(edit, answer("1", "reject"))
		d.AgentToEditor(modeUpdate("acceptEdits"))
		d.decided(strings.Replace(edit, `"id":1`, `"id":2`, 1), "allow-once")
		d.EditorToAgent(`{"jsonrpc":"2.0","id":"m1","method":"session/set_config_option","params":{"sessionId":"sess_1","configId":"mode","value":"plan"}}`)
		d.AgentToEditor(`{"jsonrpc":"2.0","id":"m1","result":{"configOptions":[{"id":"mode","name":"Mode","category":"mode","type":"select","currentValue":"plan","options":[]}]}}`)
		d.decided(npmTest, "reject")
		d.decided(permission("4", bashGitStatus, claudeNewOptions), "reject")
		d.AgentToEditor(modeUpdate("default"))
		d.asked(npmTest, answer("3", "reject"))
		d.finish()
	})
	t.Run("gemini", func(t *testing.T) {
		t.Parallel()
		d := startDecider(t, deciderOptions{rules: rules, open: func(d *decider) {
			initializeAs(d, geminiAgent, `{}`, 1)
			d.EditorToAgent(newSessionIn(d))
			d.AgentToEditor(modesResponse("default"))
		}})
		d.EditorToAgent(`{"jsonrpc":"2.0","id":"m1","method":"session/set_mode","params":{"sessionId":"sess_1","modeId":"autoEdit"}}`)
		d.AgentToEditor(`{"jsonrpc":"2.0","id":"m1","result":{}}`)
		d.decided(edit, "allow-once")
		d.finish()
	})
	t.Run("override", func(t *testing.T) {
		t.Parallel()
		d := startDecider(t, deciderOptions{rules: rules, args: []string{"--mode", "default"}, open: func(d *decider) {
			initializeAs(d, claudeAgent, `{}`, 1)
			d.EditorToAgent(newSessionIn(d))
			d.AgentToEditor(modesResponse("acceptEdits"))
		}})
		d.asked(edit, answer("1", "reject"))
		d.finish()
	})
	t.Run("config_mode_with_asking_mode", func(t *testing.T) {
		t.Parallel()
		d := startDecider(t, deciderOptions{rules: "mode = \"accept-edits\"\n" + rules, open: func(d *decider) {
			initializeAs(d, claudeAgent, `{}`, 1)
			d.EditorToAgent(newSessionIn(d))
			d.AgentToEditor(modesResponse("default"))
		}})
		d.decided(edit, "allow-once")
		d.finish()
	})
}

// TestModeSwitchUnansweredFailsClosed: an agent that never answers the
// broker's switch does not keep the session from the editor for ever: after
// the broker's wait (10 s) the editor gets the session with a warning, the
// prompt it sent goes on, and every request of the session is asked. An
// answer that comes after still tells the broker the mode.
func TestModeSwitchUnansweredFailsClosed(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules, open: func(d *decider) {
		initializeAs(d, claudeAgent, `{"session":{"notices":{}}}`, 1)
	}})
	d.noisy = true
	d.EditorToAgent(newSessionIn(d))
	response := modesResponse("auto")
	d.AgentSend(response)
	id := expectSwitch(d, "session/set_mode", `{"sessionId":"sess_1","modeId":"default"}`)
	start := time.Now()
	d.EditorExpect(response)
	if waited := time.Since(start); waited < 9*time.Second {
		t.Errorf("the session went to the editor after %v, before the switch's answer was given up", waited)
	}
	text := expectTold(d, true, true)
	if !strings.Contains(text, "did not answer") {
		t.Errorf("the user is told %q, which does not say the agent did not answer", text)
	}
	d.asked(permission("1", bashGitStatus, claudeNewOptions), answer("1", "reject"))
	// The late answer: the session is in default now, and governed.
	d.AgentSend(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`)
	d.AgentToEditor(d.marker())
	d.decided(permission("2", bashGitStatus, claudeNewOptions), "allow-once")
	d.finish()
}

// TestModeAmbiguousCountsAsBlind: a mode given in a message peers may read
// differently (a repeated member: JavaScript keeps the last, the broker
// would read the first) may be a blind mode: the editor's set_mode is
// refused, and the agent's report is switched out of.
func TestModeAmbiguousCountsAsBlind(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules, open: func(d *decider) {
		initializeAs(d, geminiAgent, `{}`, 1)
		d.EditorToAgent(newSessionIn(d))
		d.AgentToEditor(modesResponse("default"))
	}})
	d.noisy = true
	d.EditorSend(`{"jsonrpc":"2.0","id":"m1","method":"session/set_mode","params":{"sessionId":"sess_1","modeId":"default","modeId":"yolo"}}`)
	expectError(t, d.EditorRecv(), `"m1"`, -32602)
	twice := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"current_mode_update","currentModeId":"default","currentModeId":"yolo"}}}`
	d.AgentToEditor(twice)
	id := expectSwitch(d, "session/set_mode", `{"sessionId":"sess_1","modeId":"default"}`)
	d.AgentSend(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`)
	expectShown(d, "sess_1", "default")
	expectTold(d, false, false)
	d.decided(permission("1", bashGitStatus, geminiOptions), "proceed_once")
	d.finish()
}

// TestModeResumeAndForkSwitched: session/resume (which names its session)
// and the unstable session/fork (whose answer names a new one) are set-ups
// like session/new: a blind answer is held and switched first, and a
// prompt for the resumed session waits.
func TestModeResumeAndForkSwitched(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules, open: openBlind(codexAgent, "agent", "workspace-write", false)})
	d.EditorToAgent(d.expand(`{"jsonrpc":"2.0","id":"r1","method":"session/resume","params":{"sessionId":"sess_1","cwd":"$CWD","mcpServers":[]}}`))
	prompt := `{"jsonrpc":"2.0","id":"p1","method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"resumed"}]}}`
	d.EditorSend(prompt)
	resumed := `{"jsonrpc":"2.0","id":"r1","result":{"modes":{"currentModeId":"agent-full-access","availableModes":[]}}}`
	d.AgentSend(resumed)
	id := expectSwitch(d, "session/set_mode", `{"sessionId":"sess_1","modeId":"workspace-write"}`)
	d.AgentSend(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`)
	d.EditorExpect(resumed)
	expectShown(d, "sess_1", "workspace-write") // and told once already: no second message
	d.AgentExpect(prompt)
	d.AgentToEditor(`{"jsonrpc":"2.0","id":"p1","result":{"stopReason":"end_turn"}}`)

	d.EditorToAgent(d.expand(`{"jsonrpc":"2.0","id":"f1","method":"session/fork","params":{"sessionId":"sess_1","cwd":"$CWD","mcpServers":[]}}`))
	forked := `{"jsonrpc":"2.0","id":"f1","result":{"sessionId":"sess_2","configOptions":[{"id":"mode","name":"Mode","category":"mode","type":"select","currentValue":"agent","options":[]}]}}`
	d.AgentSend(forked)
	id = expectSwitch(d, "session/set_config_option", `{"sessionId":"sess_2","configId":"mode","value":"workspace-write"}`)
	d.AgentSend(`{"jsonrpc":"2.0","id":` + id + `,"result":{"configOptions":[{"id":"mode","name":"Mode","category":"mode","type":"select","currentValue":"workspace-write","options":[]}]}}`)
	d.EditorExpect(forked)
	expectShown(d, "sess_2", "workspace-write")
	line := d.EditorRecv()
	if !strings.Contains(line, `"sessionId":"sess_2"`) || !strings.Contains(line, "agent_message_chunk") {
		t.Fatalf("the forked session's user is not told: %s", clip(line))
	}
	d.finish()
}
