package permission

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acp-broker/acp-broker/jsonrpc"
	"github.com/acp-broker/acp-broker/mcp"
	"github.com/acp-broker/acp-broker/notify"
	"github.com/acp-broker/acp-broker/rules"
	"github.com/acp-broker/acp-broker/session"
)

// Engine decides intercepted requests from the rules: it answers what the
// rules allow or deny, and forwards to the editor, unchanged, what they ask
// about or what it cannot read.
type Engine struct {
	Rules *RuleSource
	// Mode overrides the config's mode when not empty.
	Mode  string
	Audit *Audit
	Log   *slog.Logger
	// Agent names the agent in audit records.
	Agent string
	Home  string
	// Asker routes what the rules leave open; nil asks the editor only.
	Asker *Asker
	// StateDir holds the remembered answers shared by every broker.
	StateDir string
	// Catalog, if not nil, is what the MCP proxies learned of the tools.
	Catalog *mcp.Catalog

	// editor sends the broker's own requests, for MCP calls nobody asked
	// about; set by Started.
	editor   *session.Editor
	approved approvals
	// quick notes the sessions whose editor answered faster than a person.
	quick quickAnswers
	// answeringForEditor is set once the broker advertised form
	// elicitation to the agent for an editor without it (see
	// RewriteInitialize): questions then never go to the editor.
	answeringForEditor atomic.Bool

	mu sync.Mutex
	// sessionRules are answers remembered for one session only, by session.
	sessionRules map[string][]*rules.Rule
	// unanswered counts forwarded requests whose audit line is not written
	// yet, so Close can wait for them.
	unanswered sync.WaitGroup
}

// Close waits a moment for the audit lines of requests still with the
// editor (they are written as unanswered once the relay has stopped), then
// closes the audit log.
func (e *Engine) Close(wait time.Duration) error {
	done := make(chan struct{})
	go func() {
		e.unanswered.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(wait):
	}
	return e.Audit.Close()
}

// Intercept decides one request on the relay's reader goroutine. A decision
// is a few microseconds of pure computation, so it is made in line and the
// agent's message order is kept.
func (e *Engine) Intercept(c *session.Call) {
	start := time.Now()
	switch c.Method {
	case "session/request_permission":
		e.permission(c, start)
	case "fs/write_text_file":
		e.fsWrite(c, start)
	case "terminal/create":
		e.terminal(c, start)
	case "elicitation/create":
		e.question(c, start)
	default:
		c.Forward(nil)
	}
}

type option struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
	// Meta is the option's _meta as sent, which may describe how far its
	// answer reaches (see reach).
	Meta json.RawMessage `json:"-"`
}

// permissionParams is what the broker reads of a session/request_permission
// (see readPermissionParams).
type permissionParams struct {
	SessionID string
	ToolCall  json.RawMessage
	// ToolCallID is the tool call's toolCallId, "" when it has none.
	ToolCallID string
	Options    []option
	// Title is an ACP v2 request's own title for the prompt: shown to
	// the human where the tool call has none, never judged.
	Title string
	// lookalike is set when the request only looks like a permission
	// (see lookalikeOf): the human's answer goes to the agent as chosen.
	lookalike bool
}

func (e *Engine) context(info session.Info, mode string) rules.Context {
	return sessionContext(info, mode, e.Home, e.remembered(info.RulesSession()), e.hints(info.ID))
}

// remembered returns the answers remembered for one session only.
func (e *Engine) remembered(sessionID string) []*rules.Rule {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sessionRules[sessionID]
}

// hints tells what the MCP proxies of a session learned of its tools.
func (e *Engine) hints(sessionID string) func(server, tool string) rules.ToolHints {
	if e.Catalog == nil {
		return nil
	}
	return e.Catalog.HintsFor(sessionID)
}

// policy returns the rules in force for a session's directory, and the mode.
func (e *Engine) policy(s session.Info) (*rules.Policy, string, error) {
	p, err := e.Rules.Policy(s.Cwd)
	if err != nil {
		return nil, "", err
	}
	return p, SessionMode(e.Mode, p, s), nil
}

