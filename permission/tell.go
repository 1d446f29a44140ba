package permission

import (
	"strings"
	"time"

	"github.com/acp-broker/acp-broker/notify"
	"github.com/acp-broker/acp-broker/rules"
)

// When the broker answers an agent's permission request itself, the agent
// tells the user only that permission was refused (Claude Code: "User
// refused permission to run tool"), as if the user had refused it. So the
// broker tells the user first, in the session, what it answered and why:
// the rule, the remembered answer, the mode, the timeout. [ask] tell says
// what is told: "denials" (the default), "all" (allows too) or "off".

// tellTitleLimit bounds the part of a told title that names what the agent
// asked for: a notice's title is a line, not the command's whole text.
const tellTitleLimit = 200

// tell shows the user in the request's session that the broker answered it
// itself, as rec records (its Decision "allow" or "deny"), when [ask] tell
// says so. It is called before the answer goes to the agent, so the user
// reads it before whatever the agent says of the answer. Most answers are
// allows that are not told: the record is not copied to find that out.
func (e *Engine) tell(rec *Record) {
	setting := rules.TellDenials
	if e.Asker != nil && e.Asker.Tell != "" {
		setting = e.Asker.Tell
	}
	switch {
	case setting == rules.TellOff, rec.Session == "":
		return
	case rec.Decision == string(rules.Allow) && setting != rules.TellAll:
		return
	case rec.Decision != string(rules.Allow) && rec.Decision != string(rules.Deny):
		return
	}
	ed := e.editorHandle()
	if ed == nil || !ed.Session(rec.Session).Known() {
		// A session the editor did not open has nowhere to show it.
		return
	}
	verb, severity := "allowed", "info"
	if rec.Decision == string(rules.Deny) {
		verb, severity = "denied", "warning"
	}
	if err := ed.Tell(rec.Session, severity, "acp-broker "+verb+": "+toldSubject(rec), toldReason(rec)); err != nil {
		e.Log.Warn("cannot tell the editor what the broker answered", "err", err)
	}
}

// toldSubject names what a request asked for, as the broker read it: its
// commands, else its paths, URLs or MCP tool, else its title or kind. It is
// one line of printable text (notify.OneLine), so that the agent's words in
// it cannot start a line that reads as the broker's.
func toldSubject(rec *Record) string {
	var what string
	switch {
	case len(rec.Commands) > 0:
		what = strings.Join(rec.Commands, "; ")
	case len(rec.Paths) > 0:
		what = strings.Join(rec.Paths, ", ")
	case len(rec.URLs) > 0:
		what = strings.Join(rec.URLs, ", ")
	case rec.MCP != "":
		what = rec.MCP
	case rec.Title != "":
		what = rec.Title
	case rec.Kind != "":
		what = "a " + rec.Kind + " tool call"
	default:
		what = "a tool call"
	}
	return notify.Truncate(notify.OneLine(what), tellTitleLimit)
}

// toldReason says why the broker answered: "rule no-force-push
// (/home/u/.config/acp-broker/rules.toml:12): force pushes rewrite history",
// "remembered always r-3f2a", "mode plan: plan mode allows only what reads",
// "default: ...", "nobody answered within 5m".
func toldReason(rec *Record) string {
	reason := rec.Reason
	var by string
	switch rec.Source {
	case "rule":
		by = "rule "
		if rec.RuleID != "" {
			by += rec.RuleID + " (" + rec.Rule + ")"
		} else {
			by += "at " + rec.Rule
		}
	case "remembered":
		by = "remembered always " + rec.RuleID
	case "timeout":
		return notify.OneLine(reason)
	default:
		by = rec.Source
	}
	if reason == "" {
		return notify.OneLine(by)
	}
	return notify.OneLine(by + ": " + reason)
}

// shortDuration writes a duration as a person would: 5m, 1h30m, 45s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
