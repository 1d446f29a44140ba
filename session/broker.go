// Package session owns one brokered ACP connection: the agent process and its
// lifecycle, the ordered relay of both directions, what the broker learns of
// sessions and tool calls on the way, and the seam (Policy) through which an
// agent's request may be answered by someone other than the editor.
//
// It reads copies of the messages it tracks and forwards the original bytes,
// except for the session set-up requests a Setup rewrites and an initialize
// an Initialize hook rewrites; it refuses what a
// peer could read otherwise than the broker does (see jsonrpc), and drops
// agent updates about the tool calls it shows for requests it holds. The
// only messages it writes itself are answers to intercepted requests, error
// responses when a peer cannot answer, the broker's own requests and
// notifications to the editor, a request whose id the editor may still
// answer for a withdrawn prompt, sent under a fresh id of the broker's, and
// the switches out of the agent's blind modes that a ModeGuard asks for
// (see modeswitch.go). It decides nothing: decisions belong to the Policy
// and the ModeGuard.
package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acp-broker/acp-broker/jsonrpc"
)

// DefaultMaxMessageSize is the largest message relayed unless configured:
// twice the largest the ACP SDKs accept, so the broker is never the limit.
const DefaultMaxMessageSize = 64 << 20

// ownIDPrefix starts the id of every request the broker sends on its own.
// Agent requests with such ids are refused, so the editor's answers to the
// broker can never be taken for answers to the agent or the other way round.
const ownIDPrefix = "acp-broker-"

// maxShadows bounds the ids of answered editor prompts remembered so that
// the editor's late or repeated answers to them are dropped.
const maxShadows = 4096

// Options configure Run.
type Options struct {
	AgentPath string   // the executable, as found by LookAgent
	AgentArgs []string // the agent's argv; AgentArgs[0] is its name as given
	// Keeper, if not empty, is an executable that runs Keeper when its
	// first argument is KeeperCommand (acp-broker itself): the agent is
	// started under it, so that nothing of the agent's outlives a broker
	// killed with SIGKILL (Linux only; elsewhere it is not used).
	Keeper string
	// Agent, if not nil, is the agent already started with StartAgent
	// (from AgentPath, AgentArgs and Keeper), which Run relays instead of
	// starting one.
	Agent *StartedAgent

	EditorIn  io.Reader // the editor's messages (the broker's stdin)
	EditorOut io.Writer // to the editor (the broker's stdout): messages only
	// Stderr receives the agent's stderr, whole lines at a time. Share its
	// lock with the logger's destination (see LockedWriter).
	Stderr io.Writer
	Logger *slog.Logger
	// Trace, if not nil, receives every message as a JSONL record.
	Trace io.Writer

	MaxMessageSize int           // default DefaultMaxMessageSize
	ShutdownGrace  time.Duration // after the editor leaves, before SIGTERM
	KillGrace      time.Duration // after SIGTERM, before SIGKILL

	Policy Policy // decides intercepted requests; required

	// Setup, if not nil, may rewrite the editor's session set-up requests
	// before the agent sees them.
	Setup Setup
	// Initialize, if not nil, sees the editor's initialize request before
	// the agent does, and returns the request to send the agent instead,
	// or nil to send it unchanged, with a note for the trace.
	Initialize func(m *jsonrpc.Message) (out []byte, note string)
	// Started, if not nil, is called once the relay is ready, with the
	// handle through which the broker's own messages reach the editor.
	Started func(*Editor)
	// Modes, if not nil, keeps sessions out of the agent's modes in which
	// it decides by itself (see ModeGuard).
	Modes ModeGuard
}

// Setup may change the editor's session set-up requests (session/new, load,
// resume and fork): with Options.Initialize, the one place a message is not
// relayed as sent.
type Setup interface {
	// Rewrite returns the request to send the agent instead of m, or nil to
	// send m unchanged, with a note for the trace. established, if not nil,
	// learns the session the request set up once the agent has answered
	// ("" if it failed). An error refuses the request: the editor gets it
	// and the agent never sees the request.
	Rewrite(m *jsonrpc.Message) (out []byte, note string, established func(sessionID string), err error)
}

// SetupMethods are the editor requests a Setup sees.
var SetupMethods = map[string]bool{"session/new": true, "session/load": true, "session/resume": true, "session/fork": true}

// Editor sends the broker's own messages to the editor.
type Editor struct{ b *broker }

// Request sends a request of the broker's own to the editor and waits for
// its response, which never reaches the agent.
func (e *Editor) Request(ctx context.Context, method string, params any) (*jsonrpc.Message, error) {
	return e.b.requestEditor(ctx, method, params)
}

// Notify sends a notification of the broker's own to the editor.
func (e *Editor) Notify(method string, params any) error {
	frame, err := jsonrpc.NewNotification(method, params)
	if err != nil {
		return err
	}
	return e.b.toEditor("broker->editor", frame)
}

