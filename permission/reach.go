package permission

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/acp-broker/acp-broker/jsonrpc"
	"github.com/acp-broker/acp-broker/rules"
)

// An option's reach is how far the answer it gives goes beyond the request
// it answers: this request only, the turn, the session, or for good (a
// persistent rule in the agent). The broker reads it from the option's own
// description of its effect, `_meta.permission.changes` (a change of type
// "grant" or "policy_rule", with an optional `lifetime.scope` of "turn" or
// "session"; a policy rule without one is persistent), and from the option
// ids whose reach codex-acp 2.x and gemini-cli fix without saying so
// (2.6.0 sends no _meta on its options), and, for remembering, from the
// option's name, which may only narrow it. The broker uses it two ways:
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
// (allow_session), sandbox permissions (allow_permissions_session); and the
// older Rust adapter's approved-for-session.
var codexSessionOptions = map[string]bool{"allow_for_session": true, "allow_session": true, "allow_permissions_session": true, "approved-for-session": true}

// geminiSessionOptions are gemini-cli's "always" options that it keeps for
// the session only (packages/core, updatePolicy: only
// proceed_always_and_save persists): a command or tool, all of an MCP
// server's tools, one MCP tool.
var geminiSessionOptions = map[string]bool{"proceed_always": true, "proceed_always_server": true, "proceed_always_tool": true}

// namedScopes are the words an option's name uses for an answer that lasts
// the session or the turn: claude-agent-acp's allow-with-updates for a
// file ("Yes, allow all edits during this session", a session rule it
// cannot tell by id from its persistent one), gemini-cli's "Allow for this
// session", codex-acp's "for this conversation". The name is what the
// human read, so an answer is remembered no longer than it says; a name
// can only narrow what the id and _meta fix.
var namedScopes = []struct{ words, scope string }{
	{"this turn", "turn"},
	{"this session", "session"},
	{"this conversation", "session"},
}

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
	byID := narrowedByName(idReach(o), o.Name)
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

// narrowedByName is r no longer than the option's name says it lasts.
func narrowedByName(r reach, name string) reach {
	name = strings.ToLower(name)
	for _, n := range namedScopes {
		if strings.Contains(name, n.words) && r.scope != "" && scopeOrder[n.scope] < scopeOrder[r.scope] {
			r.scope = n.scope
		}
	}
	return r
}

