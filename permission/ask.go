package permission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acp-broker/acp-broker/jsonrpc"
	"github.com/acp-broker/acp-broker/notify"
	"github.com/acp-broker/acp-broker/rules"
	"github.com/acp-broker/acp-broker/session"
)

// Asker sends the requests the rules leave open to a human: to the editor,
// to the channels, or to both, and applies the first answer. Every other
// prompt is then withdrawn: the editor's with $/cancel_request, a channel's
// by ending its context, with the outcome as the cause.
type Asker struct {
	// Route is "editor", "channels" or "both".
	Route string
	// EscalateAfter, with route "editor", asks the channels too if the
	// editor has not answered by then.
	EscalateAfter time.Duration
	// Timeout rejects a request nobody answered by then.
	Timeout time.Duration
	// Tell says which of the broker's own answers the user is told of in
	// the session (rules.TellDenials, TellAll, TellOff; "" for the
	// default, TellDenials).
	Tell     string
	Channels []Channel
	// Local, if not nil, lists every open request for `acp-broker pending`
	// and takes answers from `acp-broker answer`, whatever the route.
	Local notify.Channel

	nextID atomic.Uint64
}

// Channel is a configured channel and how long it may wait.
type Channel struct {
	notify.Channel
	Timeout time.Duration
}

// asked is a request waiting for a human, as the routing sees it: an
// agent's permission request or question (*session.Call), or an MCP call,
// terminal or write the agent did not ask about, which the broker asks
// about on its own (*heldPrompt). It is answered once, by whoever answers
// first.
type asked interface {
	// Context ends once the request is answered or can no longer be.
	Context() context.Context
	// ForwardAnswering puts the request to the editor; onAnswer sees the
	// editor's answer if it is the first, and an optionId it returns is
	// what the agent is answered with instead. It reports false if already
	// forwarded or answered.
	ForwardAnswering(onAnswer func(answer *jsonrpc.Message) (optionID string)) bool
	// RespondCancelledAs answers as a cancelled turn does.
	RespondCancelledAs(won func()) bool
	SessionCancelled() <-chan struct{}
	SessionID() string
}

// held is a permission request waiting for a human (see asked).
type held interface {
	asked
	SelectOptionAs(optionID string, won func()) bool
	// Raw is the request as received, for the prompt's digest.
	Raw() []byte
}

// asking is one request put to a human as the route says. The machinery is
// the same for a permission request and a question: the editor, the
// channels, escalation, the local socket, the timeout and the turn's
// cancel, the first answer wins and every other prompt is withdrawn, one
// audit line. What an answer means is in the hooks.
type asking struct {
	c     asked
	a     *Asker
	rec   Record
	start time.Time
	// editor is false when the editor must not be asked (a question the
	// broker answers for an editor without forms): the channels are asked
	// at once whatever the route, and nothing falls back to the editor.
	editor bool
	// prompt is what the channels show; nil exactly when the Asker has
	// neither Local nor Channels.
	prompt *notify.Prompt
	// won completes the winning answer's record before its line is
	// written; nil for nothing to add.
	won func(r *Record, kind string)
	// fromEditor reads the editor's answer into r: the option kind chosen
	// ("" for none) and the optionId the agent is answered with in place
	// of the editor's answer ("" for the answer as sent).
	fromEditor func(r *Record, answer *jsonrpc.Message) (kind, replace string)
	// fromChannel reads a channel's answer into r, and returns what
	// answers the agent with it if it is the first (won runs only then,
	// before anyone learns of it), the option kind, and the decision the
	// withdrawn prompts are told. An error refuses the answer, saying why;
	// it is named in the audit line and the request stays open.
	fromChannel func(r *Record, ans notify.Answer) (answer func(won func()) bool, kind, decision string, err error)
	// timedOut withdraws the prompts of a request nobody answered within
	// the timeout, and answers it (r is its record so far, to be completed
	// and passed to win).
	timedOut func(withdraw context.CancelCauseFunc, r Record, win func(Record, string))
	// completed, if not nil, is closed when the request no longer needs
	// the channels (a URL-mode question the agent completed): their
	// prompts are withdrawn, and onCompleted answers the request if the
	// editor was not asked.
	completed   <-chan struct{}
	onCompleted func(r Record, win func(Record, string))
	// gaveUp, with the editor not to be asked, answers the request once
	// every channel gave up without an answer: no human is left to ask
	// but whoever looks at the local socket.
	gaveUp func(withdraw context.CancelCauseFunc, r Record, win func(Record, string))
}