func (e *Engine) permission(c *session.Call, start time.Time) {
	rec := Record{Session: c.Session.ID, Parent: c.Session.Parent, Method: c.Method}
	p, mode, err := e.policy(c.Session)
	if err != nil {
		e.Log.Error("cannot load the rules; asking the editor", "err", err)
		params, _ := readPermissionParams(c.Params)
		e.ask(c, params, &rules.Request{}, rec, start, "config error", err.Error(), nil)
		return
	}
	ev := Evaluate(Inputs{Params: c.Params, ToolCall: c.ToolCall, Session: c.Session, Policy: p, Mode: mode,
		Home: e.Home, Remembered: e.remembered(c.Session.RulesSession()), MCPHints: e.hints(c.Session.ID)})
	params, req := ev.params, ev.Request
	if !ev.Understood {
		e.ask(c, params, req, rec, start, ev.Source, ev.Reason, nil)
		return
	}
	describe(&rec, req)
	rec.ToolCallID = params.ToolCallID
	fillVerdict(&rec, ev.Verdict)
	if ev.Decision == rules.Ask {
		var remember rememberFunc
		if !ev.Lookalike {
			// An answer to a question or a plan is not a rule for the
			// next request that looks the same.
			remember = e.rememberer(c.Session, req, p.Remember, currentRequest(c, e.context(c.Session, mode)))
		}
		e.ask(c, params, req, rec, start, ev.Source, ev.Reason, remember)
		return
	}
	opt := ev.Option
	rec.Option, rec.OptionKd = opt.OptionID, opt.Kind
	// The line reaches the kernel before the answer leaves (see write):
	// whatever the agent was answered is in the log, even if the broker is
	// killed the moment after.
	rec.Latency = ms(time.Since(start))
	if err := e.write(rec); err != nil && ev.Decision == rules.Allow {
		// An allow that leaves no trace is not the broker's to give.
		rec.Option, rec.OptionKd = "", ""
		e.ask(c, params, req, rec, start, "audit log", "the broker allowed this but cannot write the audit log ("+err.Error()+"), so a human decides", nil)
		return
	}
	// The user is told before the agent is answered (see tell).
	e.tell(&rec)
	// What the allow covers next (see approvals) is noted before the agent
	// can act on it: an MCP call reaches the broker on another goroutine,
	// so before the answer; a terminal or a write comes on this one, once
	// Intercept returns, so after it, off the answer's latency (noting a
	// command resolves its directory's links).
	covers := ev.Decision == rules.Allow
	if covers && req.MCP != nil {
		e.approved.noteRequest(c.Session.ID, req, mcpArguments(c, params), true)
		covers = false
	}
	if c.SelectOption(opt.OptionID) && covers {
		e.approved.noteRequest(c.Session.ID, req, nil, true)
	}
}

// pick returns the first option of the first wanted kind offered: options
// are chosen by kind, never by id, since ids differ per agent and version.
func pick(options []option, kinds []string) (option, bool) {
	for _, k := range kinds {
		for _, o := range options {
			if o.Kind == k {
				return o, true
			}
		}
	}
	return option{}, false
}

// currentRequest reads the tool call a permission request asks about as it
// is now, which tool_call_update notifications may have changed while it was
// asked; nil when the request carries no tool call id (nothing can change it).
func currentRequest(c *session.Call, ctx rules.Context) func() *rules.Request {
	if c.ToolCall == nil {
		return nil
	}
	return func() *rules.Request {
		if tc := c.CurrentToolCall(); tc != nil {
			return readMerged(tc, ctx)
		}
		return nil
	}
}

// unchangedSinceAsked reports whether the tool call a permission request
// asks about is still the one decided on: an update while it was asked may
// have shown the human something else (a harmless command in place of the
// one the agent then runs), so the answer then covers nothing that follows.
func (e *Engine) unchangedSinceAsked(c *session.Call, req *rules.Request) bool {
	// Reading a tool call does not depend on the mode.
	current := currentRequest(c, e.context(c.Session, ""))
	if current == nil {
		return true
	}
	now := current()
	return now != nil && rules.SameRequest(req, now)
}

// alwaysCovers says what an "always" answer with option o would remember
// of a request, for the audit line and the prompts, before anything is
// stored.
func alwaysCovers(req *rules.Request, o option) string {
	entries, scope, why := remembers(req, o, "")
	if len(entries) == 0 {
		return "nothing (" + why + ")"
	}
	parts := make([]string, len(entries))
	for i, entry := range entries {
		parts[i] = entry.Matches()
	}
	covers := strings.Join(parts, "; ")
	if scope == "session" {
		covers += ", for this session"
	}
	return covers
}