// Session returns what is known of a session.
func (e *Editor) Session(id string) Info { return e.b.tracker.info(id) }

// Cancelled returns a channel closed when the editor next cancels the
// session with session/cancel, before the cancel is relayed to the agent:
// what the broker asks on its own about the session's turn ends with it.
// It is nil (never closed) for a session the editor did not open (nor a
// subagent's session of one: the cancel of its parent or of itself ends it).
func (e *Editor) Cancelled(sessionID string) <-chan struct{} {
	if !e.b.tracker.info(sessionID).Known() {
		return nil
	}
	b := e.b
	b.mu.Lock()
	defer b.mu.Unlock()
	ch, ok := b.turns[sessionID]
	if !ok {
		if len(b.turns) >= MaxOpenSessions {
			for id := range b.turns { // closed sessions' leftovers
				if !b.tracker.info(id).Known() {
					delete(b.turns, id)
				}
			}
		}
		ch = make(chan struct{})
		b.turns[sessionID] = ch
	}
	return ch
}

// Run starts the agent (unless Options.Agent is one already started),
// relays until the agent has exited, and returns the status the broker
// should exit with: the agent's own.
//
// When the editor closes its input, the agent's stdin is closed and the agent
// is given ShutdownGrace, then SIGTERM, then SIGKILL after KillGrace. When
// the agent exits first, every request the editor is still waiting on is
// answered with an error. SIGINT, SIGTERM and SIGHUP are passed on to the
// agent's process group in every phase. Nothing the agent started outlives
// Run, and with a Keeper on Linux nothing of it outlives the calling process
// either, even killed with SIGKILL.
//
// Run makes the calling process a child subreaper on Linux and kills every
// child process left over when the agent exits, so a process should run only
// one broker at a time.
func Run(ctx context.Context, opts Options) (int, error) {
	if opts.Policy == nil {
		return 0, errors.New("session: no Policy")
	}
	if opts.MaxMessageSize <= 0 {
		opts.MaxMessageSize = DefaultMaxMessageSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(opts.Stderr, nil))
	}
	agent := opts.Agent
	if agent == nil {
		var err error
		if agent, err = StartAgent(opts.AgentPath, opts.AgentArgs, opts.Keeper); err != nil {
			return 0, err
		}
	}
	// Signals are caught from before the agent starts until the broker
	// returns, so that no signal in any phase ends the broker without
	// reaching the agent.
	defer agent.release()
	signals := agent.signals
	proc, err := agent.started()
	if err != nil {
		return 0, err
	}
	b := newBroker(opts, proc)
	opts.Logger.Debug("agent started", "agent", b.agentName, "pid", proc.pid)

	stderrDone := make(chan struct{})
	go func() {
		pumpLines(proc.stderr, opts.Stderr)
		close(stderrDone)
	}()

	agentDone := make(chan struct{})
	go func() {
		b.readAgent(jsonrpc.NewReader(proc.stdout, opts.MaxMessageSize))
		close(agentDone)
	}()
	if opts.Started != nil {
		opts.Started(&Editor{b})
	}
	go b.readEditor(jsonrpc.NewReader(opts.EditorIn, opts.MaxMessageSize))

	proc.supervise(ctx, signals, b.editorGone, opts.ShutdownGrace, opts.KillGrace, b.log)
	code := proc.exitCode
	b.log.Debug("agent exited", "status", code)

	// Whatever the agent started may still hold its stdout open; ending it
	// lets the agent's last messages drain to the editor.
	proc.killLeftovers(opts.KillGrace, signals, b.log)
	waitOrTimeout(agentDone, opts.KillGrace)
	b.agentExited(code)
	waitOrTimeout(stderrDone, opts.KillGrace)
	return code, nil
}

func waitOrTimeout(ch <-chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	}
}

// broker relays one editor–agent connection.
type broker struct {
	log       *slog.Logger
	agentName string
	policy    Policy
	setup     Setup
	initial   func(m *jsonrpc.Message) (out []byte, note string)
	guard     ModeGuard
	modes     *modeSwitches
	tracker   *tracker
	editor    *jsonrpc.Writer
	agent     *jsonrpc.Writer
	trace     *tracer
	proc      *agentProcess

	editorGone     chan struct{}
	editorGoneOnce sync.Once

	mu sync.Mutex
	// calls holds the intercepted agent requests not yet answered, by id.
	calls map[string]*Call
	// shadows holds the ids of forwarded requests that are answered, so
	// that an answer from the editor for them is dropped, never relayed:
	// true while the editor's answer is still expected (the broker answered
	// and withdrew the prompt), false once it came (or the editor answered
	// first). A call leaves calls and enters shadows in one step under mu.
	shadows     map[string]bool
	shadowOrder []string
	// aliases holds, by the broker's own id, the calls forwarded under one
	// because the agent reused a shadowed id.
	aliases map[string]*Call
	// editorPending holds the editor's requests the agent has not answered,
	// so they can be failed if the agent exits.
	editorPending map[string]json.RawMessage
	// own holds the broker's own requests to the editor awaiting answers.
	own    map[string]chan *jsonrpc.Message
	nextID uint64
	// turns holds, by session, the channel Editor.Cancelled hands out for
	// the session's current turn.
	turns map[string]chan struct{}
	// established holds, by editor request id, who learns which session a
	// rewritten set-up request created.
	established map[string]func(sessionID string)
	exited      bool
}