// ask puts a permission request to the human as the route says, and writes
// its one audit line when it is answered (or ends unanswered).
func (e *Engine) ask(c held, params permissionParams, req *rules.Request, rec Record, start time.Time, source, reason string, remember rememberFunc) {
	a := e.Asker
	if a == nil || len(params.Options) == 0 {
		// With no options to choose from, only the editor can answer.
		a = &Asker{Route: "editor"}
	}
	rec.Decision, rec.Source, rec.Asked, rec.Reason = string(rules.Ask), "editor", source, reason
	if o, ok := pick(params.Options, []string{"allow_always"}); ok && remember != nil {
		rec.Always = alwaysCovers(req, o)
	}

	// answerAs is the option the agent gets for the one a human chose (see
	// sentFor), with the record saying both. The broker's own prompts are
	// never relayed: the broker acts on the chosen option itself.
	_, own := c.(*heldPrompt)
	answerAs := func(r *Record) string {
		chosen, ok := optionByID(params.Options, r.Option)
		if own || !ok {
			return r.Option
		}
		// A lookalike's answer too: its marks are the agent's to write, so
		// only a real mode switch's answer is relayed as chosen.
		sent, agentRemembers := sentFor(params.Options, chosen, req.Kind)
		// Warned of in won: a channel's answer that loses the race is
		// read this way too.
		r.AgentRemembers = agentRemembers
		if sent.OptionID != chosen.OptionID {
			r.Chosen, r.ChosenKd = chosen.OptionID, chosen.Kind
			r.Option, r.OptionKd = sent.OptionID, sent.Kind
		}
		return r.Option
	}

	q := &asking{c: c, a: a, rec: rec, start: start, editor: true}
	// What the channels show: none is asked when there is only the editor.
	if a.Local != nil || len(a.Channels) > 0 {
		p := e.prompt(a, c, params, req, reason)
		q.prompt = &p
	}
	q.won = func(r *Record, kind string) {
		if r.AgentRemembers != "" {
			e.Log.Warn("relayed an answer the agent remembers itself", "session", c.SessionID(), "option", r.Option, "why", r.AgentRemembers)
		}
		if call, ok := c.(*session.Call); ok && call.Method == "session/request_permission" && kind != "" && e.unchangedSinceAsked(call, req) {
			// Only the agent's own request covers what it does next: the
			// MCP call, terminal or write it asked about; and only if the
			// human was shown what was decided on.
			e.approved.noteRequest(call.Session.ID, req, mcpArguments(call, params), strings.HasPrefix(kind, "allow"))
		}
		if remember != nil && (kind == "allow_always" || kind == "reject_always") {
			by := r.Channel
			if by == "" {
				by = r.Source
			}
			id := r.Option
			if r.Chosen != "" {
				id = r.Chosen
			}
			chosen, _ := optionByID(params.Options, id)
			r.Remembered = remember(chosen, by)
		}
	}
	q.fromEditor = func(r *Record, answer *jsonrpc.Message) (kind, replace string) {
		if answer.Error != nil {
			r.Decision = "error"
		} else if outcome, optionID := readOutcome(answer); outcome != "" {
			r.Decision, r.Option = outcome, optionID
			if o, ok := optionByID(params.Options, optionID); ok && outcome == "selected" {
				kind, r.OptionKd, r.Decision = o.Kind, o.Kind, decisionOf(o.Kind)
				if sent := answerAs(r); sent != optionID {
					replace = sent
				}
			}
		}
		return kind, replace
	}
	q.fromChannel = func(r *Record, ans notify.Answer) (func(func()) bool, string, string, error) {
		opt, err := q.prompt.Choose(ans.OptionID, "")
		if err != nil {
			return nil, "", "", err
		}
		r.Decision, r.Option, r.OptionKd = decisionOf(opt.Kind), opt.ID, opt.Kind
		sent := answerAs(r)
		return func(won func()) bool { return c.SelectOptionAs(sent, won) }, opt.Kind, r.Decision, nil
	}
	q.timedOut = func(withdraw context.CancelCauseFunc, r Record, win func(Record, string)) {
		opt, ok := pickFor(params.Options, []string{"reject_once", "reject_always"})
		why := nobodyAnswered(a.Timeout)
		withdraw(&notify.Outcome{By: "timeout", Decision: string(rules.Deny), Reason: why})
		if ok {
			r.Decision, r.Source, r.Option, r.OptionKd, r.Reason = string(rules.Deny), "timeout", opt.OptionID, opt.Kind, why
			c.SelectOptionAs(opt.OptionID, func() {
				win(r, opt.Kind)
				e.tell(&r)
			})
		}
	}
	e.route(q)
}

