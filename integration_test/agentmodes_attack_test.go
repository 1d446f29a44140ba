//go:build linux

package integration

import (
	"fmt"
	"testing"
)

// TestModeEditorBlindModeBehindALoadRefused: an editor that sends its
// session/set_mode (or mode session/set_config_option) to a blind mode
// right behind session/load or session/resume, before the agent answered,
// names a session the broker does not know yet: the request waits with the
// set-up, and is refused once the session is known, as it would have been
// after; it never reaches the agent, and the prompt behind it runs in the
// asking mode.
func TestModeEditorBlindModeBehindALoadRefused(t *testing.T) {
	t.Parallel()
	loaded := `{"modes":{"currentModeId":"default","availableModes":[]},"configOptions":[{"id":"mode","name":"Mode","category":"mode","type":"select","currentValue":"default","options":[]}]}`
	cases := []struct{ name, setup, change string }{
		{"load_set_mode", "session/load", `{"jsonrpc":"2.0","id":"m1","method":"session/set_mode","params":{"sessionId":"sess_1","modeId":"bypassPermissions"}}`},
		{"load_config_option", "session/load", `{"jsonrpc":"2.0","id":"m1","method":"session/set_config_option","params":{"sessionId":"sess_1","configId":"mode","value":"auto"}}`},
		{"resume_set_mode", "session/resume", `{"jsonrpc":"2.0","id":"m1","method":"session/set_mode","params":{"sessionId":"sess_1","modeId":"auto"}}`},
		{"resume_config_option_v2", "session/resume", `{"jsonrpc":"2.0","id":"m1","method":"session/set_config_option","params":{"sessionId":"sess_1","configId":"mode","type":"id","value":"dontAsk"}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := startDecider(t, deciderOptions{rules: decideRules, open: func(d *decider) {
				initializeAs(d, claudeAgent, `{}`, 1)
			}})
			d.noisy = true // the refusal is a warning
			d.EditorToAgent(d.expand(`{"jsonrpc":"2.0","id":"l1","method":"` + c.setup + `","params":{"sessionId":"sess_1","cwd":"$CWD","mcpServers":[]}}`))
			prompt := `{"jsonrpc":"2.0","id":"p1","method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"again"}]}}`
			d.EditorSend(c.change, prompt)
			editorBarrier(d)
			response := `{"jsonrpc":"2.0","id":"l1","result":` + loaded + `}`
			d.AgentSend(response)
			d.AgentExpect(prompt)
			// The refusal may come before the session's answer, or after.
			first, second := d.EditorRecv(), d.EditorRecv()
			if first != response {
				first, second = second, first
			}
			if first != response {
				t.Fatalf("the editor did not get the agent's answer to %s unchanged:\n  %s\n  %s", c.setup, clip(first), clip(second))
			}
			expectError(t, second, `"m1"`, -32602)
			d.decided(permission("1", bashGitStatus, claudeNewOptions), "allow-once")
			d.AgentToEditor(`{"jsonrpc":"2.0","id":"p1","result":{"stopReason":"end_turn"}}`)
			d.finish()
		})
	}
}

// editorBarrier returns once the broker has read every line the editor
// sent before: the broker answers a request with an id of its own at once,
// in the order read.
func editorBarrier(d *decider) {
	d.t.Helper()
	d.EditorSend(`{"jsonrpc":"2.0","id":"acp-broker-barrier","method":"barrier"}`)
	expectError(d.t, d.EditorRecv(), `"acp-broker-barrier"`, -32600)
}

// TestModeRequestBeforeTheSwitchAnswerIsAskedUnlessSwitched: an agent that
// answers session/new in a blind mode and sends a request before it answers
// the broker's switch gets it decided only once the switch is settled: asked
// when the agent refuses the switch, or agrees while its answer still
// reports a blind mode, never decided by a rule that allows it.
func TestModeRequestBeforeTheSwitchAnswerIsAskedUnlessSwitched(t *testing.T) {
	t.Parallel()
	for name, answer := range map[string]string{
		"refused":               `"error":{"code":-32603,"message":"no"}`,
		"agreed_modes_blind":    `"result":{"currentModeId":"bypassPermissions"}`,
		"agreed_options_blind":  `"result":{"configOptions":[{"id":"mode","name":"Mode","category":"mode","type":"select","currentValue":"auto","options":[]}]}`,
		"agreed_options_twice":  `"result":{"configOptions":[{"id":"mode","name":"Mode","category":"mode","type":"select","currentValue":"default","currentValue":"auto","options":[]}]}`,
		"agreed_mode_in_a_case": `"result":{"CurrentModeId":"auto"}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := startDecider(t, deciderOptions{rules: decideRules, open: func(d *decider) {
				initializeAs(d, claudeAgent, `{}`, 1)
			}})
			d.noisy = true // the failed switch is a warning
			d.EditorToAgent(newSessionIn(d))
			response := modesResponse("auto")
			d.AgentSend(response)
			id := expectSwitch(d, "session/set_mode", `{"sessionId":"sess_1","modeId":"default"}`)
			req := d.expand(permission("1", bashGitStatus, claudeNewOptions))
			d.AgentSend(req)
			editorQuiet(d)
			d.AgentSend(`{"jsonrpc":"2.0","id":` + id + `,` + answer + `}`)
			d.EditorExpect(response)
			expectTold(d, false, true)
			d.EditorExpect(req)
			d.EditorToAgent(selected("1", "reject"))
			d.finish()
		})
	}
}

// TestModeAgentsOwnPermissionSettingsAreProtected: the files in which an
// agent keeps its own permission settings (Claude Code's .claude/settings
// files, whose permissions.allow rules, defaultMode and hooks let it run
// commands without asking; its subagent definitions' permissionMode;
// Gemini CLI's .gemini/settings.json; Codex's .codex config and exec-policy
// rules) are a blind mode by another name: an edit of one is asked even
// where edits in the project are allowed (accept-edits).
func TestModeAgentsOwnPermissionSettingsAreProtected(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: "mode = \"accept-edits\"\n" + decideRules, open: func(d *decider) {
		initializeAs(d, claudeAgent, `{}`, 1)
		d.EditorToAgent(newSessionIn(d))
		d.AgentToEditor(modesResponse("default"))
	}})
	edit := func(id, path string) string {
		return permission(id, `{"toolCallId":"e`+id+`","title":"Edit `+path+`","kind":"edit","rawInput":{"file_path":"$CWD/`+path+`"},"locations":[{"path":"$CWD/`+path+`"}]}`, claudeNewOptions)
	}
	// An ordinary file of the project is allowed: the mode is in force.
	d.decided(edit("1", "README.md"), "allow-once")
	for i, path := range []string{
		".claude/settings.json",
		".claude/settings.local.json",
		".claude/agents/helper.md",
		".Claude/Settings.json",
		"src/.claude/settings.json",
		".gemini/settings.json",
		".codex/config.toml",
		".codex/rules/default.rules",
	} {
		d.asked(edit(fmt.Sprint(i+2), path), answer(fmt.Sprint(i+2), "reject"))
	}
	d.finish()
}
