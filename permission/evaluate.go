package permission

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/acp-broker/acp-broker/jsonrpc"
	"github.com/acp-broker/acp-broker/rules"
	"github.com/acp-broker/acp-broker/session"
)

// Inputs are everything a permission request's decision depends on. The
// live broker and `rules explain` fill them each their own way and decide
// through the one Evaluate.
type Inputs struct {
	// Params are the request's params exactly as the agent sent them.
	Params json.RawMessage
	// ToolCall is the tracker's merged view of the tool call the request
	// asks about; nil when nothing was tracked of it.
	ToolCall *session.ToolCall
	Session  session.Info
	Policy   *rules.Policy
	Mode     string // the mode in force (see EffectiveMode)
	Home     string
	// Remembered are the answers remembered for this session only.
	Remembered []*rules.Rule
	// MCPHints, if not nil, is what the MCP proxies learned of the tools.
	MCPHints func(server, tool string) rules.ToolHints
}

// Evaluation is a permission request decided.
type Evaluation struct {
	// Understood is false when the params cannot be read exactly: nothing
	// was decided and Request is empty.
	Understood bool
	Request    *rules.Request
	// Verdict is the rules' verdict with the mode applied.
	Verdict rules.Verdict
	// Decision is what the broker does: allow or deny only when the request
	// offers an option of the right kind, which Option is; otherwise ask.
	Decision rules.Decision
	Option   Option
	// Source and Reason say why the request is asked, when it is.
	Source, Reason string
	// NoOption, when the rules decided but the request offers no option
	// of that kind, says which kind is missing.
	NoOption string
	// Lookalike is set when the request only looks like a permission (a
	// question, a plan review, a mode switch: see lookalikeOf), which only
	// a human answers and whose answer is never remembered.
	Lookalike bool

	params permissionParams
}

// Option is one of the options a permission request offers.
type Option = option

// EffectiveMode is the mode in force: the broker's --mode, else the config's,
// else "default".
func EffectiveMode(override string, p *rules.Policy) string {
	switch {
	case override != "":
		return override
	case p != nil && p.Mode != "":
		return p.Mode
	}
	return "default"
}

// Evaluate decides a session/request_permission as the live broker does:
// the params read exactly, the merged tool call, the rules and the mode, and
// the option of the decided kind.
func Evaluate(in Inputs) Evaluation {
	params, err := readPermissionParams(in.Params)
	if err != nil {
		return Evaluation{Request: &rules.Request{}, Decision: rules.Ask, Source: "not understood",
			Reason: "the request's params cannot be read: " + err.Error(), params: params}
	}
	ctx := sessionContext(in.Session, in.Mode, in.Home, in.Remembered, in.MCPHints)
	var req *rules.Request
	if in.ToolCall != nil {
		req = readMerged(in.ToolCall, ctx)
	} else {
		req = rules.ReadToolCallJSON(params.ToolCall, ctx)
	}
	if err := jsonrpc.Strict(in.Params); err != nil {
		// A member repeated deeper down: the editor may show one and the
		// broker judge the other.
		req.NotUnderstood = append(req.NotUnderstood, "the request's params: "+err.Error())
	}
	if !in.Session.Known() {
		// Without the session's directory its project rules and every ./
		// rule are missing: what still denies does, nothing is allowed.
		req.NotUnderstood = append(req.NotUnderstood, unopened(in.Session.ID))
	}
	if in.Session.Unreadable != "" {
		req.NotUnderstood = append(req.NotUnderstood, in.Session.Unreadable)
	}
	ev := Evaluation{Understood: true, Request: req, params: params}
	judged := stricterAtRoot(in.Policy, in.Policy.Decide(req), ctx, in.Session, func(c rules.Context) *rules.Request {
		if in.ToolCall != nil {
			return readMerged(in.ToolCall, c)
		}
		return rules.ReadToolCallJSON(params.ToolCall, c)
	})
	ev.Verdict = governed(in.Policy, rules.ApplyMode(judged, req, in.Mode), in.Session)
	if in.ToolCall != nil && len(in.ToolCall.Announced) > 0 && ev.Verdict.Decision != rules.Deny {
		// The request shows something else than the agent announced, and
		// what runs may be the announcement: a deny rule that matches it
		// denies the request.
		if announced := in.Policy.Decide(rules.ReadToolCall(in.ToolCall.Announced, ctx)); announced.Decision == rules.Deny {
			announced.Reason = strings.TrimPrefix(announced.Reason+"; ", "; ") + "what the agent announced is denied, and " + in.ToolCall.Disagreements[0]
			ev.Verdict = announced
		}
	}
	if source, reason := lookalikeOf(params, req); source != "" && ev.Verdict.Decision != rules.Deny {
		// Not a permission at all (see lookalikeOf): whatever the rules,
		// the remembered answers, the defaults and the mode allowed, a
		// human answers it. What they deny stays denied: the marks are the
		// agent's own to write.
		ev.Verdict.Decision, ev.Verdict.Source, ev.Verdict.Rule, ev.Verdict.Reason = rules.Ask, source, nil, reason
		ev.Lookalike = true
		ev.params.lookalike = true
	}
	ev.Decision, ev.Source, ev.Reason = ev.Verdict.Decision, ev.Verdict.Source, ev.Verdict.Reason
	var want []string
	switch ev.Verdict.Decision {
	case rules.Allow:
		want = []string{"allow_once"}
	case rules.Deny:
		want = []string{"reject_once", "reject_always"}
	default:
		ev.Decision = rules.Ask
		return ev
	}
	opt, ok := pickFor(params.Options, want)
	if !ok {
		ev.Decision = rules.Ask
		ev.NoOption = fmt.Sprintf("the request offers no %s option that answers this request only", strings.Join(want, " or "))
		ev.Reason = ev.Verdict.Reason + ", but " + ev.NoOption
		return ev
	}
	ev.Option = opt
	return ev
}

