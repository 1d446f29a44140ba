//go:build linux

package integration

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestOwnPromptCannotBeRewrittenByTheAgent: while the broker asks about a
// terminal with a tool call of its own (acp-broker-terminal-N), the agent
// cannot change what the human is shown: its session/update about that id
// (a harmless title, another command, a finished status) never reaches the
// editor, nor does a permission request naming it (answered with an error);
// the human's reject then keeps the terminal from the editor. Tool call ids
// starting with acp-broker- are the broker's, as request ids are.
func TestOwnPromptCannotBeRewrittenByTheAgent(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: heldRules})
	d.noisy = true // the warnings about the dropped messages
	req := d.expand(terminalReq(`1`, `"command":"make","args":["deploy"],"cwd":"$CWD"`))
	d.AgentSend(req)
	var shown struct {
		Params struct {
			Update struct {
				ToolCallID string `json:"toolCallId"`
			} `json:"update"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(d.EditorRecv()), &shown); err != nil || !strings.HasPrefix(shown.Params.Update.ToolCallID, "acp-broker-terminal-") {
		t.Fatalf("want the broker's tool_call, got %+v (%v)", shown, err)
	}
	id := shown.Params.Update.ToolCallID
	own := decode(t, d.EditorRecv())
	if own.Method != "session/request_permission" {
		t.Fatalf("want the broker's own prompt, got %+v", own)
	}
	for _, fields := range []string{
		`"toolCallId":"` + id + `","title":"make test","rawInput":{"command":"make","args":["test"]}`,
		`"toolCallId":"` + id + `","status":"completed"`,
		`"toolCallId":"` + id + `","title":"Read README.md","kind":"read"`,
	} {
		for _, kind := range []string{"tool_call_update", "tool_call"} {
			mark := d.marker()
			d.AgentSend(toolCallUpdate(kind, fields), mark)
			if got := d.EditorRecv(); got != mark {
				t.Fatalf("the editor received the agent's update of the broker's tool call:\n  %s", clip(got))
			}
		}
	}
	// A permission request naming the broker's tool call is refused.
	preq := permission(`2`, `{"toolCallId":"`+id+`","title":"make test","kind":"execute","rawInput":{"command":"make test"}}`, claudeOptions)
	mark := d.marker()
	d.AgentSend(preq, mark)
	if got := d.EditorRecv(); got != mark {
		t.Fatalf("the editor received the agent's request about the broker's tool call:\n  %s", clip(got))
	}
	expectError(t, d.AgentRecv(), "2", -32600)
	// The human rejects what they were shown: the terminal is refused.
	d.EditorSend(`{"jsonrpc":"2.0","id":` + string(own.ID) + `,"result":{"outcome":{"outcome":"selected","optionId":"reject_once"}}}`)
	if final := d.EditorRecv(); !strings.Contains(final, `"tool_call_update"`) || !strings.Contains(final, id) {
		t.Fatalf("the held request's view was not closed: %s", clip(final))
	}
	expectError(t, d.AgentRecv(), "1", -32000)
	for _, line := range d.transcript().Editor {
		if strings.Contains(line, `"terminal/create"`) {
			t.Errorf("the editor saw the terminal: %s", clip(line))
		}
	}
	d.finish()
}