// idReach is the reach the option's id and kind fix.
func idReach(o option) reach {
	r := reach{scope: "once"}
	if o.Kind == "allow_always" || o.Kind == "reject_always" {
		r.scope = "persistent"
	}
	switch id := o.OptionID; {
	case codexSessionOptions[id], geminiSessionOptions[id]:
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
// when the option does not describe its changes. Members are read by their
// exact names: one in another letter case (`"Lifetime"`), which a peer
// that folds case would read and another would not, makes the description
// unreadable.
func metaReach(meta json.RawMessage) (r reach, described bool) {
	if len(meta) == 0 || jsonrpc.IsNull(meta) {
		return reach{}, false
	}
	unreadable := reach{why: "the option's _meta.permission cannot be read exactly"}
	m, err := jsonrpc.ExactMembers(meta, "permission")
	if err != nil {
		return unreadable, true
	}
	perm, ok := m["permission"]
	if !ok || jsonrpc.IsNull(perm) {
		return reach{}, false
	}
	p, err := jsonrpc.ExactMembers(perm, "changes")
	if err != nil {
		return unreadable, true
	}
	changes, ok := p["changes"]
	if !ok {
		return reach{}, false
	}
	spans, err := jsonrpc.Elements(changes)
	if err != nil {
		return unreadable, true
	}
	r.scope = "once"
	for _, sp := range spans {
		c, err := jsonrpc.ExactMembers(changes[sp.Start:sp.End], "type", "lifetime")
		if err != nil {
			return unreadable, true
		}
		var typ, lifetime string
		if json.Unmarshal(c["type"], &typ) != nil {
			return unreadable, true
		}
		if raw, ok := c["lifetime"]; ok && !jsonrpc.IsNull(raw) {
			l, err := jsonrpc.ExactMembers(raw, "scope")
			if err != nil || json.Unmarshal(l["scope"], &lifetime) != nil {
				return unreadable, true
			}
		}
		scope := ""
		switch {
		case typ != "grant" && typ != "policy_rule":
			return reach{why: fmt.Sprintf("the option makes a change of type %q, which the broker does not know", typ)}, true
		case lifetime == "" && typ == "grant":
			scope = "once"
		case lifetime == "":
			scope = "persistent"
		case lifetime == "turn" || lifetime == "session":
			scope = lifetime
		default:
			return reach{why: fmt.Sprintf("the option's change lasts for %q, which the broker does not know", lifetime)}, true
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
// a deny, the reject_once option that answers this request only and lets the
// agent go on with something else (see keepsTurn), else the first reject
// option (of the wanted kinds, in order) that goes no further than the
// request, else the first reject option at all, since refusing for longer
// refuses at least this.
func pickFor(options []option, kinds []string) (option, bool) {
	if len(kinds) > 0 && kinds[0] == "reject_once" {
		// The ids the agents are known to send first, then the words.
		for _, byWords := range []bool{false, true} {
			for _, o := range options {
				if o.Kind == "reject_once" && answersOnlyThis(o) && keepsTurn(o, byWords) {
					return o, true
				}
			}
		}
	}
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
	if hidden := hiddenSubject(req); hidden != "" {
		// What the request is about, in the input of a request shown
		// as something else (a command or a URL in an MCP call, an
		// edit, a todo list): the human answered what the editor
		// showed, not what it does not show.
		return nil, "", fmt.Sprintf("the request is shown as %s, not as the %s its input carries", shownAs(req), hidden)
	}
	switch {
	case req.Script != nil && len(req.URLs) > 0:
		// A command that also names a URL (Codex's network approval, or
		// a shell call with a url in its input): the human is shown the
		// command or the host, and which one the editor shows is not the
		// broker's to know; remembering the host would let a fetch there
		// through that was never shown (an `npm test` carrying
		// rawInput.url), remembering the command would remember a host
		// approval as the command.
		return nil, "", "the request names both a command and a URL: neither is remembered for the other"
	case r.host:
		// A network-policy amendment: for the host, never the command.
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

// subjectKinds are the kinds that show a request as a file, a search or a
// fetch, so that an MCP tool in their input is not what they show.
var subjectKinds = map[string]bool{"edit": true, "read": true, "delete": true, "move": true, "search": true, "fetch": true}

// hiddenSubject names what a request would be remembered as (the first of
// what Derive reads: a command, an MCP tool, a URL) when its kind shows it
// as something else, or "".
func hiddenSubject(req *rules.Request) string {
	switch {
	case req.Script != nil && (req.Kind != "execute" || req.MCP != nil):
		return "command"
	case req.Script != nil:
		return ""
	case req.MCP != nil && (len(req.URLs) > 0 || subjectKinds[req.Kind]):
		// codex-acp shows an MCP tool approval as an execute request
		// with no command.
		return "MCP tool"
	case req.MCP == nil && len(req.URLs) > 0 && req.Kind != "fetch":
		return "URL"
	}
	return ""
}

// shownAs names what a request is shown as, for a reason.
func shownAs(req *rules.Request) string {
	if req.MCP != nil {
		return "the MCP call " + req.MCP.String()
	}
	if req.Kind == "" {
		return "a request of no kind"
	}
	return fmt.Sprintf("a %q request", req.Kind)
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

// turnKeepingRejects are the reject_once option ids with which an agent
// says the turn goes on without the tool call: codex-acp 2.x's "decline"
// ("No, continue without running it", where "cancel", "No, and tell Codex
// what to do differently", ends the turn), and the Rust codex-acp's
// "denied" (where "abort" stops it). codex-acp's fallback for an MCP
// question offers "decline" too ("Decline this request and continue.",
// where "cancel" cancels it).
var turnKeepingRejects = map[string]bool{"decline": true, "denied": true}

// keepsTurn reports whether a reject option says the agent goes on with
// something else rather than ending its turn: by its id (see
// turnKeepingRejects), or, if byWords, by its name or its
// _meta.permission.description saying it continues. A refusal is a
// refusal whichever is chosen, so the agent's words can only choose among
// its own rejects.
func keepsTurn(o option, byWords bool) bool {
	if turnKeepingRejects[o.OptionID] {
		return true
	}
	if !byWords {
		return false
	}
	return saysContinue(o.Name) || saysContinue(optionDescription(o.Meta))
}

// saysContinue reports whether words say the turn continues: "continue" as
// a word of its own (not "discontinue"), with no negation ("not", "never",
// a "…n't", "cannot") and no word that ends the turn ("stop", "abort",
// "cancel", "end", "halt") anywhere among them: "No, continue without
// running it" continues, "do not try to continue" and "Continue? No,
// abort" do not.
func saysContinue(words string) bool {
	continues := false
	for _, w := range strings.FieldsFunc(strings.ToLower(words), func(r rune) bool {
		return !unicode.IsLetter(r) && r != '\'' && r != '\u2019'
	}) {
		w = strings.ReplaceAll(w, "\u2019", "'")
		switch {
		case w == "continue" || w == "continues" || w == "continuing":
			continues = true
		case w == "not" || w == "never" || w == "cannot" || strings.HasSuffix(w, "n't"):
			return false
		case turnEnders[w]:
			return false
		}
	}
	return continues
}

// turnEnders are the words with which a reject says the turn ends.
var turnEnders = map[string]bool{"stop": true, "stops": true, "abort": true, "aborts": true, "cancel": true, "cancels": true, "end": true, "ends": true, "halt": true, "halts": true}

// optionDescription is an option's _meta.permission.description (codex-acp
// sends one to JetBrains AIR), or "".
func optionDescription(meta json.RawMessage) string {
	if len(meta) == 0 {
		return ""
	}
	m, err := jsonrpc.ExactMembers(meta, "permission")
	if err != nil {
		return ""
	}
	p, err := jsonrpc.ExactMembers(m["permission"], "description")
	if err != nil {
		return ""
	}
	d, _ := stringOf(p["description"])
	return d
}