// nobodyAnswered is the reason of an answer the [ask] timeout gave, for a
// permission request and a question alike.
func nobodyAnswered(timeout time.Duration) string {
	return "nobody answered within " + shortDuration(timeout)
}

// route puts a request to a human as the Asker's route says, applies the
// first answer, withdraws every other prompt, and writes the request's one
// audit line when it is answered (or ends unanswered).
func (e *Engine) route(q *asking) {
	a, c := q.a, q.c
	ctx, withdraw := context.WithCancelCause(c.Context())
	// answered is closed once the winning answer's line is written.
	answered := make(chan struct{})
	e.unanswered.Add(1)
	var refusedMu sync.Mutex
	var refused []string
	refuse := func(why string) {
		refusedMu.Lock()
		refused = append(refused, why)
		refusedMu.Unlock()
	}
	// writeLine writes the request's one audit line.
	writeLine := func(r Record) {
		refusedMu.Lock()
		r.Refused = refused
		refusedMu.Unlock()
		r.Latency = ms(time.Since(q.start))
		_ = e.write(r)
	}

	// win records the first answer; only the one that won calls it.
	win := func(r Record, kind string) {
		if q.won != nil {
			q.won(&r, kind)
		}
		// Before the answer reaches the agent, as a decision's line (see
		// Engine.write).
		writeLine(r)
		close(answered)
	}

	toEditor := q.editor && a.Route != "channels"
	// forwardedAt is when the editor was given the request: an answer
	// sooner than a person can give is warned about (editorAnswered).
	var forwardedAt atomic.Int64
	var editorAnswered func(answer *jsonrpc.Message) string
	forward := func() bool {
		forwardedAt.Store(time.Now().UnixNano())
		return c.ForwardAnswering(editorAnswered)
	}
	editorAnswered = func(answer *jsonrpc.Message) string {
		took := time.Duration(time.Now().UnixNano() - forwardedAt.Load())
		r := q.rec
		r.Decision = "answered"
		kind, replace := q.fromEditor(&r, answer)
		withdraw(&notify.Outcome{By: "editor", Decision: r.Decision})
		win(r, kind)
		if kind != "" {
			e.editorAnswered(c.SessionID(), took)
		}
		return replace
	}
	if toEditor {
		forward()
	}

	channelsAsked := atomic.Bool{}
	askChannels := func() {
		if !channelsAsked.CompareAndSwap(false, true) {
			return
		}
		var asked sync.WaitGroup
		// (There is a prompt whenever there are channels.)
		for _, ch := range a.Channels {
			asked.Go(func() { e.askChannel(ctx, withdraw, q, ch.Channel, ch.Timeout, refuse, win) })
		}
		switch {
		case !toEditor && q.editor:
			// When every channel gave up without an answer, a human must
			// still be asked: the editor is the one place left.
			go func() {
				asked.Wait()
				if ctx.Err() == nil && forward() {
					e.Log.Warn("no channel could get an answer; asking the editor")
				}
			}()
		case !q.editor && len(a.Channels) > 0:
			// No place is left that prompts anyone: the request is
			// answered rather than left waiting on the local socket.
			go func() {
				asked.Wait()
				if ctx.Err() == nil {
					e.Log.Warn("no channel could get an answer, and the editor is not asked")
					q.gaveUp(withdraw, q.rec, win)
				}
			}()
		}
	}
	if a.Local != nil {
		// Answers the local channel refuses (from the agent's own
		// processes, or that answer nothing) are named in the audit line.
		localCtx := notify.WithRefusals(ctx, func(why string) {
			e.Log.Warn("refused a local answer", "prompt", q.prompt.ID, "why", why)
			refuse("local: " + why)
		})
		go e.askChannel(localCtx, withdraw, q, a.Local, 0, refuse, win)
	}
	switch {
	case a.Route == "channels" || a.Route == "both" || !q.editor:
		askChannels()
	case a.EscalateAfter > 0 && len(a.Channels) > 0:
		go func() {
			t := time.NewTimer(a.EscalateAfter)
			defer t.Stop()
			select {
			case <-t.C:
				e.Log.Info("nobody answered in the editor; asking the channels too", "after", a.EscalateAfter.String())
				askChannels()
			case <-ctx.Done():
			}
		}()
	}

	// One goroutine watches the request until its call ends: the timeout
	// and the turn's cancel while it is asked, then the call's end, when an
	// unanswered request gets its line.
	go func() {
		defer e.unanswered.Done()
		e.watchAsked(ctx, withdraw, q, func() bool { return forwardedAt.Load() != 0 }, win)
		<-c.Context().Done()
		withdraw(context.Canceled)
		select {
		case <-answered:
			return // its line is written
		default:
		}
		writeUnanswered(q, writeLine)
	}()
}