func newBroker(opts Options, proc *agentProcess) *broker {
	return &broker{
		log:           opts.Logger,
		agentName:     filepath.Base(opts.AgentArgs[0]),
		policy:        opts.Policy,
		setup:         opts.Setup,
		initial:       opts.Initialize,
		guard:         opts.Modes,
		modes:         newModeSwitches(),
		tracker:       newTracker(),
		editor:        jsonrpc.NewWriter(opts.EditorOut),
		agent:         jsonrpc.NewWriter(proc.stdin),
		trace:         newTracer(opts.Trace),
		proc:          proc,
		editorGone:    make(chan struct{}),
		calls:         make(map[string]*Call),
		shadows:       make(map[string]bool),
		aliases:       make(map[string]*Call),
		editorPending: make(map[string]json.RawMessage),
		own:           make(map[string]chan *jsonrpc.Message),
		established:   make(map[string]func(string)),
		turns:         make(map[string]chan struct{}),
	}
}

// Sides of the connection, for logs and traces.
const (
	fromAgent  = "agent"
	fromEditor = "editor"
)

// readAgent relays the agent's output until it ends, in the order read.
// Frames are queued and written together, but always before the relay waits
// for more input, so a burst costs few writes and no frame is held back.
func (b *broker) readAgent(r *jsonrpc.Reader) {
	defer b.flushEditor()
	defer b.abandonSwitches()
	for {
		if !r.HasFrame() {
			b.flushEditor()
		}
		frame, err := r.Next()
		if err != nil {
			var tl *jsonrpc.TooLargeError
			if errors.As(err, &tl) {
				b.tooLarge(fromAgent, tl)
				continue
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				b.log.Warn("reading the agent's output", "err", err)
			}
			return
		}
		m, err := jsonrpc.Parse(frame)
		if err != nil {
			b.invalid(fromAgent, frame, err)
			continue
		}
		b.relayOne(m, frame)
	}
}

// relayAgent relays one message of the agent's, or hands it to whoever
// answers it instead of the editor.
func (b *broker) relayAgent(m *jsonrpc.Message, frame []byte) {
	defer func() {
		for _, id := range b.tracker.takeModeChanges() {
			b.modeUpdated(id)
		}
	}()
	switch m.Kind {
	case jsonrpc.Request:
		if why := Refused(m.Method, m.ID, m.Params); why != "" {
			b.log.Warn("refused an agent request: "+why, "id", string(m.ID), "method", m.Method)
			b.trace.record("agent->broker", frame, "refused: "+why)
			b.toAgent("broker->agent", jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidRequest, why))
			return
		}
		if InterceptedMethods[m.Method] {
			b.intercept(m)
			return
		}
		// Any other request reusing the id of a withdrawn prompt gets
		// the editor's answers to that id again: a late permission
		// outcome then reaches it too, but no permission request does.
		b.mu.Lock()
		if len(b.shadows) > 0 {
			b.unshadowLocked(m.IDKey())
		}
		b.mu.Unlock()
	case jsonrpc.Response:
		key := m.IDKey()
		b.tracker.agentResponse(m)
		b.mu.Lock()
		delete(b.editorPending, key)
		established := b.established[key]
		delete(b.established, key)
		b.mu.Unlock()
		if established != nil {
			id, _ := jsonrpc.String(m.Result, "sessionId")
			established(id)
		}
		if b.setupAnswered(m, frame) {
			return // held until the agent answers the broker's switch
		}
	case jsonrpc.Notification:
		switch m.Method {
		case "session/update":
			if b.tracker.update(m.Params) {
				// What the broker shows the human of a request it
				// holds is the broker's to say.
				b.log.Warn("dropped an agent update about a tool call of the broker's")
				b.trace.record("agent->broker", frame, "dropped: the tool call id is reserved for the broker")
				return
			}
		case "$/cancel_request":
			if b.agentCancelled(m.Params) {
				return
			}
		case "elicitation/complete":
			b.elicitationCompleted(m.Params)
		}
	}
	b.relayQueued(frame)
}

func (b *broker) flushEditor() {
	if b.editor.Flush() != nil {
		b.markEditorGone()
	}
}

