package permission

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/acp-broker/acp-broker/rules"
)

// An option's reach is how far the answer it gives goes beyond the request
// it answers: this request only, the turn, the session, or for good (a
// persistent rule in the agent). The broker reads it from the option's own
// description of its effect, `_meta.permission.changes` (a change of type
// "grant" or "policy_rule", with an optional `lifetime.scope` of "turn" or
// "session"; a policy rule without one is persistent), and from the option
// ids whose reach codex-acp 2.x fixes without saying so (2.6.0 sends no
// _meta on its options). The broker uses it two ways:
//   - when it answers "allow" itself, it means this request only, so it
//     picks only an allow_once option that reaches no further;
//   - when the human picks an "always" option, the broker remembers no more
//     than the option says: for the session when it is for the session,
//     nothing beyond this request when it is for the turn or its changes
//     are of a kind the broker does not know, the proposed prefix rule of an
//     exec-policy amendment only as far as rules.DeriveWithin allows, the
//     host of a network-policy amendment and not the command.
type reach struct {
	// scope is "once", "turn", "session" or "persistent"; "" when the
	// option's description cannot be read or names a change the broker
	// does not know, and then why says so.
	scope string
	why   string
	// amendment is the exec-policy prefix an accept_execpolicy_amendment
	// option adds (Codex), read from its name; amendmentUnread is set when
	// the name does not show one the broker can read.
	amendment       []string
	amendmentUnread bool
	// host is set for a network-policy amendment: it is about the host the
	// request reaches, not the command that reaches it.
	host bool
}

var scopeOrder = map[string]int{"once": 0, "turn": 1, "session": 2, "persistent": 3}

// codexSessionOptions are codex-acp 2.x's "for this session" options: a
// command or a host (allow_for_session), a patch's files, an MCP tool
// (allow_session), sandbox permissions (allow_permissions_session).
var codexSessionOptions = map[string]bool{"allow_for_session": true, "allow_session": true, "allow_permissions_session": true}

// codexTurnOptions are codex-acp 2.x's allow_once options that grant
// sandbox permissions for the rest of the turn, not for this request.
var codexTurnOptions = map[string]bool{"allow_permissions_turn": true, "allow_permissions_turn_strict_auto_review": true}

const (
	execPolicyOption     = "accept_execpolicy_amendment"
	networkPolicyOption  = "apply_network_policy_amendment:"
	execPolicyNamePrefix = "Yes, and don't ask again for commands that start with `"
)

// optionReach reads how far an option's answer goes.
func optionReach(o option) reach {
	byID := idReach(o)
	byMeta, described := metaReach(o.Meta)
	if !described {
		return byID
	}
	if byMeta.scope == "" {
		return byMeta
	}
	// Both describe it: the narrower says what the human agreed to (for
	// what the broker answers itself, see answersOnlyThis), and what the
	// id fixes (a prefix, a host) stays.
	if scopeOrder[byMeta.scope] < scopeOrder[byID.scope] {
		byID.scope = byMeta.scope
	}
	return byID
}

// idReach is the reach the option's id and kind fix.
func idReach(o option) reach {
	r := reach{scope: "once"}
	if o.Kind == "allow_always" || o.Kind == "reject_always" {
		r.scope = "persistent"
	}
	switch id := o.OptionID; {
	case codexSessionOptions[id]:
		r.scope = "session"
	case codexTurnOptions[id]:
		r.scope = "turn"
	case id == execPolicyOption:
		r.scope = "persistent"
		r.amendment, r.amendmentUnread = execPolicyPrefix(o.Name)
	case strings.HasPrefix(id, networkPolicyOption):
		r.scope, r.host = "persistent", true
	}
	return r
}

// execPolicyPrefix reads the prefix rule codex-acp quotes in an exec-policy
// amendment's name, "Yes, and don't ask again for commands that start with
// `git push`", as the words of one plain command.
func execPolicyPrefix(name string) ([]string, bool) {
	quoted, ok := strings.CutPrefix(name, execPolicyNamePrefix)
	if !ok {
		return nil, true
	}
	quoted, ok = strings.CutSuffix(quoted, "`")
	if !ok || strings.Contains(quoted, "`") {
		return nil, true
	}
	script := rules.ParseShell(quoted)
	if len(script.Opaque) > 0 || len(script.Commands) != 1 {
		return nil, true
	}
	c := script.Commands[0]
	if len(c.Opaque) > 0 || len(c.Assigns) > 0 || len(c.Redirects) > 0 || len(c.Argv) == 0 {
		return nil, true
	}
	return c.Argv, false
}

