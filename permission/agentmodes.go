package permission

import (
	"fmt"

	"github.com/acp-broker/acp-broker/rules"
	"github.com/acp-broker/acp-broker/session"
)

// SessionMode is the broker mode a session is decided in: the broker's
// --mode, which is the user's override; else the broker mode the agent's own
// mode stands for (Claude Code's acceptEdits and Gemini CLI's autoEdit are
// accept-edits, their plan is plan); else the config's mode; else default.
// An agent mode that means nothing more than the broker's default (the
// asking modes, and the blind ones the user allowed) leaves the config's
// mode in force.
func SessionMode(override string, p *rules.Policy, s session.Info) string {
	if override == "" {
		if m := rules.BrokerMode(s.Agent, s.AgentMode); m != "" {
			return m
		}
	}
	return EffectiveMode(override, p)
}

// governed caps a verdict at ask while the session's agent is in a mode in
// which it decides by itself that the user did not allow (see
// rules.Policy.Ungoverned).
func governed(p *rules.Policy, v rules.Verdict, s session.Info) rules.Verdict {
	return p.Ungoverned(v, s.Agent, s.AgentMode)
}

// The Engine is the broker's session.ModeGuard: the agents whose modes it
// knows are kept out of the modes in which they decide by themselves,
// unless the user's [agent] settings allow them.
var _ session.ModeGuard = (*Engine)(nil)

// Watches reports whether the agent's modes are known and [agent] modes is
// not "keep". Rules that cannot be read count as watching.
func (e *Engine) Watches(agent string) bool {
	if rules.KnownAgent(agent) == nil {
		return false
	}
	p, err := e.Rules.Policy("")
	return err != nil || !p.KeepsAgentModes()
}

// Switch returns the agent's asking mode for a session in a blind mode the
// user did not allow.
func (e *Engine) Switch(s session.Info) (string, bool) {
	a := rules.KnownAgent(s.Agent)
	if a == nil {
		return "", false
	}
	p, err := e.Rules.Policy(s.Cwd)
	if err != nil {
		// Rules that cannot be read never let a blind mode stand.
		return a.Asking, a.IsBlind(s.AgentMode)
	}
	return p.SwitchFrom(s.Agent, s.AgentMode)
}

// Refuse says why the editor may not put a session in a blind mode the
// user did not allow.
func (e *Engine) Refuse(s session.Info, mode string) string {
	a := rules.KnownAgent(s.Agent)
	if a == nil {
		return ""
	}
	p, err := e.Rules.Policy(s.Cwd)
	blind := a.IsBlind(mode)
	if err == nil {
		_, blind = p.SwitchFrom(s.Agent, mode)
	}
	if !blind {
		return ""
	}
	if mode == rules.AmbiguousMode {
		return "the request repeats a member or spells one in another letter case, so the agent may read another mode than acp-broker does"
	}
	return fmt.Sprintf("in mode %q %s decides by itself what to run, without asking, so acp-broker's rules cannot govern it; to use it anyway, add it to your acp-broker config: [agent] allow_modes = [%q]", mode, a.Agent, mode)
}

// Switched writes a switch of the broker's to the audit log and says what
// the user is told of it.
func (e *Engine) Switched(s session.Info, from, to string, failure error) (title, description string) {
	agent := s.Agent
	if a := rules.KnownAgent(s.Agent); a != nil {
		agent = a.Agent
	}
	shown := from
	if from == rules.AmbiguousMode {
		shown = "a mode it reported ambiguously"
	}
	why := fmt.Sprintf("in %s %s decides by itself what to run and never asks, so acp-broker's rules would govern nothing", shown, agent)
	rec := Record{Session: s.ID, Method: "session/set_mode", Source: "agent mode"}
	if s.ModeConfigID != "" {
		rec.Method = "session/set_config_option"
	}
	if failure != nil {
		rec.Decision = "switch failed"
		rec.Reason = fmt.Sprintf("%s; switching it to %s failed (%v): every request of the session is asked", why, to, failure)
		title = fmt.Sprintf("acp-broker could not switch %s out of %s", agent, shown)
		description = fmt.Sprintf("%s. Switching it to %s failed (%v), so every request of this session is asked.", capitalize(why), to, failure)
	} else {
		rec.Decision = "switched"
		rec.Reason = fmt.Sprintf("%s; switched it to %s", why, to)
		title = fmt.Sprintf("acp-broker switched %s from %s to %s", agent, shown, to)
		description = fmt.Sprintf("%s. To keep %s, allow it in your acp-broker config: [agent] allow_modes = [%q].", capitalize(why), shown, from)
	}
	e.Log.Info(title, "session", s.ID, "reason", rec.Reason)
	e.write(rec)
	return title, description
}

func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