// rememberFunc remembers an "always" answer: the option chosen, and who
// answered.
type rememberFunc func(chosen option, by string) string

// rememberer returns what remembers an "always" answer to this request:
// narrow entries derived from it, no broader than the option chosen says
// (see remembers), kept for the session, the project or the user as the
// config says (default: the project), or for the session when the option
// is for the session. by names who answered. It returns the entry ids for
// the audit log, or why nothing was remembered.
//
// current, if not nil, reads the tool call as it is when the answer wins: if
// an update changed it while it was asked, the human may have answered what
// they were shown then rather than what was decided on, so nothing is
// remembered (the answer itself still applies, once).
//
// It runs once the answer has won and before it goes on to the agent, so the
// agent's next request already sees the entry; the store's lock and fsync
// take a few milliseconds at most.
func (e *Engine) rememberer(info session.Info, req *rules.Request, scope string, current func() *rules.Request) rememberFunc {
	return func(chosen option, by string) string {
		if current != nil {
			if now := current(); now == nil || !rules.SameRequest(req, now) {
				why := "the tool call changed while it was asked, so what the human saw may not be what was decided"
				if now == nil {
					why = "the tool call is no longer tracked, so what the human saw cannot be checked"
				}
				e.Log.Warn("not remembering an always answer", "reason", why)
				return "nothing: " + why
			}
		}
		entries, scope, why := remembers(req, chosen, scope)
		if len(entries) == 0 {
			e.Log.Info("not remembering an always answer", "reason", why)
			return "nothing: " + why
		}
		if scope == "" {
			scope = "project"
		}
		if scope == "project" && info.Cwd == "" {
			scope = "session" // no project to file it under
		}
		now := time.Now().UTC().Format(time.RFC3339)
		what := req.Title
		if what == "" && req.Script != nil && len(req.Script.Commands) > 0 {
			what = strings.Join(req.Script.Commands[0].Argv, " ")
		}
		for i := range entries {
			entries[i].Scope, entries[i].Agent, entries[i].By, entries[i].LearnedAt, entries[i].Request = scope, e.Agent, by, now, what
			switch scope {
			case "project":
				entries[i].Project = info.Cwd
			case "session":
				entries[i].Session = info.RulesSession()
			}
		}
		if scope == "session" {
			// A subagent's answers are its root's, as its rules are.
			return e.rememberForSession(info.RulesSession(), entries)
		}
		saved, err := rules.StoreIn(e.StateDir).Add(entries...)
		// The agent's next request must see the entry (or whatever the
		// failed write left), not the rules of the last check.
		e.Rules.Changed()
		if err != nil {
			e.Log.Error("cannot remember an always answer", "err", err)
			return "nothing: " + err.Error()
		}
		ids := make([]string, len(saved))
		for i, s := range saved {
			ids[i] = s.ID
		}
		e.Log.Info("remembered an always answer", "scope", scope, "entries", strings.Join(ids, ","), "covers", alwaysCovers(req, chosen))
		return strings.Join(ids, ",")
	}
}

func (e *Engine) rememberForSession(sessionID string, entries []rules.Entry) string {
	var ids []string
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sessionRules == nil {
		e.sessionRules = map[string][]*rules.Rule{}
	}
	for _, entry := range entries {
		r, err := rules.SessionRule(entry)
		if err != nil {
			e.Log.Error("cannot remember an always answer", "err", err)
			continue
		}
		e.sessionRules[sessionID] = append(e.sessionRules[sessionID], r)
		ids = append(ids, r.ID)
	}
	return strings.Join(ids, ",")
}

// optionByID finds an offered option by its id. An id offered more than
// once names no option: which of them the human chose is unknown.
func optionByID(options []option, id string) (option, bool) {
	found, n := option{}, 0
	for _, o := range options {
		if o.OptionID == id {
			found, n = o, n+1
		}
	}
	return found, n == 1
}

func decisionOf(kind string) string {
	if strings.HasPrefix(kind, "allow") {
		return string(rules.Allow)
	}
	return string(rules.Deny)
}

