package session

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/acp-broker/acp-broker/jsonrpc"
)

// Policy is the interception seam: the one place where something other than
// the editor may answer an agent's request.
//
// The broker calls Intercept for every request from the agent whose method is
// in InterceptedMethods, on the goroutine that reads the agent, in the order
// the agent sent them. Intercept must return promptly. It settles the call by
// calling exactly one of Forward, Respond, RespondError or SelectOption, then
// or later from any goroutine; a decision that waits for a human continues in
// its own goroutine and watches Call.Context to learn that the call ended
// without it. A call the policy never settles stays unanswered until the
// agent or the editor cancels it or the broker stops.
type Policy interface {
	Intercept(c *Call)
}

// InterceptedMethods are the agent requests that go through the Policy.
// Every other message is relayed without one.
var InterceptedMethods = map[string]bool{
	"session/request_permission": true,
	"fs/write_text_file":         true,
	"terminal/create":            true,
}

type callState uint8

const (
	held      callState = iota // only the broker has the request
	forwarded                  // the editor has it too and may answer
	answered                   // the agent has had its one answer
)

// Call is one intercepted request from the agent, held by the broker until
// it is answered exactly once.
type Call struct {
	// Method, ID and Params are the agent's request; ID is answered as sent.
	Method string
	ID     json.RawMessage
	Params json.RawMessage
	// Session is what the broker knows of the request's session; zero when
	// the request names none.
	Session Info
	// ToolCall is, for session/request_permission, the merged view of the
	// tool call it asks about: what earlier session/update notifications said
	// of it, overlaid with the request's own toolCall. Nil for other methods
	// or when the request carries no toolCallId.
	ToolCall *ToolCall

	raw    []byte
	b      *broker
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	state    callState
	onAnswer func(answer *jsonrpc.Message)

	sessionCancelled     chan struct{}
	sessionCancelledOnce sync.Once
}

// SessionCancelled is closed when the editor cancels the call's session
// with session/cancel. A call only the broker holds is then answered
// cancelled at once; a call the editor was sent is the editor's to answer,
// but a policy that also asked elsewhere withdraws those prompts and may
// answer it cancelled itself.
func (c *Call) SessionCancelled() <-chan struct{} { return c.sessionCancelled }

// CurrentToolCall is the merged view of the call's tool call now: later
// tool_call_update notifications may have changed it since the call arrived
// (ToolCall is the view then). Nil when the call has no tool call or the
// tool call is no longer tracked (it ended, or was dropped).
func (c *Call) CurrentToolCall() *ToolCall {
	if c.ToolCall == nil || c.b == nil {
		return nil
	}
	return c.b.tracker.toolCall(c.Session.ID, c.ToolCall.ID)
}

// SessionID is the id of the call's session, "" when it names none.
func (c *Call) SessionID() string { return c.Session.ID }

// Context is cancelled when the call has been answered, whoever answered it,
// or can no longer be (the agent cancelled it, or the broker is stopping).
func (c *Call) Context() context.Context { return c.ctx }

// Raw returns the request exactly as the agent sent it.
func (c *Call) Raw() []byte { return c.raw }

// Forward sends the request, unchanged, to the editor. The editor's answer
// then goes to the agent, unchanged, unless the call was answered first;
// onAnswer, if not nil, sees it just before. Forward reports false if the
// call was already forwarded or answered.
func (c *Call) Forward(onAnswer func(answer *jsonrpc.Message)) bool {
	c.mu.Lock()
	if c.state != held {
		c.mu.Unlock()
		return false
	}
	c.state = forwarded
	c.onAnswer = onAnswer
	c.mu.Unlock()
	c.b.toEditor("agent->editor", c.raw)
	return true
}

// Respond answers the agent with a result. If the editor was also asked, its
// prompt is withdrawn with $/cancel_request and its late answer discarded.
// Respond reports false if the call was already answered.
func (c *Call) Respond(result any) bool { return c.respond(result, nil) }

func (c *Call) respond(result any, won func()) bool {
	frame, err := jsonrpc.NewResult(c.ID, result)
	if err != nil {
		c.b.log.Error("cannot encode the broker's answer; the request stays open", "method", c.Method, "err", err)
		return false
	}
	return c.answer(frame, won)
}

// RespondError answers the agent with a JSON-RPC error.
func (c *Call) RespondError(code int64, message string) bool {
	return c.answer(jsonrpc.NewError(c.ID, code, message), nil)
}

// SelectOption answers a session/request_permission with the option whose
// optionId is given.
func (c *Call) SelectOption(optionID string) bool { return c.SelectOptionAs(optionID, nil) }

// SelectOptionAs is SelectOption for one of several answerers racing: won,
// if not nil, runs only if this answer is the one, before it is sent to the
// agent and before Context ends, so whatever the answer should change (an
// audit line, a remembered decision) is in place when anyone learns of it.
func (c *Call) SelectOptionAs(optionID string, won func()) bool {
	return c.respond(permissionOutcome{Outcome: outcome{Outcome: "selected", OptionID: optionID}}, won)
}

// RespondCancelled answers a session/request_permission with the cancelled
// outcome, as ACP requires once the prompt turn was cancelled.
func (c *Call) RespondCancelled() bool { return c.RespondCancelledAs(nil) }

// RespondCancelledAs is RespondCancelled with a won hook, as SelectOptionAs.
func (c *Call) RespondCancelledAs(won func()) bool {
	return c.respond(permissionOutcome{Outcome: outcome{Outcome: "cancelled"}}, won)
}

type permissionOutcome struct {
	Outcome outcome `json:"outcome"`
}

type outcome struct {
	Outcome  string `json:"outcome"`
	OptionID string `json:"optionId,omitempty"`
}

// RequestEditor sends a request of the broker's own to the editor and waits
// for its response, which is never forwarded to the agent. Its id is in the
// broker's namespace, so it cannot collide with either peer's.
func (c *Call) RequestEditor(ctx context.Context, method string, params any) (*jsonrpc.Message, error) {
	return c.b.requestEditor(ctx, method, params)
}

func (c *Call) answer(frame []byte, won func()) bool {
	c.mu.Lock()
	prev := c.state
	if prev == answered {
		c.mu.Unlock()
		return false
	}
	c.state = answered
	c.mu.Unlock()
	if won != nil {
		won()
	}
	c.b.endCall(c)
	c.b.toAgent("broker->agent", frame)
	if prev == forwarded {
		c.b.withdrawFromEditor(c.ID)
	}
	return true
}

// editorAnswered takes the editor's response to a forwarded call.
func (c *Call) editorAnswered(m *jsonrpc.Message) {
	c.mu.Lock()
	if c.state != forwarded {
		c.mu.Unlock()
		c.b.log.Info("discarded the editor's late answer: the request was already answered", "method", c.Method, "id", string(c.ID))
		return
	}
	c.state = answered
	onAnswer := c.onAnswer
	c.mu.Unlock()
	// onAnswer runs before the context ends, so whoever waits on the
	// context has seen the answer.
	if onAnswer != nil {
		onAnswer(m)
	}
	c.b.endCall(c)
	c.b.toAgent("editor->agent", m.Raw)
}

// isForwarded reports whether the editor was asked and has not answered.
func (c *Call) isForwarded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state == forwarded
}
