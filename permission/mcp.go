package permission

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acp-broker/acp-broker/jsonrpc"
	"github.com/acp-broker/acp-broker/mcp"
	"github.com/acp-broker/acp-broker/rules"
	"github.com/acp-broker/acp-broker/session"
)

// The Engine is the Governor of the MCP proxies: it decides their calls with
// the same rules as the agent's permission requests.
var _ mcp.Governor = (*Engine)(nil)

// approvalTTL is how long an allowed ACP permission request for an MCP tool
// covers the tools/call that follows it.
const approvalTTL = 5 * time.Minute

// Started takes the handle for the broker's own messages to the editor.
func (e *Engine) Started(ed *session.Editor) {
	e.mu.Lock()
	e.editor = ed
	e.mu.Unlock()
}

func (e *Engine) editorHandle() *session.Editor {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.editor
}

// judgeMCP reads a held call and decides it from the rules alone.
func (e *Engine) judgeMCP(c mcp.Call) (*rules.Request, rules.Verdict, *rules.Policy, session.Info, Record, error) {
	rec := Record{Session: c.Session, Method: "tools/call"}
	info := session.Info{ID: c.Session, Cwd: c.Cwd}
	if ed := e.editorHandle(); ed != nil && c.Session != "" {
		if known := ed.Session(c.Session); known.Cwd != "" {
			info = known
		}
	}
	p, mode, err := e.policy(info.Cwd)
	if err != nil {
		return nil, rules.Verdict{}, nil, info, rec, err
	}
	req := rules.ReadMCPCall(c.Server, c.Tool, c.Arguments, e.context(info, mode))
	describe(&rec, req)
	v := rules.ApplyMode(p.Decide(req), req, mode)
	fillVerdict(&rec, v)
	return req, v, p, info, rec, nil
}

// Decide decides a held tools/call at once: a rule's allow or deny, an
// allowed ACP request for the same call, or else Ask.
func (e *Engine) Decide(c mcp.Call) mcp.Verdict {
	start := time.Now()
	req, v, _, _, rec, err := e.judgeMCP(c)
	if err != nil {
		e.Log.Error("cannot load the rules; refusing an MCP call", "err", err)
		rec.MCP = c.Server + "/" + c.Tool
		rec.Decision, rec.Source, rec.Reason = string(rules.Deny), "config error", err.Error()
		e.writeMCP(rec, start)
		return mcp.Verdict{Decision: mcp.Deny, Message: "acp-broker refused this call: the rules cannot be loaded: " + err.Error()}
	}
	switch v.Decision {
	case rules.Allow:
		e.writeMCP(rec, start)
		return mcp.Verdict{Decision: mcp.Allow}
	case rules.Deny:
		e.writeMCP(rec, start)
		return mcp.Verdict{Decision: mcp.Deny, Message: denial(req, v)}
	}
	if found, allowed := e.approved.take(c.Session, *req.MCP, c.Arguments); found {
		rec.Source = "asked in ACP"
		if !allowed {
			// The human said no a moment ago: not asked again.
			rec.Decision, rec.Reason = string(rules.Deny), "the agent asked for this call with session/request_permission and it was rejected"
			e.writeMCP(rec, start)
			return mcp.Verdict{Decision: mcp.Deny, Message: fmt.Sprintf("acp-broker refused the MCP call %s: it was rejected when the agent asked for it", req.MCP.String())}
		}
		rec.Decision, rec.Reason = string(rules.Allow), "the agent asked for this call with session/request_permission and it was allowed"
		e.writeMCP(rec, start)
		return mcp.Verdict{Decision: mcp.Allow}
	}
	return mcp.Verdict{Decision: mcp.Ask}
}

func denial(req *rules.Request, v rules.Verdict) string {
	msg := fmt.Sprintf("acp-broker denied the MCP call %s", req.MCP.String())
	if v.Rule != nil {
		msg += ": rule " + ruleName(v.Rule)
	} else if v.Source != "" {
		msg += " (" + v.Source + ")"
	}
	if v.Reason != "" {
		msg += ": " + v.Reason
	}
	return msg
}

var mcpPromptID atomic.Uint64

