package permission

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/acp-broker/acp-broker/jsonrpc"
	"github.com/acp-broker/acp-broker/mcp"
	"github.com/acp-broker/acp-broker/notify"
	"github.com/acp-broker/acp-broker/rules"
	"github.com/acp-broker/acp-broker/session"
)

// The Engine is the Governor of the MCP proxies: it decides their calls with
// the same rules as the agent's permission requests.
var _ mcp.Governor = (*Engine)(nil)

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
	p, mode, err := e.policy(info)
	if err != nil {
		return nil, rules.Verdict{}, nil, info, rec, err
	}
	req := rules.ReadMCPCall(c.Server, c.Tool, c.Arguments, e.context(info, mode))
	describe(&rec, req)
	v := governed(p, rules.ApplyMode(p.Decide(req), req, mode), info)
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
		if e.writeMCP(rec, start) != nil {
			// An allow that leaves no trace is not the broker's to give.
			return mcp.Verdict{Decision: mcp.Ask}
		}
		return mcp.Verdict{Decision: mcp.Allow}
	case rules.Deny:
		e.writeMCP(rec, start)
		return mcp.Verdict{Decision: mcp.Deny, Message: denial(req, v)}
	}
	if found, allowed := e.approved.take(c.Session, mcpApproval(*req.MCP), c.Arguments); found {
		rec.Source = "asked in ACP"
		if !allowed {
			// The human said no a moment ago: not asked again.
			rec.Decision, rec.Reason = string(rules.Deny), "the agent asked for this call with session/request_permission and it was rejected"
			e.writeMCP(rec, start)
			return mcp.Verdict{Decision: mcp.Deny, Message: fmt.Sprintf("acp-broker refused the MCP call %s: it was rejected when the agent asked for it", req.MCP.String())}
		}
		rec.Decision, rec.Reason = string(rules.Allow), "the agent asked for this call with session/request_permission and it was allowed"
		if e.writeMCP(rec, start) != nil {
			return mcp.Verdict{Decision: mcp.Ask}
		}
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

// Ask asks a human about a call the agent did not ask about, with the
// broker's own prompt (askOwn); the first answer wins.
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
	args := c.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	o := ownPrompt{
		session:  c.Session,
		what:     "mcp",
		title:    notify.OneLine(fmt.Sprintf("MCP %s (held by acp-broker: %s)", req.MCP.String(), v.Reason)),
		kind:     "other",
		rawInput: args,
	}
	allowed, closeView := e.askOwn(ctx, ed, o, req, rec, start, v.Source, v.Reason, e.rememberer(info, req, p.Remember, nil))
	switch {
	case allowed:
		closeView("completed", "acp-broker: allowed; the call went to the server")
		return mcp.Verdict{Decision: mcp.Allow}
	case ctx.Err() != nil:
		closeView("failed", "acp-broker: the agent cancelled the call")
		return mcp.Verdict{Decision: mcp.Deny, Message: "the agent cancelled the call"}
	}
	closeView("failed", "acp-broker: not allowed")
	return mcp.Verdict{Decision: mcp.Deny, Message: fmt.Sprintf("acp-broker: the MCP call %s was not allowed (rejected, or nobody answered in time)", req.MCP.String())}
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

func (e *Engine) writeMCP(rec Record, start time.Time) error {
	rec.Latency = ms(time.Since(start))
	return e.write(rec)
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