// readEditor relays the editor's input until it ends, in the order read.
func (b *broker) readEditor(r *jsonrpc.Reader) {
	defer b.markEditorGone()
	for {
		frame, err := r.Next()
		if err != nil {
			var tl *jsonrpc.TooLargeError
			if errors.As(err, &tl) {
				b.tooLarge(fromEditor, tl)
				continue
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				b.log.Warn("reading the editor's input", "err", err)
			}
			return
		}
		m, err := jsonrpc.Parse(frame)
		if err != nil {
			b.invalid(fromEditor, frame, err)
			continue
		}
		switch m.Kind {
		case jsonrpc.Request:
			if isOwnID(m.ID) {
				why := fmt.Sprintf("request ids starting with %q are reserved by acp-broker", ownIDPrefix)
				b.log.Warn("refused an editor request: "+why, "id", string(m.ID), "method", m.Method)
				b.trace.record("editor->broker", frame, "refused: "+why)
				b.toEditor("broker->editor", jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidRequest, why))
				continue
			}
			if b.refuseModeChange(m) {
				continue
			}
			b.tracker.editorRequest(m)
			key := m.IDKey()
			b.mu.Lock()
			exited := b.exited
			if !exited {
				b.editorPending[key] = clone(m.ID)
			}
			b.mu.Unlock()
			if exited {
				b.toEditor("broker->editor", jsonrpc.NewError(m.ID, jsonrpc.CodeServerError, "agent has exited"))
				continue
			}
			out, ok := b.rewrite(m, frame)
			if !ok {
				b.mu.Lock()
				delete(b.editorPending, key)
				b.mu.Unlock()
				continue
			}
			if err := b.sendToAgent(m, out.dir, out.frame); err != nil {
				b.mu.Lock()
				delete(b.editorPending, key)
				b.mu.Unlock()
				b.toEditor("broker->editor", jsonrpc.NewError(m.ID, jsonrpc.CodeServerError, "agent is not reading its input: "+err.Error()))
			}
			continue
		case jsonrpc.Notification:
			var cancelled []settledCall
			if m.Method == "session/cancel" {
				if id, ok := jsonrpc.String(m.Params, "sessionId"); ok {
					cancelled = b.cancelSession(id)
				}
			}
			b.sendToAgent(m, "editor->agent", frame)
			b.deliverCancelled(cancelled)
			continue
		case jsonrpc.Response:
			if b.editorResponse(m) {
				continue
			}
		}
		b.toAgent("editor->agent", frame)
	}
}

type outgoing struct {
	dir   string
	frame []byte
}

// rewrite gives the Setup a session set-up request. It returns what to send
// the agent, or false when the request was refused and answered.
func (b *broker) rewrite(m *jsonrpc.Message, frame []byte) (outgoing, bool) {
	if m.Method == "initialize" && b.initial != nil {
		out, note := b.initial(m)
		if out == nil {
			return outgoing{"editor->agent", frame}, true
		}
		b.log.Info("rewrote the editor's initialize", "change", note)
		b.trace.record("editor->broker", frame, "rewritten: "+note)
		return outgoing{"broker->agent", out}, true
	}
	if b.setup == nil || !SetupMethods[m.Method] {
		return outgoing{"editor->agent", frame}, true
	}
	out, note, established, err := b.setup.Rewrite(m)
	if err != nil {
		b.log.Warn("refused a session set-up request", "method", m.Method, "err", err)
		b.trace.record("editor->broker", frame, "refused: "+err.Error())
		b.toEditor("broker->editor", jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidParams, "acp-broker: "+err.Error()))
		return outgoing{}, false
	}
	if established != nil {
		if id, ok := jsonrpc.String(m.Params, "sessionId"); ok && m.Method != "session/fork" {
			established(id)
		} else {
			b.mu.Lock()
			b.established[m.IDKey()] = established
			b.mu.Unlock()
		}
	}
	if out == nil {
		return outgoing{"editor->agent", frame}, true
	}
	b.log.Info("rewrote a session set-up request", "method", m.Method, "change", note)
	b.trace.record("editor->broker", frame, "rewritten: "+note)
	return outgoing{"broker->agent", out}, true
}