// readMerged reads the tracker's merged view of a tool call (what the
// agent's session/update notifications said of it, overlaid with the
// request's own toolCall) into a Request, with what makes it ambiguous or
// contradict the announcement.
func readMerged(tc *session.ToolCall, ctx rules.Context) *rules.Request {
	req := rules.ReadToolCall(tc.Fields, ctx)
	if tc.Ambiguous {
		req.NotUnderstood = append(req.NotUnderstood, "a message about this tool call repeats a member")
	}
	req.Conflicts = append(req.Conflicts, tc.Disagreements...)
	return req
}

// sessionContext is what the rules know of the request's session.
func sessionContext(info session.Info, mode, home string, remembered []*rules.Rule, hints func(server, tool string) rules.ToolHints) rules.Context {
	ctx := rules.Context{Cwd: info.Cwd, Roots: info.AdditionalDirectories, Home: home, Mode: mode, Session: remembered, MCPHints: hints}
	for _, raw := range info.MCPServers {
		if name, ok := jsonrpc.String(raw, "name"); ok {
			ctx.MCPServers = append(ctx.MCPServers, name)
		}
	}
	if info.Parent != "" {
		// A subagent's session: its root's rules, where it works.
		ctx = ctx.ForSubagent(info.WorkDir, info.WorkDirs)
	}
	return ctx
}

// The params of the intercepted requests are read by their exact member
// names: a member in another letter case is not the member, and since a
// peer that folds case (Go's encoding/json) would take it for the member,
// params that carry one, or repeat a member at any depth, are not read at
// all.

// readPermissionParams reads a session/request_permission's params.
func readPermissionParams(raw json.RawMessage) (permissionParams, error) {
	var p permissionParams
	m, err := jsonrpc.ExactMembers(raw, "sessionId", "toolCall", "options", "_meta", "title", "description", "subject")
	if err != nil {
		return p, err
	}
	for _, name := range []string{"title", "description"} {
		if v, ok := m[name]; ok && !jsonrpc.IsNull(v) && v[0] != '"' {
			return p, fmt.Errorf("%q is not a string", name)
		}
	}
	if v, ok := m["title"]; ok {
		p.Title, _ = stringOf(v)
	}
	if v, ok := m["sessionId"]; ok && !jsonrpc.IsNull(v) {
		if p.SessionID, ok = stringOf(v); !ok {
			return p, errors.New(`"sessionId" is not a string`)
		}
	}
	if v, ok := m["options"]; ok && string(v) != "null" {
		spans, err := jsonrpc.Elements(v)
		if err != nil {
			return p, fmt.Errorf(`"options": %v`, err)
		}
		for _, sp := range spans {
			o, err := readOption(v[sp.Start:sp.End])
			if err != nil {
				return p, fmt.Errorf(`an option: %v`, err)
			}
			if _, dup := optionByID(p.Options, o.OptionID); dup {
				// The human sees two choices with one id: the answer
				// naming it says nothing of which was chosen.
				p.Options = nil
				return p, fmt.Errorf("the option id %q is offered twice", o.OptionID)
			}
			p.Options = append(p.Options, o)
		}
	}
	tc, ok := m["toolCall"]
	if subject, given := m["subject"]; given && !jsonrpc.IsNull(subject) {
		// ACP v2: what is asked about is the subject.
		if ok {
			return p, errors.New(`both a "toolCall" (ACP v1) and a "subject" (ACP v2)`)
		}
		if tc, err = subjectToolCall(subject); err != nil {
			return p, err
		}
		ok = true
	}
	if !ok || tc[0] != '{' {
		return p, errors.New(`no "toolCall" object`)
	}
	tcMembers, err := jsonrpc.ExactMembers(tc, session.ToolCallFields...)
	if err != nil {
		return p, fmt.Errorf(`"toolCall": %v`, err)
	}
	if v, ok := tcMembers["toolCallId"]; ok {
		// A number would be another id to the broker than to an editor
		// that keys tool calls by JavaScript property (1 is "1").
		if p.ToolCallID, ok = stringOf(v); !ok || p.ToolCallID == "" {
			return p, errors.New(`"toolCall"'s "toolCallId" is not a non-empty string`)
		}
	}
	p.ToolCall = tc
	return p, nil
}

