package rules

import (
	"fmt"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// AgentModes is what the broker knows of one agent's own permission modes:
// in which it asks the client (so the broker sees, and its rules decide,
// what the agent wants to do) and in which it decides by itself.
type AgentModes struct {
	// Agent is the agent as the README names it.
	Agent string
	// Names are the agentInfo.name values its initialize response carries.
	Names []string
	// Asking is the mode the broker switches a blind session to: the one in
	// which the agent asks the client before it acts.
	Asking string
	// Blind are the modes in which the agent decides by itself what to run,
	// so its requests never reach the broker.
	Blind []string
	// Broker maps the agent's modes that mean one of the broker's own modes
	// (see Modes) to it. The agent's other modes add nothing to the
	// broker's mode.
	Broker map[string]string
}

// KnownAgents are the agents whose modes the broker knows, checked against
// the adapters' own code: claude-agent-acp 0.101 (session-mode.js), codex-acp
// 2.6 (AgentMode in dist/index.js), gemini-cli 0.61 (ApprovalMode).
var KnownAgents = []AgentModes{
	{
		Agent:  "Claude Code",
		Names:  []string{"@agentclientprotocol/claude-agent-acp"},
		Asking: "default",
		Blind:  []string{"auto", "bypassPermissions", "dontAsk"},
		Broker: map[string]string{"acceptEdits": "accept-edits", "plan": "plan"},
	},
	{
		// read-only and workspace-write ask only for what leaves Codex's
		// sandbox: the sandbox governs the rest.
		Agent:  "Codex",
		Names:  []string{"@agentclientprotocol/codex-acp"},
		Asking: "workspace-write",
		Blind:  []string{"agent", "agent-full-access"},
	},
	{
		Agent:  "Gemini CLI",
		Names:  []string{"gemini-cli"},
		Asking: "default",
		Blind:  []string{"yolo"},
		Broker: map[string]string{"autoEdit": "accept-edits", "plan": "plan"},
	},
}

// KnownAgent returns the modes of the agent whose initialize response named
// it name, or nil for an agent the broker does not know.
func KnownAgent(name string) *AgentModes {
	for i := range KnownAgents {
		if slices.Contains(KnownAgents[i].Names, name) {
			return &KnownAgents[i]
		}
	}
	return nil
}

// KnownModes are the modes the broker knows of the agent: its asking mode,
// its blind ones, and the ones that mean a broker mode.
func (a *AgentModes) KnownModes() []string {
	modes := append([]string{a.Asking}, a.Blind...)
	for m := range a.Broker {
		modes = append(modes, m)
	}
	return modes
}

// AmbiguousMode is the mode recorded for a session whose agent reported its
// mode in a message peers may read differently (a member repeated): it may
// be any mode, so it counts as blind.
const AmbiguousMode = "\x00ambiguous"

// IsBlind reports whether the agent decides by itself in mode.
func (a *AgentModes) IsBlind(mode string) bool {
	return mode == AmbiguousMode || slices.Contains(a.Blind, mode)
}

// BrokerMode is the broker mode an agent's mode stands for: "" when the
// agent is unknown, or its mode means nothing more than the broker's own
// default.
func BrokerMode(agent, mode string) string {
	if a := KnownAgent(agent); a != nil {
		return a.Broker[mode]
	}
	return ""
}

// agentSettings are the [agent] settings in force: only the managed and
// user layers may set them.
type agentSettings struct {
	keep       bool
	keepSet    bool
	allowModes []string
}

// addAgentSettings merges a file's [agent] table. The first layer that sets
// modes wins, managed first; allowed modes add up.
func (p *Policy) addAgentSettings(f *File) {
	if f.Layer != Managed && f.Layer != User {
		return
	}
	if f.AgentModes != "" && !p.agent.keepSet {
		p.agent.keep, p.agent.keepSet = f.AgentModes == "keep", true
	}
	p.agent.allowModes = append(p.agent.allowModes, f.AllowModes...)
}

// KeepsAgentModes reports whether [agent] modes = "keep" turns the broker's
// handling of the agent's modes off.
func (p *Policy) KeepsAgentModes() bool { return p.agent.keep }

// ModeAllowed reports whether the user allows the agent's blind mode.
func (p *Policy) ModeAllowed(mode string) bool {
	return p.agent.keep || slices.Contains(p.agent.allowModes, mode)
}

// SwitchFrom returns, for a session the agent reports in mode, the mode the
// broker switches it to: the agent's asking mode when mode is one in which
// the agent decides by itself and the user did not allow it. ok is false
// for an unknown agent, an asking mode, an allowed one, and with keep.
func (p *Policy) SwitchFrom(agent, mode string) (to string, ok bool) {
	a := KnownAgent(agent)
	if a == nil || p.agent.keep || !a.IsBlind(mode) || p.ModeAllowed(mode) {
		return "", false
	}
	return a.Asking, true
}

// Ungoverned caps a verdict at ask while the agent is, as far as the broker
// knows, in a mode in which it decides by itself that the user did not
// allow (the broker's switch failed or is not answered yet): the rules were
// written for an agent that asks, and this one runs what it does not ask
// about, so nothing it does ask about is decided for it. A deny stays.
func (p *Policy) Ungoverned(v Verdict, agent, mode string) Verdict {
	if _, blind := p.SwitchFrom(agent, mode); blind {
		shown := mode
		if mode == AmbiguousMode {
			shown = "(reported ambiguously)"
		}
		p.capAtAsk(&v, "agent mode", fmt.Sprintf("the agent is in mode %s, in which it decides by itself what to run, and acp-broker could not switch it to a mode in which it asks: every request of the session is asked", shown))
	}
	return v
}

var agentKeys = []string{"modes", "allow_modes"}

// blindModes are every known agent's blind modes, the values allow_modes
// takes.
func blindModes() []string {
	var out []string
	for _, a := range KnownAgents {
		out = append(out, a.Blind...)
	}
	return out
}

// agentTable decodes [agent]. A project file may not have one: a
// repository must not choose to let the agent decide by itself, so the file
// does not parse (its sessions are asked for everything, and `rules check`
// fails with where and why).
func (d *decoder) agentTable(prim toml.Primitive) error {
	at := d.loc.tableKey("", "agent")
	if v, err := d.value(prim); err == nil {
		if !isTable(v) {
			return d.errorf(d.loc.topKey("agent"), `write it as [agent] with modes = "keep" or allow_modes = ["..."] under it`, "agent must be a table")
		}
	}
	if d.file.Layer == Project {
		return d.errorf(at, "set [agent] in your user config (~/.config/acp-broker/config.toml) or the managed one",
			"[agent] cannot be set in a project file: a repository must not choose the agent's modes")
	}
	var table map[string]toml.Primitive
	if err := d.md.PrimitiveDecode(prim, &table); err != nil {
		return d.errorf(at, `write it as [agent] with modes = "keep" or allow_modes = ["..."] under it`, "agent must be a table")
	}
	for k, p := range table {
		at := d.loc.tableKey(k, "agent")
		var err error
		switch k {
		case "modes":
			d.file.AgentModes, err = d.oneOf(p, at, k, []string{"govern", "keep"})
		case "allow_modes":
			d.file.AllowModes, err = d.strings(p, at, k)
			for _, m := range d.file.AllowModes {
				if err == nil && !slices.Contains(blindModes(), m) {
					err = d.errorf(at, "allow_modes takes modes in which an agent decides by itself: "+strings.Join(blindModes(), ", "),
						"%q is not a mode in which a known agent decides by itself", m)
				}
			}
		default:
			err = d.unknown(at, k, " in [agent]", agentKeys)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