// editorResponse routes a response from the editor that is not the agent's
// business: answers to the broker's own requests, to intercepted calls, and
// late or repeated answers to prompts already answered. It reports whether
// it took the response.
func (b *broker) editorResponse(m *jsonrpc.Message) bool {
	b.mu.Lock()
	var key string // while nothing of the broker's waits, every key misses
	if len(b.own)+len(b.shadows)+len(b.aliases)+len(b.calls) > 0 {
		key = m.IDKey()
	}
	if ch, ok := b.own[key]; ok {
		delete(b.own, key)
		b.mu.Unlock()
		b.trace.record("editor->broker", m.Raw, "")
		ch <- reparse(m.Raw)
		return true
	}
	if awaiting, ok := b.shadows[key]; ok {
		b.shadows[key] = false
		b.mu.Unlock()
		if awaiting {
			b.trace.record("editor->broker", m.Raw, "dropped: the request was already answered")
			b.log.Debug("dropped the editor's answer to a withdrawn request", "id", string(m.ID))
		} else {
			b.trace.record("editor->broker", m.Raw, "dropped: the editor already answered this request")
			b.log.Warn("dropped a second answer from the editor to one request", "id", string(m.ID))
		}
		return true
	}
	c := b.aliases[key]
	if c == nil {
		c = b.calls[key]
	}
	if c == nil {
		b.mu.Unlock()
		if isOwnID(m.ID) {
			// No agent request has such an id: it answers one of the
			// broker's own that is no longer waiting.
			b.trace.record("editor->broker", m.Raw, "dropped: no request of the broker's waits for it")
			return true
		}
		return false
	}
	c.mu.Lock()
	forwardedHere := c.state == forwarded && jsonrpc.IDKey(c.editorID) == key
	c.mu.Unlock()
	if !forwardedHere {
		b.mu.Unlock()
		// The editor was never asked under this id; an answer it makes up
		// must not reach the agent.
		b.trace.record("editor->broker", m.Raw, "dropped: not a request the editor was sent")
		b.log.Warn("dropped an editor answer to a request it was never sent", "id", string(m.ID))
		return true
	}
	b.settleLocked(c, false)
	b.mu.Unlock()
	c.editorAnswered(reparse(m.Raw))
	return true
}

// settle marks a call answered by the broker. In the same step, under
// b.mu, the call leaves the table and, if the editor was sent it, its id
// is shadowed, so that an answer from the editor arriving at any moment
// after is dropped and never relayed as a second answer. It reports the
// state before, and false if the call was already answered.
func (b *broker) settle(c *Call) (callState, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.settleLocked(c, true)
}

func (b *broker) settleLocked(c *Call, editorAwaited bool) (callState, bool) {
	c.mu.Lock()
	prev := c.state
	if prev == answered {
		c.mu.Unlock()
		return prev, false
	}
	c.state = answered
	c.mu.Unlock()
	if key := jsonrpc.IDKey(c.ID); b.calls[key] == c {
		delete(b.calls, key)
	}
	if prev == forwarded {
		key := jsonrpc.IDKey(c.editorID)
		delete(b.aliases, key)
		b.shadowLocked(key, editorAwaited)
	}
	return prev, true
}

// shadowLocked remembers an answered prompt's id; awaiting says whether the
// editor's answer to it is still expected.
func (b *broker) shadowLocked(key string, awaiting bool) {
	if _, ok := b.shadows[key]; !ok {
		if len(b.shadowOrder) >= maxShadows {
			delete(b.shadows, b.shadowOrder[0])
			b.shadowOrder = b.shadowOrder[1:]
		}
		b.shadowOrder = append(b.shadowOrder, key)
	}
	b.shadows[key] = awaiting
}

func (b *broker) unshadowLocked(key string) {
	if _, ok := b.shadows[key]; ok {
		delete(b.shadows, key)
		if i := slices.Index(b.shadowOrder, key); i >= 0 {
			b.shadowOrder = slices.Delete(b.shadowOrder, i, i+1)
		}
	}
}

// ownIDLocked returns a fresh id in the broker's namespace.
func (b *broker) ownIDLocked() string {
	b.nextID++
	return fmt.Sprintf("%s%d", ownIDPrefix, b.nextID)
}

// intercept hands an agent request to the Policy. The call keeps a copy of
// the message: the reader reuses the frame's buffer.
func (b *broker) intercept(read *jsonrpc.Message) {
	m := read.Clone()
	raw := m.Raw
	ctx, cancel := context.WithCancelCause(context.Background())
	c := &Call{Method: m.Method, ID: m.ID, Params: m.Params, raw: raw, b: b, ctx: ctx, cancel: cancel, sessionCancelled: make(chan struct{})}
	if m.Method == "elicitation/create" {
		if mode, _ := jsonrpc.String(m.Params, "mode"); mode == "url" {
			c.elicitationID, _ = jsonrpc.String(m.Params, "elicitationId")
		}
	}
	if c.elicitationID != "" {
		c.completed = make(chan struct{})
	}
	key := m.IDKey()
	// Only this goroutine adds calls: an id free now is free below.
	b.mu.Lock()
	_, dup := b.calls[key]
	b.mu.Unlock()
	if dup {
		// Refused before the tracker sees it, so that what it says of its
		// tool call counts as little as a trace that records it refused.
		cancel(nil)
		b.log.Warn("refused an agent request whose id is still in use", "id", string(m.ID), "method", m.Method)
		b.trace.record("agent->broker", raw, "refused: the request id is in use by an unanswered request")
		b.toAgent("broker->agent", jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidRequest, "request id is already in use by an unanswered request"))
		return
	}
	c.Session, c.ToolCall = b.tracker.intercepted(m.Method, m.Params)
	b.mu.Lock()
	b.calls[key] = c
	b.mu.Unlock()
	b.trace.record("agent->broker", raw, "intercepted")
	b.policy.Intercept(c)
}

