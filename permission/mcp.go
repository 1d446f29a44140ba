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
	if e.approved.take(c.Session, *req.MCP, c.Arguments) {
		rec.Decision, rec.Source = string(rules.Allow), "asked in ACP"
		rec.Reason = "the agent asked for this call with session/request_permission and it was allowed"
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

// Ask asks the human in the editor about a call the agent did not ask
// about, with a session/request_permission of the broker's own: the editor
// answers the broker, and the agent never sees the exchange.
func (e *Engine) Ask(ctx context.Context, c mcp.Call) mcp.Verdict {
	start := time.Now()
	req, v, p, info, rec, err := e.judgeMCP(c)
	if err != nil {
		return e.Decide(c) // the same failure, refused and recorded there
	}
	rec.Decision, rec.Source, rec.Asked = string(rules.Ask), "editor", v.Source
	refuse := func(source, why string) mcp.Verdict {
		rec.Decision, rec.Source, rec.Reason = string(rules.Deny), source, why
		e.writeMCP(rec, start)
		return mcp.Verdict{Decision: mcp.Deny, Message: fmt.Sprintf("acp-broker refused the MCP call %s: %s", req.MCP.String(), why)}
	}
	ed := e.editorHandle()
	if ed == nil || c.Session == "" {
		return refuse("not asked", "nobody can be asked: the server's session is not known to the broker")
	}
	if e.Asker != nil && e.Asker.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.Asker.Timeout)
		defer cancel()
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
	announce := map[string]any{"sessionUpdate": "tool_call"}
	for k, val := range toolCall {
		announce[k] = val
	}
	if err := ed.Notify("session/update", map[string]any{"sessionId": c.Session, "update": announce}); err != nil {
		return refuse("not asked", "the editor cannot be reached: "+err.Error())
	}
	options := []option{
		{OptionID: "allow_once", Name: "Allow", Kind: "allow_once"},
		{OptionID: "allow_always", Name: "Always allow", Kind: "allow_always"},
		{OptionID: "reject_once", Name: "Reject", Kind: "reject_once"},
	}
	answer, err := ed.Request(ctx, "session/request_permission", map[string]any{"sessionId": c.Session, "toolCall": toolCall, "options": options})
	if err != nil {
		why := "no answer: " + err.Error()
		source := "editor"
		switch {
		case ctx.Err() == context.DeadlineExceeded:
			why, source = fmt.Sprintf("nobody answered within %v", e.Asker.Timeout), "timeout"
		case ctx.Err() != nil:
			why, source = "the agent cancelled the call", "cancel"
		}
		update("failed", "acp-broker: "+why)
		return refuse(source, why)
	}
	var res struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	if answer.Error != nil || json.Unmarshal(answer.Result, &res) != nil || res.Outcome.Outcome != "selected" {
		update("failed", "acp-broker: not allowed")
		return refuse("editor", "the editor did not allow it")
	}
	opt, ok := optionByID(options, res.Outcome.OptionID)
	if !ok {
		update("failed", "acp-broker: not allowed")
		return refuse("editor", fmt.Sprintf("the editor chose %q, which was not offered", res.Outcome.OptionID))
	}
	rec.Decision, rec.Option, rec.OptionKd = decisionOf(opt.Kind), opt.OptionID, opt.Kind
	if opt.Kind == "allow_always" {
		rec.Remembered = e.rememberer(info, req, p.Remember)(opt.Kind, "editor")
	}
	e.writeMCP(rec, start)
	if rec.Decision != string(rules.Allow) {
		update("failed", "acp-broker: rejected in the editor")
		return mcp.Verdict{Decision: mcp.Deny, Message: fmt.Sprintf("the user rejected the MCP call %s", req.MCP.String())}
	}
	update("completed", "acp-broker: allowed; the call went to the server")
	return mcp.Verdict{Decision: mcp.Allow}
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

// approvals are the ACP permission requests for MCP tools that were
// allowed, each covering one tools/call of the same tool (and, when the
// request showed them, the same arguments) that follows it.
type approvals struct {
	mu   sync.Mutex
	list []approval
}

type approval struct {
	session string
	tool    rules.MCPTool
	args    json.RawMessage // canonical; nil when the request did not show them
	at      time.Time
}

func (a *approvals) note(sessionID string, tool rules.MCPTool, args json.RawMessage) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expire()
	a.list = append(a.list, approval{session: sessionID, tool: tool, args: canonicalJSON(args), at: time.Now()})
}

// take consumes the oldest approval that covers a call. A call whose session
// the broker does not know yet matches approvals of any session.
func (a *approvals) take(sessionID string, tool rules.MCPTool, args json.RawMessage) bool {
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
		return true
	}
	return false
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