// fsWrite checks a write the agent asks the editor to make (defend): what
// the agent did not ask about is not written blindly.
func (e *Engine) fsWrite(c *session.Call, start time.Time) {
	params, err := readWriteParams(c.Params)
	if err != nil {
		e.refuseUnreadable(c, start, err)
		return
	}
	if err := anchoredPath("path", params.Path); err != nil {
		e.refuseUnreadable(c, start, err)
		return
	}
	input, _ := json.Marshal(map[string]string{"file_path": params.Path})
	e.defend(c, start, map[string]json.RawMessage{"kind": json.RawMessage(`"edit"`), "rawInput": input}, func(req *rules.Request) string {
		if len(req.Paths) != 1 {
			return ""
		}
		return writeApproval(linkedAs(req.Paths[0].Abs, req.Paths[0].Resolved))
	})
}

// terminal checks a terminal the agent asks the editor to start (defend).
func (e *Engine) terminal(c *session.Call, start time.Time) {
	params, err := readTerminalParams(c.Params)
	if err != nil {
		e.refuseUnreadable(c, start, err)
		return
	}
	if params.Command == "" {
		// Zed would run the first argument as the program.
		e.refuseUnreadable(c, start, errors.New(`"command" is empty`))
		return
	}
	if params.Cwd != "" {
		if err := anchoredPath("cwd", params.Cwd); err != nil {
			e.refuseUnreadable(c, start, err)
			return
		}
	}
	var input map[string]any
	if line, ok := shellLine(params.Command, params.Args); ok {
		input = map[string]any{"command": line}
	} else {
		input = map[string]any{"command": append([]string{params.Command}, params.Args...)}
	}
	if params.Cwd != "" {
		input["cwd"] = params.Cwd
	}
	raw, _ := json.Marshal(input)
	e.defend(c, start, map[string]json.RawMessage{"kind": json.RawMessage(`"execute"`), "rawInput": raw}, func(req *rules.Request) string {
		if len(params.Env) > 0 {
			// The environment changes what a program does, as VAR=x does;
			// no permission request, which never shows one, covers it.
			var vars []string
			for _, v := range params.Env {
				vars = append(vars, v.Name+"="+v.Value)
			}
			req.AddEnvironment(vars)
			return ""
		}
		what, _ := commandApproval(req.Command, linkedAs(req.Dir, req.ResolvedDir()))
		return what
	})
}

// anchoredPath checks that a write's path or a terminal's cwd names one
// place for every editor: ACP wants it absolute, and an editor resolves a
// relative one against a directory of its own choosing (its own, a
// worktree's); and an editor in C or Lua (fopen, libuv) ends it at a NUL
// byte, so `/p/.git/hooks/pre-commit\x00/../../../src/x.go`, which the
// broker would read as /p/src/x.go, writes the hook.
func anchoredPath(member, path string) error {
	switch {
	case strings.ContainsRune(path, 0):
		return fmt.Errorf("%q contains a NUL byte", member)
	case !filepath.IsAbs(path):
		return fmt.Errorf("%q is not an absolute path", member)
	}
	return nil
}