// cancelEditorRequest retracts a request the editor was sent and the
// broker has since answered itself (its id is already shadowed).
func (b *broker) cancelEditorRequest(id json.RawMessage) {
	frame, err := jsonrpc.NewNotification("$/cancel_request", map[string]json.RawMessage{"requestId": id})
	if err == nil {
		b.toEditor("broker->editor", frame)
	}
}

// agentCancelled handles the agent's $/cancel_request. A request only the
// broker holds is answered at once with -32800 and the editor never hears of
// it; for any other request the notification is relayed (under the id the
// editor knows the request by). It reports whether the notification was
// consumed.
func (b *broker) agentCancelled(params json.RawMessage) bool {
	id, ok := jsonrpc.Field(params, "requestId")
	if !ok {
		return false
	}
	b.mu.Lock()
	c, ok := b.calls[jsonrpc.IDKey(id)]
	b.mu.Unlock()
	if !ok {
		return false
	}
	c.mu.Lock()
	state, editorID := c.state, c.editorID
	c.mu.Unlock()
	switch {
	case c.Method == "elicitation/create" && state != answered:
		// A question may be shown in the editor and on channels at once:
		// the broker answers it, which withdraws it everywhere (the
		// editor's prompt with $/cancel_request, its late answer dropped).
		c.RespondError(jsonrpc.CodeRequestCanceled, "request cancelled by the agent")
		return true
	case state == forwarded && jsonrpc.IDKey(editorID) != jsonrpc.IDKey(c.ID):
		b.cancelEditorRequest(editorID)
		return true
	case state != held:
		return false
	}
	c.RespondError(jsonrpc.CodeRequestCanceled, "request cancelled by the agent")
	return true
}

// elicitationCompleted tells the calls of a URL-mode elicitation that the
// agent completed it (see Call.ElicitationCompleted).
func (b *broker) elicitationCompleted(params json.RawMessage) {
	id, ok := jsonrpc.String(params, "elicitationId")
	if !ok || id == "" {
		return
	}
	b.mu.Lock()
	var done []*Call
	for _, c := range b.calls {
		if c.elicitationID == id {
			done = append(done, c)
		}
	}
	b.mu.Unlock()
	for _, c := range done {
		c.completedOnce.Do(func() { close(c.completed) })
	}
}

// settledCall is a call cancelSession answered, to be delivered.
type settledCall struct {
	c     *Call
	prev  callState
	frame []byte
	// withdraw marks a call whose editor prompt, if it had one, the
	// cancel does not answer: a subagent's session's, or a question.
	withdraw bool
}

// cancelSession answers every pending permission request of the session
// with the cancelled outcome, as ACP requires of a client after
// session/cancel, and every pending question (elicitation/create) with the
// cancel action: the ones only the broker holds and the ones the editor
// was sent alike (the editor's own cancelled answer is then dropped as
// late), so no answer from a channel, the local socket or a timeout can
// reach the agent after the cancel. It settles them all in one step and
// ends their contexts; deliverCancelled sends the answers, once the
// session/cancel itself is relayed.
//
// The cancel reaches the session's subagents' sessions too, and theirs:
// their work is the parent's turn. The editor may not know to answer their
// prompts, nor its questions (ACP asks it to answer only permission
// requests after a cancel), so those it was sent are withdrawn with
// $/cancel_request.
func (b *broker) cancelSession(sessionID string) []settledCall {
	frame := func(c *Call) []byte {
		var f []byte
		if c.Method == "elicitation/create" {
			f, _ = jsonrpc.NewResult(c.ID, elicitationAction{Action: "cancel"})
		} else {
			f, _ = jsonrpc.NewResult(c.ID, permissionOutcome{Outcome: outcome{Outcome: "cancelled"}})
		}
		return f
	}
	children := b.tracker.descendantsOf(sessionID)
	var out []settledCall
	b.mu.Lock()
	for _, id := range append([]string{sessionID}, children...) {
		if ch, ok := b.turns[id]; ok {
			close(ch)
			delete(b.turns, id)
		}
	}
	for _, c := range b.calls {
		if c.Method != "session/request_permission" && c.Method != "elicitation/create" {
			continue
		}
		// A child whose announcement the broker has since dropped (too
		// many) is still its root's, as it was when it asked.
		ofChild := slices.ContainsFunc(children, c.mayBeOf) || (c.Session.Root == sessionID && c.Session.ID != sessionID)
		if !ofChild && !c.mayBeOf(sessionID) {
			continue
		}
		if prev, ok := b.settleLocked(c, true); ok {
			withdraw := (ofChild && !c.mayBeOf(sessionID)) || c.Method == "elicitation/create"
			out = append(out, settledCall{c, prev, frame(c), withdraw})
		}
	}
	b.mu.Unlock()
	for _, s := range out {
		s.c.sessionCancelledOnce.Do(func() { close(s.c.sessionCancelled) })
		s.c.cancel(ErrSessionCancelled)
	}
	return out
}

