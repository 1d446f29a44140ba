//go:build linux

package integration

import "testing"

// TestModeSwitchKnowsV2Agents: an ACP v2 agent names itself in the
// initialize answer's info (v2 has no agentInfo), as claude-agent-acp 0.101
// does for a v2 editor, whose session/new reports the mode only as a config
// option named by configId. The broker knows the agent by info.name and
// switches the session out of auto, as it does in v1
// (TestRealClaudeV2 shows it with the real adapter).
func TestModeSwitchKnowsV2Agents(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules, open: func(d *decider) {
		d.EditorToAgent(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2,"capabilities":{},"info":{"name":"test-editor","version":"1"}}}`)
		d.AgentToEditor(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2,"info":{"name":"` + claudeAgent + `","title":"Claude Agent","version":"0.101.0"},"capabilities":{},"authMethods":[]}}`)
	}})
	d.EditorToAgent(newSessionIn(d))
	response := `{"jsonrpc":"2.0","id":"new-1","result":{"sessionId":"sess_1","configOptions":[{"name":"Mode","category":"mode","type":"select","currentValue":"auto","options":[{"value":"default","name":"Manual"},{"value":"auto","name":"Auto"}],"configId":"mode"}]}}`
	d.AgentSend(response)
	id := expectSwitch(d, "session/set_config_option", `{"sessionId":"sess_1","configId":"mode","type":"id","value":"default"}`)
	options := `"configOptions":[{"name":"Mode","category":"mode","type":"select","currentValue":"default","options":[],"configId":"mode"}]`
	update := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"config_option_update",` + options + `}}}`
	d.AgentSend(update, `{"jsonrpc":"2.0","id":`+id+`,"result":{`+options+`}}`)
	d.EditorExpect(response)
	expectShown(d, "sess_1", "default")
	expectTold(d, true, false) // a v2 editor takes notices without a capability
	d.EditorExpect(update)
	d.finish()
}