// shellLine says how a shell runs a terminal's command and args, when that
// may differ from the argv they spell: editors run terminals through the
// user's shell (Zed runs `sh -c "<command> '<arg>' …"`, the command
// unquoted, each argument quoted), so a command that is not one plain word
// (`\rm`, `"rm"`, `{rm,-rf,x}`, `/bin/r?`, ` rm`, `rm -rf`, `true;rm`) is
// read as the line a shell would run. A plain program's arguments are
// quoted by the editor, so they stay its argv; false then.
func shellLine(command string, args []string) (string, bool) {
	if words, ok := plainWords(command); ok && len(words) == 1 && words[0] == command {
		return "", false
	}
	line := command
	for _, a := range args {
		line += " '" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return line, true
}

// refuseUnreadable refuses a write or terminal whose params the broker
// cannot read exactly: the editor might read them otherwise, so they are
// never forwarded.
func (e *Engine) refuseUnreadable(c *session.Call, start time.Time, err error) {
	rec := Record{Session: c.Session.ID, Parent: c.Session.Parent, Method: c.Method, Decision: string(rules.Deny), Source: "not understood", Reason: "the request's params: " + err.Error()}
	rec.Latency = ms(time.Since(start))
	_ = e.write(rec)
	c.RespondError(jsonrpc.CodeInvalidParams, "acp-broker cannot read this request's params exactly ("+err.Error()+"), so it is refused")
}

// defend decides a write or a terminal the agent asks the editor for. Agents
// decide themselves whether to ask permission first, so:
//
//   - what a deny rule, a protected path or the mode (plan, dont-ask)
//     refuses is answered with an error and never reaches the editor;
//   - what the rules (and the mode) allow outright is forwarded;
//   - what an answer to the agent's own permission request covers (approvals:
//     the same command in the same directory, or the same path, once, within
//     five minutes) is forwarded if the answer allowed it and refused if it
//     rejected it;
//   - a command the broker cannot see through is refused: nobody could be
//     shown what it does;
//   - anything else is asked with the broker's own prompt (askOwn), and
//     forwarded, unchanged, only if the answer allows it.
//
// prepare completes the request the rules judge (a terminal's environment)
// and says which approval would cover it ("" for none).
func (e *Engine) defend(c *session.Call, start time.Time, fields map[string]json.RawMessage, prepare func(*rules.Request) string) {
	rec := Record{Session: c.Session.ID, Parent: c.Session.Parent, Method: c.Method}
	if !c.Session.Known() || c.Session.Unreadable != "" {
		// Its directory, and so its rules, are unknown.
		why := unopened(c.Session.ID)
		if c.Session.Known() {
			why = c.Session.Unreadable
		}
		rec.Decision, rec.Source, rec.Reason = string(rules.Deny), "unknown session", why
		rec.Latency = ms(time.Since(start))
		_ = e.write(rec)
		c.RespondError(jsonrpc.CodeServerError, "acp-broker refused this: "+why)
		return
	}
	// refuse answers with an error saying why; the audit line says the
	// same unless the record already has a reason. The line is written
	// before the answer or the forward, as in permission.
	refuse := func(source, why string) {
		rec.Decision, rec.Source = string(rules.Deny), source
		if rec.Reason == "" {
			rec.Reason = why
		}
		rec.Latency = ms(time.Since(start))
		_ = e.write(rec)
		c.RespondError(jsonrpc.CodeServerError, "acp-broker denied this: "+why)
	}
	forward := func() {
		rec.Latency = ms(time.Since(start))
		if err := e.write(rec); err != nil {
			// What the rules allow goes nowhere unrecorded.
			rec.Reason = ""
			refuse("audit log", "the audit log cannot be written ("+err.Error()+")")
			return
		}
		c.Forward(nil)
	}
	p, mode, err := e.policy(c.Session)
	if err != nil {
		e.Log.Error("cannot load the rules; refusing", "method", c.Method, "err", err)
		refuse("config error", "the rules cannot be loaded, so this is refused: "+err.Error())
		return
	}
	ctx := e.context(c.Session, mode)
	req := rules.ReadToolCall(fields, ctx)
	what := prepare(req)
	describe(&rec, req)
	judged := stricterAtRoot(p, p.Decide(req), ctx, c.Session, func(c rules.Context) *rules.Request { return rules.ReadToolCall(fields, c) })
	v := governed(p, rules.ApplyMode(judged, req, mode), c.Session)
	reason, protected := p.Protected(req)
	switch {
	case judged.Decision == rules.Deny:
		fillVerdict(&rec, judged)
		msg := "rule " + ruleName(judged.Rule)
		if judged.Reason != "" {
			msg += ": " + judged.Reason
		}
		refuse(judged.Source, msg)
		return
	case protected:
		refuse("protected", reason)
		return
	case v.Decision == rules.Deny:
		fillVerdict(&rec, v)
		refuse(v.Source, v.Source+": "+v.Reason)
		return
	case v.Decision == rules.Allow:
		fillVerdict(&rec, v)
		forward()
		return
	}
	// Only a request read exactly can be the same thing as the one the
	// human answered.
	if what != "" && c.Session.ID != "" && len(req.NotUnderstood) == 0 && len(req.Conflicts) == 0 {
		if found, allowed := e.approved.take(c.Session.ID, what, nil); found {
			if !allowed {
				refuse("asked in ACP", "it was rejected when the agent asked for it with session/request_permission")
				return
			}
			rec.Decision, rec.Source, rec.Reason = string(rules.Allow), "asked in ACP", "the agent asked for this with session/request_permission and it was allowed"
			forward()
			return
		}
	}
	if req.Script != nil {
		if opaque := req.Script.Opaqueness(); len(opaque) > 0 {
			refuse("not see-through", "the broker cannot see what this command does ("+strings.Join(opaque, "; ")+"), so nobody can be asked about it; an agent must ask for it with session/request_permission first")
			return
		}
	}
	ed := e.editorHandle()
	if ed == nil || c.Session.ID == "" {
		refuse("not asked", "no rule allows this, no permission request of the agent covers it, and nobody can be asked: the request names no session")
		return
	}
	// The title names the agent's path or command: one line (notify.OneLine),
	// so that it cannot add a line that reads as the broker's.
	o := ownPrompt{session: c.Session.ID, rawInput: c.Params}
	if c.Method == "fs/write_text_file" {
		o.what, o.kind, o.title = "write", "edit", "Write (held by acp-broker: "+notify.OneLine(v.Reason)+")"
		for _, path := range req.Paths {
			o.title = fmt.Sprintf("Write %s (held by acp-broker: %s)", notify.OneLine(path.Abs), notify.OneLine(v.Reason))
			o.locations = append(o.locations, path.Abs)
		}
	} else {
		o.what, o.kind = "terminal", "execute"
		var cmds []string
		if req.Script != nil {
			for _, sc := range req.Script.Commands {
				cmds = append(cmds, strings.Join(sc.Argv, " "))
			}
		}
		o.title = notify.OneLine(fmt.Sprintf("Run %s in %s (held by acp-broker: %s)", strings.Join(cmds, "; "), req.Dir, v.Reason))
	}
	remember := e.rememberer(c.Session, req, p.Remember, nil)
	go func() {
		allowed, closeView := e.askOwn(c.Context(), ed, o, req, rec, start, v.Source, v.Reason, remember)
		switch {
		case allowed:
			closeView("completed", "acp-broker: allowed; the request went to the editor")
			c.Forward(nil)
		case c.Context().Err() != nil:
			closeView("failed", "acp-broker: the agent withdrew the request")
		default:
			closeView("failed", "acp-broker: not allowed")
			c.RespondError(jsonrpc.CodeServerError, "acp-broker denied this: it was not allowed when the broker asked (rejected, or nobody answered in time)")
		}
	}()
}

// unopened says why a request of a session the editor did not open (or
// closed, or never named) is not decided by the rules.
func unopened(id string) string {
	if id == "" {
		return "the request names no session"
	}
	return fmt.Sprintf("the editor did not open session %q (or closed it)", id)
}

func ruleName(r *rules.Rule) string {
	if r == nil {
		return "?"
	}
	if r.ID != "" {
		return fmt.Sprintf("%s (%s)", r.ID, r.Where())
	}
	return r.Where()
}

// describe fills what a request does into its audit record.
func describe(rec *Record, req *rules.Request) {
	rec.Kind, rec.Title = req.Kind, req.Title
	if req.Script != nil {
		for _, c := range req.Script.Commands {
			rec.Commands = append(rec.Commands, strings.Join(c.Normalized(), " "))
		}
	}
	for _, p := range req.Paths {
		rec.Paths = append(rec.Paths, p.Abs)
	}
	for _, u := range req.URLs {
		rec.URLs = append(rec.URLs, u.Raw)
	}
	if req.MCP != nil {
		rec.MCP = req.MCP.String()
	}
}

func fillVerdict(rec *Record, v rules.Verdict) {
	rec.Decision, rec.Source, rec.Reason = string(v.Decision), v.Source, v.Reason
	if v.Rule != nil {
		rec.Rule, rec.RuleID = v.Rule.Where(), v.Rule.ID
	}
}

// write appends a record to the audit log, logging a failure, which it
// returns so that no allow goes out that the log does not hold. Each line is
// one write(2) of its own, made before the answer it records is sent: it is
// then in the kernel, which keeps it whatever becomes of the broker (even
// SIGKILL; only the machine's crash can lose what was not yet on disk), and
// the answer waits for no disk, no flush and no other goroutine, only for
// that system call.
func (e *Engine) write(r Record) error {
	r.Time = time.Now().UTC()
	r.Agent = e.Agent
	err := e.Audit.Write(r)
	if err != nil {
		e.Log.Error("cannot write the audit log", "err", err)
	}
	return err
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