// deliverCancelled sends the agent the answers cancelSession settled. The
// editor's permission prompts of the cancelled session are not withdrawn
// with $/cancel_request: session/cancel itself tells the editor to answer
// them cancelled, and those answers are dropped as late. Those of its
// subagents' sessions are, since the cancel does not name them, and so are
// its questions.
func (b *broker) deliverCancelled(calls []settledCall) {
	for _, s := range calls {
		b.sendToAgent(nil, "broker->agent", s.frame)
		if s.withdraw && s.prev == forwarded {
			b.cancelEditorRequest(s.c.editorID)
		}
	}
}

// requestEditor sends a request of the broker's own to the editor.
func (b *broker) requestEditor(ctx context.Context, method string, params any) (*jsonrpc.Message, error) {
	b.mu.Lock()
	id := b.ownIDLocked()
	key := jsonrpc.IDKey(jsonrpc.Quote(id))
	ch := make(chan *jsonrpc.Message, 1)
	b.own[key] = ch
	b.mu.Unlock()
	frame, err := jsonrpc.NewRequest(id, method, params)
	if err == nil {
		err = b.toEditor("broker->editor", frame)
	}
	if err == nil {
		select {
		case m := <-ch:
			return m, nil
		case <-b.editorGone:
			err = errors.New("the editor closed the connection")
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	b.mu.Lock()
	_, unanswered := b.own[key]
	delete(b.own, key)
	if unanswered {
		// The editor may still show it: withdrawn, and a late answer is
		// dropped rather than taken for one to the agent.
		b.shadowLocked(key, true)
	}
	b.mu.Unlock()
	if unanswered {
		b.cancelEditorRequest(jsonrpc.Quote(id))
	}
	return nil, err
}

// agentExited fails what can no longer be answered: every editor request
// the agent did not answer, and every intercepted call.
func (b *broker) agentExited(code int) {
	b.mu.Lock()
	b.exited = true
	pending := b.editorPending
	b.editorPending = make(map[string]json.RawMessage)
	calls := b.calls
	b.calls = make(map[string]*Call)
	b.mu.Unlock()
	msg := fmt.Sprintf("agent exited with status %d", code)
	for _, id := range pending {
		b.toEditor("broker->editor", jsonrpc.NewError(id, jsonrpc.CodeServerError, msg))
	}
	for _, c := range calls {
		c.cancel(nil)
	}
}

// tooLarge reports a frame over the size limit and answers whoever would
// otherwise wait for it forever.
func (b *broker) tooLarge(from string, tl *jsonrpc.TooLargeError) {
	b.log.Warn("message too large; not forwarded", "from", b.sideName(from), "size", tl.Size, "limit", tl.Limit,
		"hint", "raise --max-message-size if the peer really sends messages this large")
	b.trace.recordText(from+"->broker", tl.Head, fmt.Sprintf("dropped: %d bytes exceed the limit of %d", tl.Size, tl.Limit))
	h := jsonrpc.ParseHead(tl.Head)
	b.answerDropped(from, h, fmt.Sprintf("message of %d bytes exceeds acp-broker's limit of %d bytes (--max-message-size)", tl.Size, tl.Limit), true)
}

// answerDropped answers whoever waits for a message the broker dropped: the
// sender of a request, or the side a dropped response was meant for. An
// editor response that answers no intercepted call is taken for the answer
// to an agent request only if guess is set.
func (b *broker) answerDropped(from string, h jsonrpc.Head, msg string, guess bool) {
	if h.ID == nil {
		return
	}
	switch {
	case h.HasMethod && from == fromAgent:
		b.toAgent("broker->agent", jsonrpc.NewError(h.ID, jsonrpc.CodeInvalidRequest, msg))
	case h.HasMethod:
		b.toEditor("broker->editor", jsonrpc.NewError(h.ID, jsonrpc.CodeInvalidRequest, msg))
	case h.IsResponse && from == fromAgent:
		// The editor waits for this response: it gets an error instead.
		b.mu.Lock()
		_, pending := b.editorPending[jsonrpc.IDKey(h.ID)]
		delete(b.editorPending, jsonrpc.IDKey(h.ID))
		b.mu.Unlock()
		if pending {
			b.toEditor("broker->editor", jsonrpc.NewError(h.ID, jsonrpc.CodeInvalidRequest, "the agent's response: "+msg))
		}
	case h.IsResponse:
		// Routed as editorResponse routes a response, so that it never
		// becomes a second answer or one under the broker's id.
		key := jsonrpc.IDKey(h.ID)
		b.mu.Lock()
		ch, own := b.own[key]
		delete(b.own, key)
		_, shadowed := b.shadows[key]
		c := b.aliases[key]
		if c == nil {
			c = b.calls[key]
		}
		b.mu.Unlock()
		switch {
		case own:
			ch <- reparse(jsonrpc.NewError(h.ID, jsonrpc.CodeInvalidRequest, "the editor's response: "+msg))
		case shadowed:
		case c != nil && c.isForwarded():
			c.RespondError(jsonrpc.CodeInvalidRequest, "the editor's response: "+msg)
		case c == nil && guess && !isOwnID(h.ID):
			b.toAgent("broker->agent", jsonrpc.NewError(h.ID, jsonrpc.CodeInvalidRequest, "the editor's response: "+msg))
		}
	}
}

// invalid reports a line that is not JSON-RPC. It is never forwarded: one
// stray line on an editor's input can break its whole connection. A request
// whose id could be read is answered with an error, and so is the request a
// refused response with a readable id answered.
func (b *broker) invalid(from string, frame []byte, err error) {
	line := string(frame)
	if len(line) > 200 {
		line = line[:200] + "…"
	}
	if from == fromAgent {
		b.log.Warn("agent output is not JSON-RPC; not forwarded to the editor", "agent", b.agentName, "line", line, "reason", err.Error())
	} else {
		b.log.Warn("editor input is not JSON-RPC; not forwarded to the agent", "from", "editor", "line", line, "reason", err.Error())
	}
	b.trace.recordText(from+"->broker", frame, "dropped: "+err.Error())
	var inv *jsonrpc.InvalidError
	if errors.As(err, &inv) {
		msg := "invalid request: " + inv.Reason
		if !inv.HasMethod {
			msg = "invalid message: " + inv.Reason
		}
		// A line without "jsonrpc" may be anything with an "id"; only a
		// request the broker knows waits is answered for it.
		b.answerDropped(from, jsonrpc.Head{ID: inv.ID, HasMethod: inv.HasMethod, IsResponse: inv.IsResponse}, msg, false)
	}
}

func (b *broker) sideName(from string) string {
	if from == fromAgent {
		return b.agentName
	}
	return from
}

// toEditor writes one frame to the editor. A failed write means the editor
// is gone, which stops the broker as if it had closed its input.
func (b *broker) toEditor(dir string, frame []byte) error {
	b.trace.record(dir, frame, "")
	err := b.editor.WriteFrame(frame)
	if err != nil {
		b.markEditorGone()
	}
	return err
}

// toAgent writes one frame to the agent.
func (b *broker) toAgent(dir string, frame []byte) error {
	b.trace.record(dir, frame, "")
	return b.agent.WriteFrame(frame)
}

func (b *broker) markEditorGone() {
	b.editorGoneOnce.Do(func() { close(b.editorGone) })
}

// namesOwnToolCall reports whether the object at the path member of params names a
// tool call of the broker's own (its toolCallId, in any letter case a Go
// peer would take for it, starts with acp-broker-): the agent must not
// change what the broker shows the human about a request it holds.
func namesOwnToolCall(params json.RawMessage, member ...string) bool {
	obj, ok := jsonrpc.Field(params, member...)
	if !ok {
		return false
	}
	members, err := jsonrpc.Members(obj)
	if err != nil {
		// A repeated member: peers disagree on which counts.
		return bytes.Contains(obj, []byte(`"`+ownIDPrefix))
	}
	for name, v := range members {
		var id string
		if strings.EqualFold(name, "toolCallId") && json.Unmarshal(v, &id) == nil && strings.HasPrefix(id, ownIDPrefix) {
			return true
		}
	}
	return false
}

// Refused says why the broker refuses an agent's request before anything
// decides it, or "" when it does not: the relay and `rules explain` both ask
// it (explain without the request's id).
func Refused(method string, id, params json.RawMessage) string {
	if isOwnID(id) {
		return fmt.Sprintf("request ids starting with %q are reserved by acp-broker", ownIDPrefix)
	}
	if method == "session/request_permission" && (namesOwnToolCall(params, "toolCall") || namesOwnToolCall(params, "subject", "toolCall") || namesOwnToolCall(params, "subject")) {
		return fmt.Sprintf("tool call ids starting with %q are reserved by acp-broker", ownIDPrefix)
	}
	return ""
}

func isOwnID(id json.RawMessage) bool {
	if len(id) < 2 || id[0] != '"' {
		return false
	}
	if bytes.IndexByte(id, '\\') < 0 { // the id reads as its bytes
		return bytes.HasPrefix(id[1:len(id)-1], []byte(ownIDPrefix))
	}
	return strings.HasPrefix(jsonrpc.IDKey(id), "s:"+ownIDPrefix)
}

// reparse parses a frame the broker has already parsed once, into a copy it
// keeps beyond the reader's next call.
func reparse(raw []byte) *jsonrpc.Message {
	m, err := jsonrpc.Parse(clone(raw))
	if err != nil {
		panic("session: a parsed frame no longer parses: " + err.Error())
	}
	return m
}
