package session

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
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
	// A question the agent asks the human: only a human answers it, and
	// the Policy routes it as it routes a permission request.
	"elicitation/create": true,
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
	cancel context.CancelCauseFunc

	mu    sync.Mutex
	state callState
	// onAnswer sees the editor's answer; an optionId it returns is what
	// the agent is answered with instead (see ForwardAnswering).
	onAnswer func(answer *jsonrpc.Message) (optionID string)
	// editorID is the id the editor was sent the request with: the agent's
	// own, or one of the broker's when the agent's id is still shadowed by
	// a withdrawn prompt of the same id (see Forward).
	editorID json.RawMessage

	sessionCancelled     chan struct{}
	sessionCancelledOnce sync.Once

	// elicitationID is, for a URL-mode elicitation/create, the
	// elicitation's id, which elicitation/complete names; completed is
	// closed when the agent sends that (nil for a call without one).
	elicitationID string
	completed     chan struct{}
	completedOnce sync.Once
}

// ElicitationCompleted is closed when the agent sends elicitation/complete
// naming the call's elicitation (a URL-mode elicitation/create): the
// out-of-band step it asked for is done, and a prompt still showing it is
// stale. The call is not answered by it; the notification is relayed to the
// editor as sent. For a call no elicitation/complete can name it is nil, a
// channel that is never ready.
func (c *Call) ElicitationCompleted() <-chan struct{} { return c.completed }

// SessionCancelled is closed when the editor cancels the call's session
// with session/cancel. The broker has then already answered a permission
// request cancelled, and a question with the cancel action, whoever else
// was asked: the call's Context ends (its
// cause is ErrSessionCancelled) before the editor's next message is read,
// so no answer from anywhere else can reach the agent after the cancel.
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

// ErrSessionCancelled is the cause of a call's Context when the editor
// cancelled its session.
var ErrSessionCancelled = errors.New("withdrawn: the turn was cancelled")

// mayBeOf reports whether the call may be of the session to a peer: its
// session, or one its params name in another member a peer may take for
// sessionId (repeated, in another letter case). Such a request is never
// decided automatically, but the session's cancel must reach it.
func (c *Call) mayBeOf(sessionID string) bool {
	if c.Session.ID == sessionID {
		return true
	}
	names := jsonrpc.Namesakes(c.Params, "sessionId")
	if names == nil {
		return false
	}
	for _, n := range names[0] {
		if id, ok := jsonrpc.Unquote(n.Value); ok && id == sessionID {
			return true
		}
	}
	return false
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
//
// One exception: when the agent reuses the id of a prompt the broker
// withdrew and the editor has not answered yet, the editor's answer to the
// old prompt could be taken for an answer to the new request. The request
// then goes to the editor as one of the broker's own, with a fresh id, and
// the answer to that id goes to the agent under the agent's id.
func (c *Call) Forward(onAnswer func(answer *jsonrpc.Message)) bool {
	if onAnswer == nil {
		return c.ForwardAnswering(nil)
	}
	return c.ForwardAnswering(func(m *jsonrpc.Message) string { onAnswer(m); return "" })
}

// ForwardAnswering is Forward for a session/request_permission whose
// answer the broker may change: when onAnswer returns an optionId, the
// agent is answered with that option selected in place of the editor's
// answer (an "always" the human chose, which the broker remembers itself,
// goes to the agent as the request's once-option).
func (c *Call) ForwardAnswering(onAnswer func(answer *jsonrpc.Message) (optionID string)) bool {
	b := c.b
	b.mu.Lock()
	c.mu.Lock()
	if c.state != held {
		c.mu.Unlock()
		b.mu.Unlock()
		return false
	}
	c.state = forwarded
	c.onAnswer = onAnswer
	frame, dir, note := c.raw, "agent->editor", ""
	key := jsonrpc.IDKey(c.ID)
	if awaiting, shadowed := b.shadows[key]; shadowed && awaiting {
		c.editorID = jsonrpc.Quote(b.ownIDLocked())
		b.aliases[jsonrpc.IDKey(c.editorID)] = c
		frame, dir = withID(c.raw, c.editorID), "broker->editor"
		note = "forwarded as " + string(c.editorID) + ": the editor may still answer a withdrawn prompt with id " + string(c.ID)
	} else {
		// The editor answered the old prompt already: nothing late can
		// come, and the id is the agent's again.
		b.unshadowLocked(key)
		c.editorID = c.ID
	}
	c.mu.Unlock()
	b.mu.Unlock()
	if note != "" {
		b.log.Info("the agent reused the id of a withdrawn prompt; the editor gets it under a fresh id", "id", string(c.ID), "as", string(c.editorID))
		b.trace.record("agent->broker", c.raw, note)
	}
	b.toEditor(dir, frame)
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

// RespondAs is Respond for one of several answerers racing, with a won
// hook as SelectOptionAs.
func (c *Call) RespondAs(result any, won func()) bool { return c.respond(result, won) }

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

// elicitationAction is an elicitation/create result without content.
type elicitationAction struct {
	Action string `json:"action"`
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
	prev, ok := c.b.settle(c)
	if !ok {
		return false
	}
	if won != nil {
		won()
	}
	c.deliver(frame, prev)
	return true
}

// deliver sends the agent the answer of a call the broker settled, and
// withdraws the editor's prompt if it had one.
func (c *Call) deliver(frame []byte, prev callState) {
	c.cancel(nil)
	c.b.toAgent("broker->agent", frame)
	if prev == forwarded {
		c.b.cancelEditorRequest(c.editorID)
	}
}

// editorAnswered takes the editor's response to a forwarded call, which
// editorResponse has already settled.
func (c *Call) editorAnswered(m *jsonrpc.Message) {
	c.mu.Lock()
	onAnswer := c.onAnswer
	c.mu.Unlock()
	// onAnswer runs before the context ends, so whoever waits on the
	// context has seen the answer.
	replaced := ""
	if onAnswer != nil {
		replaced = onAnswer(m)
	}
	c.cancel(nil)
	if replaced != "" {
		c.b.trace.record("editor->broker", m.Raw, "the agent is answered with the option "+strconv.Quote(replaced)+" in its place")
		frame, err := jsonrpc.NewResult(c.ID, permissionOutcome{Outcome: outcome{Outcome: "selected", OptionID: replaced}})
		if err != nil {
			// Never the editor's answer in its place: it is the one the
			// broker meant not to send.
			c.b.log.Error("cannot encode the broker's answer; the agent is answered with an error", "method", c.Method, "err", err)
			frame = jsonrpc.NewError(c.ID, jsonrpc.CodeInternalError, "the broker could not encode its answer")
		}
		c.b.toAgent("broker->agent", frame)
		return
	}
	frame := m.Raw
	if jsonrpc.IDKey(c.editorID) != jsonrpc.IDKey(c.ID) {
		frame = withID(m.Raw, c.ID)
	}
	c.b.toAgent("editor->agent", frame)
}

// isForwarded reports whether the editor was asked and has not answered.
func (c *Call) isForwarded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state == forwarded
}

// withID returns a copy of a message with its id replaced.
func withID(frame []byte, id json.RawMessage) []byte {
	span, ok := jsonrpc.FieldSpan(frame, "id")
	if !ok {
		panic("session: a parsed message has no id")
	}
	return jsonrpc.Splice(frame, map[jsonrpc.Span][]byte{span: id})
}