// metaReach reads an option's _meta.permission.changes; described is false
// when the option does not describe its changes.
func metaReach(meta json.RawMessage) (r reach, described bool) {
	if len(meta) == 0 {
		return reach{}, false
	}
	var m struct {
		Permission *struct {
			Changes *[]struct {
				Type     string `json:"type"`
				Lifetime *struct {
					Scope string `json:"scope"`
				} `json:"lifetime"`
			} `json:"changes"`
		} `json:"permission"`
	}
	if json.Unmarshal(meta, &m) != nil {
		return reach{why: "the option's _meta cannot be read"}, true
	}
	if m.Permission == nil || m.Permission.Changes == nil {
		return reach{}, false
	}
	r.scope = "once"
	for _, c := range *m.Permission.Changes {
		scope := ""
		switch {
		case c.Type != "grant" && c.Type != "policy_rule":
			return reach{why: fmt.Sprintf("the option makes a change of type %q, which the broker does not know", c.Type)}, true
		case c.Lifetime == nil && c.Type == "grant":
			scope = "once"
		case c.Lifetime == nil:
			scope = "persistent"
		case c.Lifetime.Scope == "turn" || c.Lifetime.Scope == "session":
			scope = c.Lifetime.Scope
		default:
			return reach{why: fmt.Sprintf("the option's change lasts for %q, which the broker does not know", c.Lifetime.Scope)}, true
		}
		if scopeOrder[scope] > scopeOrder[r.scope] {
			r.scope = scope
		}
	}
	return r, true
}

// answersOnlyThis reports whether an option's answer goes no further than
// the request: by its id and by its own description, where it has one.
func answersOnlyThis(o option) bool {
	byMeta, described := metaReach(o.Meta)
	return idReach(o).scope == "once" && (!described || byMeta.scope == "once")
}

// pickFor returns the option the broker answers with when it decides: for
// an allow, the first allow_once option that answers this request only; for
// a deny, the first reject option (of the wanted kinds, in order) that goes
// no further than the request, else the first reject option at all, since
// refusing for longer refuses at least this.
func pickFor(options []option, kinds []string) (option, bool) {
	for _, k := range kinds {
		for _, o := range options {
			if o.Kind == k && answersOnlyThis(o) {
				return o, true
			}
		}
	}
	if len(kinds) > 0 && strings.HasPrefix(kinds[0], "allow") {
		return option{}, false
	}
	return pick(options, kinds)
}

// remembers is what an "always" answer with option o remembers of req, and
// the scope it is kept in (scope is the config's remember setting), or no
// entries and why.
func remembers(req *rules.Request, o option, scope string) ([]rules.Entry, string, string) {
	decision := rules.Allow
	if strings.HasPrefix(o.Kind, "reject") {
		decision = rules.Deny
	}
	r := optionReach(o)
	switch r.scope {
	case "":
		return nil, "", r.why
	case "once":
		return nil, "", fmt.Sprintf("the option %q answers this request only", o.OptionID)
	case "turn":
		return nil, "", fmt.Sprintf("the option %q answers for this turn only", o.OptionID)
	case "session":
		scope = "session"
	}
	var entries []rules.Entry
	var why string
	switch {
	case r.host || (req.Script != nil && len(req.URLs) > 0):
		// A network approval: a command reaching a host (Codex), which
		// the human allowed or refused for the host.
		entries, why = hostEntries(req, decision)
	case r.amendmentUnread:
		return nil, "", fmt.Sprintf("the option %q names no prefix rule the broker can read", o.OptionID)
	case r.amendment != nil:
		entries, why = rules.DeriveWithin(req, decision, r.amendment)
	default:
		entries, why = rules.Derive(req, decision)
	}
	return entries, scope, why
}

// hostEntries remembers the hosts a network approval reaches, that host
// only, and never the command.
func hostEntries(req *rules.Request, decision rules.Decision) ([]rules.Entry, string) {
	if len(req.NotUnderstood) > 0 || len(req.Conflicts) > 0 {
		return nil, "the request cannot be read exactly"
	}
	var out []rules.Entry
	for _, u := range req.URLs {
		if u.URL == nil || u.URL.User != nil || u.URL.Hostname() == "" {
			return nil, fmt.Sprintf("the URL %q cannot be remembered", u.Raw)
		}
		out = append(out, rules.Entry{Decision: decision, Domain: u.URL.Hostname()})
	}
	if len(out) == 0 {
		return nil, "the option is for a host, and the request names none"
	}
	return out, ""
}