// Ask asks a human about a call the agent did not ask about, as the [ask]
// route says: in the editor with a session/request_permission of the
// broker's own (the editor answers the broker, and the agent never sees the
// exchange), on the channels, or both; the first answer wins.
func (e *Engine) Ask(ctx context.Context, c mcp.Call) mcp.Verdict {
	start := time.Now()
	req, v, p, info, rec, err := e.judgeMCP(c)
	if err != nil {
		return e.Decide(c) // the same failure, refused and recorded there
	}
	ed := e.editorHandle()
	if ed == nil || c.Session == "" {
		rec.Decision, rec.Source, rec.Reason = string(rules.Deny), "not asked", "nobody can be asked: the server's session is not known to the broker"
		e.writeMCP(rec, start)
		return mcp.Verdict{Decision: mcp.Deny, Message: fmt.Sprintf("acp-broker refused the MCP call %s: %s", req.MCP.String(), rec.Reason)}
	}
	toolCallID := fmt.Sprintf("acp-broker-mcp-%d", mcpPromptID.Add(1))
	rec.ToolCallID = toolCallID
	args := c.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	toolCall := map[string]any{
		"toolCallId": toolCallID,
		"title":      fmt.Sprintf("MCP %s (held by acp-broker: %s)", req.MCP.String(), v.Reason),
		"kind":       "other",
		"status":     "pending",
		"rawInput":   args,
	}
	update := func(status, text string) {
		u := map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": toolCallID, "status": status,
			"content": []any{map[string]any{"type": "content", "content": map[string]string{"type": "text", "text": text}}}}
		if err := ed.Notify("session/update", map[string]any{"sessionId": c.Session, "update": u}); err != nil {
			e.Log.Warn("cannot update the editor's view of a held MCP call", "err", err)
		}
	}
	// The editor shows the held call in the thread, as it shows the agent's.
	announce := map[string]any{"sessionUpdate": "tool_call"}
	for k, val := range toolCall {
		announce[k] = val
	}
	if err := ed.Notify("session/update", map[string]any{"sessionId": c.Session, "update": announce}); err != nil {
		e.Log.Warn("cannot show a held MCP call in the editor", "err", err)
	}
	options := []option{
		{OptionID: "allow_once", Name: "Allow", Kind: "allow_once"},
		{OptionID: "allow_always", Name: "Always allow", Kind: "allow_always"},
		{OptionID: "reject_once", Name: "Reject", Kind: "reject_once"},
	}
	params := map[string]any{"sessionId": c.Session, "toolCall": toolCall, "options": options}
	raw, _ := json.Marshal(params)
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := &heldMCPCall{ctx: hctx, cancel: cancel, ed: ed, session: c.Session, params: params, raw: raw, cancelled: ed.Cancelled(c.Session)}
	e.ask(h, permissionParams{SessionID: c.Session, ToolCall: raw, Options: options}, req, rec, start, v.Source, v.Reason, e.rememberer(info, req, p.Remember))
	<-hctx.Done()
	// The editor's prompt, if it had one, is withdrawn before the held call
	// is shown as ended.
	h.wait()
	chosen, ok := optionByID(options, h.chosen())
	switch {
	case ok && decisionOf(chosen.Kind) == string(rules.Allow):
		update("completed", "acp-broker: allowed; the call went to the server")
		return mcp.Verdict{Decision: mcp.Allow}
	case ctx.Err() != nil:
		update("failed", "acp-broker: the agent cancelled the call")
		return mcp.Verdict{Decision: mcp.Deny, Message: "the agent cancelled the call"}
	}
	update("failed", "acp-broker: not allowed")
	return mcp.Verdict{Decision: mcp.Deny, Message: fmt.Sprintf("acp-broker: the MCP call %s was not allowed (rejected, or nobody answered in time)", req.MCP.String())}
}

// heldMCPCall is an MCP call the broker asks a human about on its own. It is
// put to the editor as the broker's own request, and answered once.
type heldMCPCall struct {
	ctx     context.Context
	cancel  context.CancelFunc
	ed      *session.Editor
	session string
	params  map[string]any
	raw     []byte
	// cancelled is closed when the editor cancels the session's turn:
	// from then on only "cancelled" can answer the call.
	cancelled <-chan struct{}

	mu        sync.Mutex
	forwarded bool
	answered  bool
	option    string // the option chosen; "" for none
	// asking is done when the request to the editor, if any, has ended.
	asking sync.WaitGroup
}

func (h *heldMCPCall) wait() { h.asking.Wait() }

func (h *heldMCPCall) Context() context.Context          { return h.ctx }
func (h *heldMCPCall) SessionCancelled() <-chan struct{} { return h.cancelled }
func (h *heldMCPCall) SessionID() string                 { return h.session }
func (h *heldMCPCall) Raw() []byte                       { return h.raw }

func (h *heldMCPCall) chosen() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.option
}

// Forward sends the broker's own permission request to the editor. The
// request is withdrawn from the editor if someone else answers first.
func (h *heldMCPCall) Forward(onAnswer func(*jsonrpc.Message)) bool {
	h.mu.Lock()
	if h.forwarded || h.answered {
		h.mu.Unlock()
		return false
	}
	h.forwarded = true
	h.asking.Add(1)
	h.mu.Unlock()
	go func() {
		defer h.asking.Done()
		m, err := h.ed.Request(h.ctx, "session/request_permission", h.params)
		if err != nil {
			if h.ctx.Err() == nil {
				h.answer("", nil) // the editor is gone: nobody allowed it
			}
			return
		}
		option := ""
		if outcome, optionID := readOutcome(m); outcome == "selected" {
			option = optionID
		}
		h.answer(option, func() { onAnswer(m) })
	}()
	return true
}

func (h *heldMCPCall) SelectOptionAs(optionID string, won func()) bool {
	return h.answer(optionID, won)
}

func (h *heldMCPCall) RespondCancelledAs(won func()) bool { return h.answer("", won) }

