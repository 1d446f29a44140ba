package permission

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acp-broker/acp-broker/jsonrpc"
	"github.com/acp-broker/acp-broker/rules"
	"github.com/acp-broker/acp-broker/session"
)

// ownPrompt is something the agent does without having asked for it (an
// MCP call, a terminal, a write) that the broker itself puts to a human.
type ownPrompt struct {
	session string
	// what names it in the tool call's id: acp-broker-<what>-N.
	what      string
	title     string
	kind      string // the ACP tool kind shown
	rawInput  json.RawMessage
	locations []string // paths it touches, shown as the tool call's locations
}

var ownPromptID atomic.Uint64

// askOwn asks a human about o as the [ask] route says: the editor is shown
// it as a tool call of the broker's own (session/update tool_call) and asked
// with a session/request_permission of the broker's own (id acp-broker-N;
// the editor answers the broker, and the agent never sees the exchange), the
// channels are asked, or both; the first answer wins, through ask. It
// returns once answered, or once ctx ends, whether the answer allows it, and
// closeView, which ends the editor's view of the tool call with a status and
// a line of text.
func (e *Engine) askOwn(ctx context.Context, ed *session.Editor, o ownPrompt, req *rules.Request, rec Record, start time.Time, source, reason string, remember rememberFunc) (allowed bool, closeView func(status, text string)) {
	toolCallID := fmt.Sprintf("acp-broker-%s-%d", o.what, ownPromptID.Add(1))
	rec.ToolCallID = toolCallID
	toolCall := map[string]any{
		"toolCallId": toolCallID,
		"title":      o.title,
		"kind":       o.kind,
		"status":     "pending",
		"rawInput":   o.rawInput,
	}
	if len(o.locations) > 0 {
		var locs []map[string]string
		for _, p := range o.locations {
			locs = append(locs, map[string]string{"path": p})
		}
		toolCall["locations"] = locs
	}
	closeView = func(status, text string) {
		u := map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": toolCallID, "status": status,
			"content": []any{map[string]any{"type": "content", "content": map[string]string{"type": "text", "text": text}}}}
		if err := ed.Notify("session/update", map[string]any{"sessionId": o.session, "update": u}); err != nil {
			e.Log.Warn("cannot update the editor's view of a request the broker held", "err", err)
		}
	}
	// The editor shows the held request in the thread, as it shows the
	// agent's tool calls.
	announce := map[string]any{"sessionUpdate": "tool_call"}
	for k, val := range toolCall {
		announce[k] = val
	}
	if err := ed.Notify("session/update", map[string]any{"sessionId": o.session, "update": announce}); err != nil {
		e.Log.Warn("cannot show a request the broker held in the editor", "err", err)
	}
	options := []option{
		{OptionID: "allow_once", Name: "Allow", Kind: "allow_once"},
		{OptionID: "allow_always", Name: "Always allow: " + alwaysCovers(req, option{OptionID: "allow_always", Kind: "allow_always"}), Kind: "allow_always"},
		{OptionID: "reject_once", Name: "Reject", Kind: "reject_once"},
	}
	params := map[string]any{"sessionId": o.session, "toolCall": toolCall, "options": options}
	raw, _ := json.Marshal(params)
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := &heldPrompt{ctx: hctx, cancel: cancel, ed: ed, session: o.session, params: params, raw: raw, cancelled: ed.Cancelled(o.session)}
	e.ask(h, permissionParams{SessionID: o.session, ToolCall: raw, Options: options}, req, rec, start, source, reason, remember)
	<-hctx.Done()
	// The editor's prompt, if it had one, is withdrawn before the held
	// request is shown as ended.
	h.wait()
	chosen, ok := optionByID(options, h.chosen())
	return ok && decisionOf(chosen.Kind) == string(rules.Allow), closeView
}

// heldPrompt is what the broker asks a human about on its own (askOwn). It is
// put to the editor as the broker's own request, and answered once.
type heldPrompt struct {
	ctx     context.Context
	cancel  context.CancelFunc
	ed      *session.Editor
	session string
	params  map[string]any
	raw     []byte
	// cancelled is closed when the editor cancels the session's turn:
	// from then on only "cancelled" can answer the request.
	cancelled <-chan struct{}

	mu        sync.Mutex
	forwarded bool
	answered  bool
	option    string // the option chosen; "" for none
	// asking is done when the request to the editor, if any, has ended.
	asking sync.WaitGroup
}

func (h *heldPrompt) wait() { h.asking.Wait() }

func (h *heldPrompt) Context() context.Context          { return h.ctx }
func (h *heldPrompt) SessionCancelled() <-chan struct{} { return h.cancelled }
func (h *heldPrompt) SessionID() string                 { return h.session }
func (h *heldPrompt) Raw() []byte                       { return h.raw }

func (h *heldPrompt) chosen() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.option
}

// ForwardAnswering sends the broker's own permission request to the
// editor. The request is withdrawn from the editor if someone else answers
// first. No agent is answered, so what onAnswer returns is not used.
func (h *heldPrompt) ForwardAnswering(onAnswer func(*jsonrpc.Message) string) bool {
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

func (h *heldPrompt) SelectOptionAs(optionID string, won func()) bool {
	return h.answer(optionID, won)
}

func (h *heldPrompt) RespondCancelledAs(won func()) bool { return h.answer("", won) }

// answer takes the first answer; won runs before anyone learns of it.
func (h *heldPrompt) answer(option string, won func()) bool {
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