// writeUnanswered writes the line of a request whose call ended unanswered.
// (This goroutine's work, and watchAsked's, that copies a Record is in
// functions of its own, so that their frames are on the stack only when a
// line is written: a goroutine per request starts with a small stack, and
// growing it to hold them cost each turn more than what they do.)
//
//go:noinline
func writeUnanswered(q *asking, writeLine func(Record)) {
	r := q.rec
	r.Decision = "unanswered"
	select {
	case <-q.c.SessionCancelled():
		r.Decision, r.Source = "cancelled", "cancel"
	default:
	}
	writeLine(r)
}

// watchAsked answers a request put to a human when nobody did in time
// (q.timedOut) or the editor cancelled the turn (cancelled), and withdraws
// the channels' prompts of a question the agent completed, until ctx ends
// (for a completed question the editor still has, until the call does).
func (e *Engine) watchAsked(ctx context.Context, withdraw context.CancelCauseFunc, q *asking, forwarded func() bool, win func(Record, string)) {
	var timeout <-chan time.Time
	if q.a.Timeout > 0 {
		t := time.NewTimer(q.a.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	c := q.c
	cancelled := c.SessionCancelled()
	completed, done := q.completed, ctx.Done()
	for {
		select {
		case <-timeout:
			q.timeOut(withdraw, win)
			return
		case <-cancelled:
			// The editor cancelled the turn: every prompt of it is
			// withdrawn and the agent answered cancelled. (The broker
			// has already answered an agent's request itself, before
			// anything else could: see its audit line in route.)
			withdraw(&notify.Outcome{By: "cancel", Decision: "cancelled"})
			q.cancel(win)
			return
		case <-completed:
			withdraw(&notify.Outcome{By: "agent", Decision: "completed"})
			if !forwarded() {
				q.complete(win)
				return
			}
			// The editor still has it: the timeout and the turn's cancel
			// still answer it, until the call ends (ctx is withdrawn).
			completed, done = nil, c.Context().Done()
		case <-done:
			return
		}
	}
}

// timeOut, cancel and complete call the hooks of a request that timed out,
// whose turn was cancelled, or that the agent completed, with its record
// (see writeUnanswered for why each is a function of its own, and not
// inlined).
//
//go:noinline
func (q *asking) timeOut(withdraw context.CancelCauseFunc, win func(Record, string)) {
	q.timedOut(withdraw, q.rec, win)
}

//go:noinline
func (q *asking) cancel(win func(Record, string)) {
	r := q.rec
	r.Decision, r.Source = "cancelled", "cancel"
	q.c.RespondCancelledAs(func() { win(r, "") })
}

//go:noinline
func (q *asking) complete(win func(Record, string)) { q.onCompleted(q.rec, win) }

// readOutcome reads a session/request_permission result exactly, as the
// agent it is relayed to may: the outcome ("selected", "cancelled", or ""
// when it cannot be read) and, when selected, the option. A member in
// another letter case or repeated at any depth (the agent may read the
// other one), a missing or non-string optionId, is no outcome at all.
func readOutcome(answer *jsonrpc.Message) (outcome, optionID string) {
	if answer.Error != nil || jsonrpc.Strict(answer.Result) != nil {
		return "", ""
	}
	res, err := jsonrpc.ExactMembers(answer.Result, "outcome", "_meta")
	if err != nil {
		return "", ""
	}
	o, err := jsonrpc.ExactMembers(res["outcome"], "outcome", "optionId", "_meta")
	if err != nil || json.Unmarshal(o["outcome"], &outcome) != nil {
		return "", ""
	}
	switch outcome {
	case "cancelled":
		return outcome, ""
	case "selected":
		if raw, ok := o["optionId"]; ok && json.Unmarshal(raw, &optionID) == nil && raw[0] == '"' {
			return outcome, optionID
		}
	}
	return "", ""
}

// askChannel asks one channel and applies its answer if it is the first
// (channelAnswered: see writeUnanswered for why it is a function of its own).
func (e *Engine) askChannel(ctx context.Context, withdraw context.CancelCauseFunc, q *asking, ch notify.Channel, timeout time.Duration, refuse func(string), win func(Record, string)) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	ans, err := ch.Ask(ctx, *q.prompt)
	if err != nil {
		if ctx.Err() == nil && q.prompt.IsQuestion() && errors.Is(err, notify.ErrNoAnswer) {
			// What came back does not answer the question (content
			// that does not fit its form, an action ACP does not
			// define): the question stays open for the other places.
			e.Log.Warn("a channel's answer to a question is no answer; refused", "channel", ch.Name(), "err", err)
			refuse(ch.Name() + ": " + err.Error())
			return
		}
		if ctx.Err() == nil || timeout > 0 {
			e.Log.Info("no answer from a channel", "channel", ch.Name(), "err", err)
		}
		return
	}
	e.channelAnswered(withdraw, q, ch, ans, refuse, win)
}

// channelAnswered applies a channel's answer if it is the first.
func (e *Engine) channelAnswered(withdraw context.CancelCauseFunc, q *asking, ch notify.Channel, ans notify.Answer, refuse func(string), win func(Record, string)) {
	r := q.rec
	r.Source, r.Channel, r.Who = "channel", ch.Name(), ans.Who
	answer, kind, decision, err := q.fromChannel(&r, ans)
	if err != nil {
		e.Log.Warn("a channel's answer is no answer; refused", "channel", ch.Name(), "err", err)
		refuse(ch.Name() + ": " + err.Error())
		return
	}
	if !answer(func() {
		withdraw(&notify.Outcome{By: ch.Name(), Decision: decision})
		win(r, kind)
	}) {
		e.Log.Info("discarded a late answer: the request was already answered", "channel", ch.Name(), "decision", decision)
	}
}

// prompt builds what the channels show for a request.
func (e *Engine) prompt(a *Asker, c held, params permissionParams, req *rules.Request, reason string) notify.Prompt {
	p := notify.Prompt{
		Version: notify.PromptVersion,
		ID:      fmt.Sprintf("%d-%d", os.Getpid(), a.nextID.Add(1)),
		Session: c.SessionID(),
		Agent:   e.Agent,
		Title:   req.Title,
		Kind:    req.Kind,
		Reason:  reason,
		Digest:  notify.Digest(c.Raw()),
	}
	if p.Title == "" {
		p.Title = params.Title
	}
	if req.Script != nil {
		for _, sc := range req.Script.Commands {
			p.Commands = append(p.Commands, strings.Join(sc.Argv, " "))
		}
	}
	for _, path := range req.Paths {
		p.Paths = append(p.Paths, path.Abs)
	}
	for _, u := range req.URLs {
		p.URLs = append(p.URLs, u.Raw)
	}
	if req.MCP != nil {
		p.MCP = req.MCP.String()
	}
	_, own := c.(*heldPrompt)
	for _, o := range params.Options {
		opt := notify.Option{ID: o.OptionID, Kind: o.Kind, Name: o.Name}
		if o.Kind == "allow_always" || o.Kind == "reject_always" {
			// Say what the broker will remember, not only what the agent
			// says its option means: the agent's name may quote it among
			// words that say otherwise. (The broker's own prompts say it
			// in the name already.)
			opt.Remembers = alwaysCovers(req, o)
			if params.lookalike {
				opt.Remembers = "nothing (the answer to a question, a plan or a mode switch is never remembered)"
			}
			if !own {
				opt.Name += " (the broker remembers: " + opt.Remembers + ")"
			}
		}
		p.Options = append(p.Options, opt)
	}
	if a.Timeout > 0 {
		p.Deadline = time.Now().Add(a.Timeout).UTC()
	}
	return p
}