// answer takes the first answer; won runs before anyone learns of it.
func (h *heldMCPCall) answer(option string, won func()) bool {
	h.mu.Lock()
	if h.answered {
		h.mu.Unlock()
		return false
	}
	select {
	case <-h.cancelled:
		if option != "" {
			h.mu.Unlock()
			return false // the turn was cancelled: nothing but cancelled answers
		}
	default:
	}
	h.answered, h.option = true, option
	h.mu.Unlock()
	if won != nil {
		won()
	}
	h.cancel()
	return true
}

// Rewrote records a session set-up whose stdio MCP servers were proxied.
func (e *Engine) Rewrote(method, cwd string, proxied, unchanged []string) {
	if len(proxied) == 0 && len(unchanged) == 0 {
		return
	}
	rec := Record{Method: method, Decision: "rewritten", Source: "mcp proxy"}
	var parts []string
	if len(proxied) > 0 {
		parts = append(parts, "proxied: "+strings.Join(proxied, ", "))
	}
	if len(unchanged) > 0 {
		parts = append(parts, "unchanged: "+strings.Join(unchanged, ", "))
	}
	rec.Reason = strings.Join(parts, "; ")
	rec.Title = cwd
	e.write(rec)
}

// Listed records tools pinned for the first time and tools that no longer
// match their pins (which lose any relaxation the pins gave them).
func (e *Engine) Listed(sessionID string, changes []mcp.Change) {
	for _, ch := range changes {
		rec := Record{Session: sessionID, Method: "tools/list", MCP: ch.Server + "/" + ch.Tool, Source: "mcp proxy"}
		if ch.Stale {
			rec.Method, rec.MCP, rec.Decision = "notifications/tools/list_changed", ch.Server, "stale"
			rec.Reason = "the server said its tools changed: none is relaxed as read-only until it lists them again"
			e.write(rec)
			continue
		}
		if ch.Pinned {
			rec.Decision = "pinned"
			rec.Reason = "first seen; annotations pinned"
			if ch.ReadOnly {
				rec.Reason += " (read-only)"
			}
		} else {
			rec.Decision = "changed"
			rec.Reason = "differs from the pinned annotations: " + ch.Differs
			if ch.ReadOnly {
				rec.Reason += "; it is no longer relaxed as read-only until 'acp-broker mcp accept " + ch.Server + " " + ch.Tool + "'"
			}
			e.Log.Warn("an MCP tool changed since it was pinned", "server", ch.Server, "tool", ch.Tool, "change", ch.Differs)
		}
		e.write(rec)
	}
}

func (e *Engine) writeMCP(rec Record, start time.Time) {
	rec.Latency = ms(time.Since(start))
	e.write(rec)
}

// approvals are the answers to the agent's ACP permission requests for MCP
// tools, each covering one tools/call of the same tool (and, when the
// request showed them, the same arguments) that follows it: allowed, it goes
// on; rejected, it is refused without asking again.
type approvals struct {
	mu   sync.Mutex
	list []approval
}

type approval struct {
	session string
	tool    rules.MCPTool
	args    json.RawMessage // canonical; nil when the request did not show them
	allowed bool
	at      time.Time
}

func (a *approvals) note(sessionID string, tool rules.MCPTool, args json.RawMessage, allowed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expire()
	a.list = append(a.list, approval{session: sessionID, tool: tool, args: canonicalJSON(args), allowed: allowed, at: time.Now()})
}

// take consumes the oldest answer that covers a call, and says whether it
// allowed it. A call whose session the broker does not know yet matches
// answers of any session.
func (a *approvals) take(sessionID string, tool rules.MCPTool, args json.RawMessage) (found, allowed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expire()
	want := canonicalJSON(args)
	if want == nil {
		want = json.RawMessage("{}") // a call without arguments has none
	}
	for i, ap := range a.list {
		if ap.tool != tool || (sessionID != "" && ap.session != sessionID) {
			continue
		}
		if ap.args != nil && !bytes.Equal(ap.args, want) {
			continue
		}
		a.list = append(a.list[:i], a.list[i+1:]...)
		return true, ap.allowed
	}
	return false, false
}

func (a *approvals) expire() {
	cut := 0
	for cut < len(a.list) && time.Since(a.list[cut].at) > approvalTTL {
		cut++
	}
	a.list = a.list[cut:]
}

// mcpArguments finds the arguments an ACP permission request shows for an
// MCP call: Codex's rawInput.arguments, else Claude Code's rawInput.
func mcpArguments(c *session.Call, params permissionParams) json.RawMessage {
	var raw json.RawMessage
	if c.ToolCall != nil {
		raw = c.ToolCall.Fields["rawInput"]
	} else {
		raw, _ = jsonrpc.Field(params.ToolCall, "rawInput")
	}
	if len(raw) == 0 {
		return nil
	}
	if args, ok := jsonrpc.Field(raw, "arguments"); ok {
		if _, hasTool := jsonrpc.Field(raw, "tool"); hasTool {
			return args
		}
	}
	return raw
}

// canonicalJSON re-encodes a JSON value with sorted keys, so equal values
// compare equal; nil for nothing or invalid JSON.
func canonicalJSON(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	if m, ok := v.(map[string]any); ok && len(m) == 0 {
		return json.RawMessage("{}")
	}
	out, _ := json.Marshal(v)
	return out
}
