package permission

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/acp-broker/acp-broker/jsonrpc"
	"github.com/acp-broker/acp-broker/mcp"
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
	default:
		c.Forward(nil)
	}
}

type option struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
}

// permissionParams is what the broker reads of a session/request_permission
// (see readPermissionParams).
type permissionParams struct {
	SessionID string
	ToolCall  json.RawMessage
	Options   []option
}

func (e *Engine) context(info session.Info, mode string) rules.Context {
	return sessionContext(info, mode, e.Home, e.remembered(info.ID), e.hints())
}

// remembered returns the answers remembered for one session only.
func (e *Engine) remembered(sessionID string) []*rules.Rule {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sessionRules[sessionID]
}

func (e *Engine) hints() func(server, tool string) rules.ToolHints {
	if e.Catalog == nil {
		return nil
	}
	return e.Catalog.Hints
}

// policy returns the rules in force for a session's directory, and the mode.
func (e *Engine) policy(cwd string) (*rules.Policy, string, error) {
	p, err := e.Rules.Policy(cwd)
	if err != nil {
		return nil, "", err
	}
	return p, EffectiveMode(e.Mode, p), nil
}

func (e *Engine) permission(c *session.Call, start time.Time) {
	rec := Record{Session: c.Session.ID, Method: c.Method}
	p, mode, err := e.policy(c.Session.Cwd)
	if err != nil {
		e.Log.Error("cannot load the rules; asking the editor", "err", err)
		params, _ := readPermissionParams(c.Params)
		e.ask(c, params, &rules.Request{}, rec, start, "config error", err.Error(), nil)
		return
	}
	ev := Evaluate(Inputs{Params: c.Params, ToolCall: c.ToolCall, Session: c.Session, Policy: p, Mode: mode,
		Home: e.Home, Remembered: e.remembered(c.Session.ID), MCPHints: e.hints()})
	params, req := ev.params, ev.Request
	if !ev.Understood {
		e.ask(c, params, req, rec, start, ev.Source, ev.Reason, nil)
		return
	}
	describe(&rec, req)
	rec.ToolCallID, _ = jsonrpc.String(params.ToolCall, "toolCallId")
	fillVerdict(&rec, ev.Verdict)
	if ev.Decision == rules.Ask {
		e.ask(c, params, req, rec, start, ev.Source, ev.Reason, e.rememberer(c.Session, req, p.Remember))
		return
	}
	opt := ev.Option
	rec.Option, rec.OptionKd = opt.OptionID, opt.Kind
	if ev.Decision == rules.Allow && req.MCP != nil {
		e.approved.note(c.Session.ID, *req.MCP, mcpArguments(c, params), true)
	}
	if c.SelectOption(opt.OptionID) {
		rec.Latency = ms(time.Since(start))
		e.write(rec)
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

// rememberer returns what remembers an "always" answer to this request:
// narrow entries derived from it, kept for the session, the project or the
// user as the config says (default: the project). by names who answered. It
// returns the entry ids for the audit log, or why nothing was remembered.
//
// It runs once the answer has won and before it goes on to the agent, so the
// agent's next request already sees the entry; the store's lock and fsync
// take a few milliseconds at most.
func (e *Engine) rememberer(info session.Info, req *rules.Request, scope string) func(kind, by string) string {
	return func(kind, by string) string {
		decision := rules.Allow
		if kind == "reject_always" {
			decision = rules.Deny
		}
		entries, why := rules.Derive(req, decision)
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
				entries[i].Session = info.ID
			}
		}
		if scope == "session" {
			return e.rememberForSession(info.ID, entries)
		}
		saved, err := rules.StoreIn(e.StateDir).Add(entries...)
		if err != nil {
			e.Log.Error("cannot remember an always answer", "err", err)
			return "nothing: " + err.Error()
		}
		ids := make([]string, len(saved))
		for i, s := range saved {
			ids[i] = s.ID
		}
		e.Log.Info("remembered an always answer", "scope", scope, "entries", strings.Join(ids, ","))
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

// optionByID finds an offered option by its id.
func optionByID(options []option, id string) (option, bool) {
	for _, o := range options {
		if o.OptionID == id {
			return o, true
		}
	}
	return option{}, false
}

func decisionOf(kind string) string {
	if strings.HasPrefix(kind, "allow") {
		return string(rules.Allow)
	}
	return string(rules.Deny)
}

// fsWrite checks a write the agent asks the editor to make against deny
// rules and protected paths: defense in depth for agents that decide
// themselves whether to ask.
func (e *Engine) fsWrite(c *session.Call, start time.Time) {
	params, err := readWriteParams(c.Params)
	if err != nil {
		e.refuseUnreadable(c, start, err)
		return
	}
	if params.Path == "" {
		c.Forward(nil) // the editor will refuse a malformed request itself
		return
	}
	input, _ := json.Marshal(map[string]string{"file_path": params.Path})
	e.defend(c, start, map[string]json.RawMessage{"kind": json.RawMessage(`"edit"`), "rawInput": input})
}

// terminal checks a terminal the agent asks the editor to start.
func (e *Engine) terminal(c *session.Call, start time.Time) {
	params, err := readTerminalParams(c.Params)
	if err != nil {
		e.refuseUnreadable(c, start, err)
		return
	}
	if params.Command == "" {
		c.Forward(nil)
		return
	}
	var input map[string]any
	if len(params.Args) == 0 && strings.ContainsAny(params.Command, " \t\n;&|<>$`'\"") {
		// A whole command line in "command": an editor may run it through a
		// shell, so it is read as one.
		input = map[string]any{"command": params.Command}
	} else {
		input = map[string]any{"command": append([]string{params.Command}, params.Args...)}
	}
	if params.Cwd != "" {
		input["cwd"] = params.Cwd
	}
	raw, _ := json.Marshal(input)
	e.defend(c, start, map[string]json.RawMessage{"kind": json.RawMessage(`"execute"`), "rawInput": raw})
}

// refuseUnreadable refuses a write or terminal whose params the broker
// cannot read exactly: the editor might read them otherwise, so they are
// never forwarded.
func (e *Engine) refuseUnreadable(c *session.Call, start time.Time, err error) {
	rec := Record{Session: c.Session.ID, Method: c.Method, Decision: string(rules.Deny), Source: "not understood", Reason: "the request's params: " + err.Error()}
	c.RespondError(jsonrpc.CodeInvalidParams, "acp-broker cannot read this request's params exactly ("+err.Error()+"), so it is refused")
	rec.Latency = ms(time.Since(start))
	e.write(rec)
}

// defend refuses a request that a deny rule or a protected path forbids,
// and forwards everything else: the editor performs it as before.
func (e *Engine) defend(c *session.Call, start time.Time, fields map[string]json.RawMessage) {
	rec := Record{Session: c.Session.ID, Method: c.Method}
	p, mode, err := e.policy(c.Session.Cwd)
	if err != nil {
		e.Log.Error("cannot load the rules; refusing", "method", c.Method, "err", err)
		rec.Decision, rec.Source, rec.Reason = string(rules.Deny), "config error", err.Error()
		c.RespondError(jsonrpc.CodeServerError, "acp-broker: the rules cannot be loaded, so this is refused: "+err.Error())
		rec.Latency = ms(time.Since(start))
		e.write(rec)
		return
	}
	req := rules.ReadToolCall(fields, e.context(c.Session, mode))
	describe(&rec, req)
	v := p.Decide(req)
	reason, protected := p.Protected(req)
	switch {
	case v.Decision == rules.Deny:
		fillVerdict(&rec, v)
		msg := "acp-broker denied this: rule " + ruleName(v.Rule)
		if v.Reason != "" {
			msg += ": " + v.Reason
		}
		c.RespondError(jsonrpc.CodeServerError, msg)
	case protected:
		rec.Decision, rec.Source, rec.Reason = string(rules.Deny), "protected", reason
		c.RespondError(jsonrpc.CodeServerError, "acp-broker denied this: "+reason)
	default:
		rec.Decision, rec.Source = "forwarded", "no deny rule"
		c.Forward(nil)
	}
	rec.Latency = ms(time.Since(start))
	e.write(rec)
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

func (e *Engine) write(r Record) {
	r.Time = time.Now().UTC()
	r.Agent = e.Agent
	if err := e.Audit.Write(r); err != nil {
		e.Log.Error("cannot write the audit log", "err", err)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