// stringOf decodes a JSON string value as encoding/json does, without its
// cost for a string with nothing escaped, which is nearly every one a
// request carries (read once per option of every request).
func stringOf(v json.RawMessage) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	body := v[1 : len(v)-1]
	if v[len(v)-1] == '"' && bytes.IndexByte(body, '\\') < 0 && bytes.IndexByte(body, '"') < 0 && utf8.Valid(body) && !hasControl(body) {
		return string(body), true
	}
	var s string
	return s, json.Unmarshal(v, &s) == nil
}

// hasControl reports whether b holds a byte a JSON string must escape.
func hasControl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
}

func readOption(raw json.RawMessage) (option, error) {
	var o option
	m, err := jsonrpc.ExactMembers(raw, "optionId", "name", "kind", "_meta")
	if err != nil {
		return o, err
	}
	if err := readStrings(m, stringMember{"optionId", &o.OptionID}, stringMember{"name", &o.Name}, stringMember{"kind", &o.Kind}); err != nil {
		return o, err
	}
	o.Meta = m["_meta"]
	return o, nil
}

// stringMember is a member read as a string, and where it goes.
type stringMember struct {
	name string
	dst  *string
}

// readStrings reads each member of m that is given and not null (which
// encoding/json leaves as "") as a string, in order: the first that is not
// a string is the one the error names.
func readStrings(m map[string]json.RawMessage, members ...stringMember) error {
	for _, member := range members {
		v, given := m[member.name]
		if !given || jsonrpc.IsNull(v) {
			continue
		}
		s, ok := stringOf(v)
		if !ok {
			return fmt.Errorf("%q is not a string", member.name)
		}
		*member.dst = s
	}
	return nil
}

// writeParams are the members of fs/write_text_file the broker reads.
type writeParams struct {
	Path string
}

// readWriteParams reads fs/write_text_file's params.
func readWriteParams(raw json.RawMessage) (writeParams, error) {
	var p writeParams
	if err := jsonrpc.Strict(raw); err != nil {
		return p, err
	}
	m, err := jsonrpc.ExactMembers(raw, "sessionId", "path", "content", "_meta")
	if err != nil {
		return p, err
	}
	if err := stringMembers(m, "sessionId", "content"); err != nil {
		return p, err
	}
	if v, ok := m["path"]; ok && json.Unmarshal(v, &p.Path) != nil {
		return p, errors.New(`"path" is not a string`)
	}
	return p, nil
}

// terminalParams are the members of terminal/create the broker reads.
type terminalParams struct {
	Command string
	Args    []string
	Cwd     string
	Env     []envVar
}

// envVar is one entry of a terminal's env.
type envVar struct{ Name, Value string }

// readTerminalParams reads terminal/create's params.
func readTerminalParams(raw json.RawMessage) (terminalParams, error) {
	var p terminalParams
	if err := jsonrpc.Strict(raw); err != nil {
		return p, err
	}
	m, err := jsonrpc.ExactMembers(raw, "sessionId", "command", "args", "env", "cwd", "outputByteLimit", "_meta")
	if err != nil {
		return p, err
	}
	if err := stringMembers(m, "sessionId"); err != nil {
		return p, err
	}
	for name, dst := range map[string]any{"command": &p.Command, "args": &p.Args, "cwd": &p.Cwd} {
		if v, ok := m[name]; ok && json.Unmarshal(v, dst) != nil {
			return p, fmt.Errorf("%q has the wrong type", name)
		}
	}
	if v, ok := m["env"]; ok && string(v) != "null" {
		// The editor sets the environment as it reads it: an entry it
		// would read differently is refused.
		spans, err := jsonrpc.Elements(v)
		if err != nil {
			return p, fmt.Errorf(`"env": %v`, err)
		}
		for _, sp := range spans {
			entry, err := jsonrpc.ExactMembers(v[sp.Start:sp.End], "name", "value", "_meta")
			if err != nil {
				return p, fmt.Errorf(`"env": %v`, err)
			}
			if err := stringMembers(entry, "name", "value"); err != nil {
				return p, fmt.Errorf(`"env": %v`, err)
			}
			var ev envVar
			_ = json.Unmarshal(entry["name"], &ev.Name)
			_ = json.Unmarshal(entry["value"], &ev.Value)
			p.Env = append(p.Env, ev)
		}
	}
	return p, nil
}

// stringMembers checks that each named member, where present, is a string.
func stringMembers(m map[string]json.RawMessage, names ...string) error {
	for _, name := range names {
		if v, ok := m[name]; ok && v[0] != '"' {
			return fmt.Errorf("%q is not a string", name)
		}
	}
	return nil
}
