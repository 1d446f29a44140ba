package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acp-broker/acp-broker/jsonrpc"
)

// ModeGuard keeps sessions out of the agent's own modes in which it decides
// by itself what to run (Claude Code's auto, Codex's agent, Gemini's yolo):
// there the agent never asks, and the broker governs nothing. The broker
// asks it on its reading goroutines, so it must return promptly.
type ModeGuard interface {
	// Watches reports whether the guard knows the modes of the agent its
	// initialize response named: only then does the broker hold a session
	// until its mode is known.
	Watches(agent string) bool
	// Switch returns the mode to put a session in that the agent reports in
	// s.AgentMode, or ok false to leave it there.
	Switch(s Info) (to string, ok bool)
	// Refuse returns why the editor may not put a session in mode, or ""
	// to let its request through.
	Refuse(s Info, mode string) string
	// Switched is told of each switch the broker made, from and to which
	// mode, and why it failed (nil when the agent is now in mode to). It
	// returns what the user is told of it in the editor.
	Switched(s Info, from, to string, failure error) (title, description string)
}

// modeSwitches is the broker's side of ModeGuard: the switches it sent the
// agent, the agent's output held behind a session set-up response until its
// switch is answered, and the editor's messages held until the sessions they
// name are out of the blind modes.
type modeSwitches struct {
	// relay is held while one agent message is relayed, so that a switch
	// the agent leaves unanswered can be ended from a timer without
	// racing the relay.
	relay sync.Mutex
	// send orders the editor's messages to the agent, held or not; mu is
	// never held while writing, so that reading the agent never waits for
	// a write to it.
	send sync.Mutex
	mu   sync.Mutex
	// pending are the broker's own switch requests to the agent, by id.
	pending map[string]*modeSwitch
	// holding is the switch whose session set-up response is held; every
	// agent message read after it waits in held, in order. isHolding is
	// set meanwhile, so that the agent's streamed updates cost one atomic
	// load otherwise.
	holding   *modeSwitch
	isHolding atomic.Bool
	held      [][]byte
	// setups are the editor's session set-up requests the agent has not
	// answered, by id: the session they name, "" for session/new and fork.
	setups map[string]string
	// switching are the sessions with a switch in flight.
	switching map[string]bool
	// waiting are the editor's messages held back, in order.
	waiting []waitingFrame
	// told are the sessions the user was told about.
	told map[string]bool
}

// switchAnswerNote marks, in the trace, the agent's answer to a switch of
// the broker's.
const switchAnswerNote = "the answer to the broker's mode switch"

// heldResponseNote marks, in the trace, a session set-up response held
// until the broker's switch is answered; it is traced again when relayed.
const heldResponseNote = "held until the agent answers the broker's mode switch"

// switchTimeout bounds the wait for the agent's answer to a switch: after
// it the switch counts as failed (every request of the session is then
// asked) and what it held goes on.
const switchTimeout = 10 * time.Second

type modeSwitch struct {
	session  Info
	from, to string
	method   string // session/set_mode or session/set_config_option
	// response is the session set-up response held for it, nil for a
	// switch after a later mode update.
	response []byte
}

type waitingFrame struct {
	session string // the session the message names, "" for none
	setup   string // for a session set-up request: its id key
	target  string // the session a set-up request names ("" for new, fork)
	// modeChange is set for a session/set_mode or set_config_option: it may
	// name a session not known when it was read (right behind its
	// session/load), so the guard judges it again once it may go.
	modeChange bool
	dir        string
	frame      []byte
}

func newModeSwitches() *modeSwitches {
	return &modeSwitches{pending: map[string]*modeSwitch{}, setups: map[string]string{}, switching: map[string]bool{}, told: map[string]bool{}}
}

// watching reports whether the broker follows the agent's modes.
func (b *broker) watching() bool {
	return b.guard != nil && b.guard.Watches(b.tracker.agentName())
}

// refuseModeChange answers an editor's session/set_mode or mode
// session/set_config_option that the guard refuses, and reports whether it
// did: the agent never sees it.
func (b *broker) refuseModeChange(m *jsonrpc.Message) bool {
	why := b.modeChangeRefusal(m)
	if why == "" {
		return false
	}
	sessionID, _ := jsonrpc.String(m.Params, "sessionId")
	b.log.Warn("refused the editor's mode change", "session", sessionID, "reason", why)
	b.trace.record("editor->broker", m.Raw, "refused: "+why)
	b.toEditor("broker->editor", jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidParams, "acp-broker: "+why))
	return true
}

// modeChangeRefusal says why the guard refuses an editor's request to change
// a session's mode, or "" when it does not.
func (b *broker) modeChangeRefusal(m *jsonrpc.Message) string {
	if !modeMethods[m.Method] || !b.watching() {
		return ""
	}
	sessionID, mode, ok := b.tracker.modeChange(m)
	if !ok {
		return ""
	}
	return b.guard.Refuse(b.tracker.info(sessionID), mode)
}

// sendToAgent writes an editor message m (or, with m nil, the broker's
// answer that must follow one) to the agent, or holds it while a session it
// may name is being set up or switched out of a blind mode: no prompt may
// reach the agent while its session is in one. Messages are written in the
// order they came.
func (b *broker) sendToAgent(m *jsonrpc.Message, dir string, frame []byte) error {
	s := b.modes
	s.send.Lock()
	defer s.send.Unlock()
	s.mu.Lock()
	queued := len(s.waiting) > 0
	// With no set-up nor switch in flight, only a set-up request or a mode
	// change is held or noted here, whether the broker follows the agent's
	// modes or not: for any other message the guard need not be asked.
	idle := !queued && len(s.setups) == 0 && len(s.switching) == 0
	s.mu.Unlock()
	if idle && !setsUpOrChangesMode(m) || !queued && !b.watching() {
		return b.toAgent(dir, frame)
	}
	w := waitingFrame{dir: dir, frame: frame}
	if m != nil {
		w.session, _ = jsonrpc.String(m.Params, "sessionId")
		w.modeChange = m.Kind == jsonrpc.Request && modeMethods[m.Method]
		if m.Kind == jsonrpc.Request && SetupMethods[m.Method] {
			w.setup = m.IDKey()
			if m.Method == "session/load" || m.Method == "session/resume" {
				w.target = w.session
			}
		}
	}
	s.mu.Lock()
	if len(s.waiting) > 0 || b.mustWaitLocked(w) {
		w.frame = clone(frame)
		s.waiting = append(s.waiting, w)
		s.mu.Unlock()
		b.trace.record("editor->broker", frame, "held: a session it may name is being switched out of a mode in which the agent decides by itself")
		return nil
	}
	b.registerLocked(w)
	s.mu.Unlock()
	// The session may have become known since readEditor judged the
	// request (its session/load answered meanwhile).
	if w.modeChange && b.refuseHeldModeChange(w.frame, false) {
		return nil
	}
	return b.toAgent(w.dir, w.frame)
}

// setsUpOrChangesMode reports whether m is an editor request sendToAgent
// registers or judges again: a session set-up or a mode change.
func setsUpOrChangesMode(m *jsonrpc.Message) bool {
	return m != nil && m.Kind == jsonrpc.Request && (SetupMethods[m.Method] || modeMethods[m.Method])
}

// mustWaitLocked reports whether an editor message must wait: it names a
// session being loaded or resumed, or switched, or one not opened while a
// new session is being set up (its id is not known yet). The caller holds
// b.modes.mu.
func (b *broker) mustWaitLocked(w waitingFrame) bool {
	s := b.modes
	if w.session == "" {
		return false
	}
	if s.switching[w.session] {
		return true
	}
	for _, target := range s.setups {
		if target == w.session || (target == "" && !b.tracker.info(w.session).Opened) {
			return true
		}
	}
	return false
}

// registerLocked notes a session set-up request about to reach the agent,
// before it does, so that its answer is never read unnoticed. The caller
// holds b.modes.mu.
func (b *broker) registerLocked(w waitingFrame) {
	if w.setup != "" {
		b.modes.setups[w.setup] = w.target
	}
}

// releaseWaiting writes the editor's held messages that need not wait any
// longer, in order, up to the first that still must.
func (b *broker) releaseWaiting() {
	s := b.modes
	s.send.Lock()
	defer s.send.Unlock()
	for {
		s.mu.Lock()
		if len(s.waiting) == 0 || b.mustWaitLocked(s.waiting[0]) {
			s.mu.Unlock()
			return
		}
		w := s.waiting[0]
		s.waiting = s.waiting[1:]
		b.registerLocked(w)
		s.mu.Unlock()
		if w.modeChange && b.refuseHeldModeChange(w.frame, true) {
			continue
		}
		_ = b.toAgent(w.dir, w.frame)
	}
}

// refuseHeldModeChange answers a mode change of the editor's that the guard
// refuses now that the session it names may be known, as readEditor would
// have, and reports whether it did. With queue the answer is queued: the
// caller is one of the agent's readers, and the editor's output is flushed
// after.
func (b *broker) refuseHeldModeChange(frame []byte, queue bool) bool {
	m := reparse(frame)
	why := b.modeChangeRefusal(m)
	if why == "" {
		return false
	}
	b.tracker.forgetRequest(m)
	b.mu.Lock()
	_, unanswered := b.editorPending[m.IDKey()]
	delete(b.editorPending, m.IDKey())
	b.mu.Unlock()
	sessionID, _ := jsonrpc.String(m.Params, "sessionId")
	b.log.Warn("refused the editor's mode change", "session", sessionID, "reason", why)
	b.trace.record("editor->broker", m.Raw, "refused: "+why)
	answer := jsonrpc.NewError(m.ID, jsonrpc.CodeInvalidParams, "acp-broker: "+why)
	switch {
	case !unanswered: // the agent's exit answered it
	case queue:
		b.relayQueuedAs("broker->editor", answer)
	default:
		b.toEditor("broker->editor", answer)
	}
	return true
}

// relayOne relays one message of the agent's, unless holdAgent takes it.
func (b *broker) relayOne(m *jsonrpc.Message, frame []byte) {
	if b.guard != nil {
		b.modes.relay.Lock()
		defer b.modes.relay.Unlock()
	}
	if !b.holdAgent(m, frame) {
		b.relayAgent(m, frame)
	}
}

// holdAgent takes the agent messages that must not be relayed now: the
// answer to a switch of the broker's (never relayed), and everything read
// after a held session set-up response. It reports whether it took m.
func (b *broker) holdAgent(m *jsonrpc.Message, frame []byte) bool {
	if b.guard == nil {
		return false
	}
	s := b.modes
	if m.Kind == jsonrpc.Response && isOwnID(m.ID) {
		s.mu.Lock()
		sw := s.pending[m.IDKey()]
		delete(s.pending, m.IDKey())
		s.mu.Unlock()
		if sw == nil {
			// A switch answered after it timed out still tells the
			// tracker the mode.
			b.trace.record("agent->broker", frame, "dropped: no request of the broker's waits for it")
			b.tracker.agentResponse(m)
			b.tracker.takeModeChanges()
			return true
		}
		b.trace.record("agent->broker", frame, switchAnswerNote)
		b.switchAnswered(sw, reparse(frame), nil)
		return true
	}
	if m.Kind != jsonrpc.Response && !s.isHolding.Load() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.Kind == jsonrpc.Response && len(s.setups) > 0 {
		key := m.IDKey()
		if target, ok := s.setups[key]; ok && target == "" {
			// The new session is named now: the editor's messages for it
			// wait until its mode is settled, from before the tracker
			// opens it.
			if id, ok := jsonrpc.String(m.Result, "sessionId"); ok {
				s.setups[key] = id
			}
		}
	}
	if s.holding == nil {
		return false
	}
	s.held = append(s.held, clone(frame))
	return true
}

// setupAnswered follows the agent's answer to an editor's session set-up
// request, already tracked. It reports whether the answer is held: the
// session is in a mode the broker switches it out of before the editor
// learns of the session.
func (b *broker) setupAnswered(m *jsonrpc.Message, frame []byte) bool {
	if b.guard == nil {
		return false
	}
	key := m.IDKey()
	s := b.modes
	s.mu.Lock()
	target, ok := s.setups[key]
	s.mu.Unlock()
	if !ok {
		return false
	}
	// The set-up stays in flight until the switch is: an editor message
	// for the session read meanwhile waits.
	defer func() {
		s.mu.Lock()
		delete(s.setups, key)
		s.mu.Unlock()
		b.releaseWaiting()
	}()
	sessionID := target
	if m.Result == nil || sessionID == "" {
		return false
	}
	if b.startSwitch(b.tracker.info(sessionID), frame) == nil {
		return false
	}
	b.trace.record("agent->broker", frame, heldResponseNote)
	return true
}

// modeUpdated follows a later report of a session's mode by the agent (a
// current_mode_update or config_option_update, already relayed): a session
// back in a blind mode is switched again.
func (b *broker) modeUpdated(sessionID string) {
	if b.guard == nil {
		return
	}
	b.startSwitch(b.tracker.info(sessionID), nil)
}

// startSwitch sends the agent the broker's own session/set_mode (or
// session/set_config_option, where the mode is a config option) when the
// guard wants the session out of its mode. response, if not nil, is the
// session set-up response to hold until the agent answers.
func (b *broker) startSwitch(info Info, response []byte) *modeSwitch {
	if !info.Opened || !b.watching() {
		return nil
	}
	s := b.modes
	s.mu.Lock()
	if s.switching[info.ID] {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	to, ok := b.guard.Switch(info)
	if !ok {
		return nil
	}
	b.mu.Lock()
	id := b.ownIDLocked()
	b.mu.Unlock()
	method, params := "session/set_mode", any(map[string]string{"sessionId": info.ID, "modeId": to})
	if info.ModeConfigID != "" {
		method = "session/set_config_option"
		p := map[string]string{"sessionId": info.ID, "configId": info.ModeConfigID, "value": to}
		if b.tracker.protocolVersion() >= 2 {
			p["type"] = "id" // ACP v2 tags a select value
		}
		params = p
	}
	frame, err := jsonrpc.NewRequest(id, method, params)
	if err != nil {
		return nil
	}
	req := reparse(frame)
	sw := &modeSwitch{session: info, from: info.AgentMode, to: to, method: method}
	if response != nil {
		sw.response = clone(response)
	}
	s.mu.Lock()
	s.switching[info.ID] = true
	s.pending[req.IDKey()] = sw
	if response != nil {
		s.holding = sw
		s.isHolding.Store(true)
	}
	s.mu.Unlock()
	b.tracker.editorRequest(req) // its answer tells the tracker the mode, as an editor's would
	b.log.Info("switching the agent out of a mode in which it decides by itself", "session", info.ID, "from", shownMode(info.AgentMode), "to", to)
	if err := b.toAgent("broker->agent", frame); err != nil {
		s.mu.Lock()
		delete(s.pending, req.IDKey())
		s.mu.Unlock()
		b.switchAnswered(sw, nil, errors.New("the agent could not be sent the request"))
		return nil
	}
	time.AfterFunc(switchTimeout, func() { b.switchTimedOut(req.IDKey(), sw) })
	return sw
}

// switchTimedOut ends a switch the agent has not answered in time.
func (b *broker) switchTimedOut(key string, sw *modeSwitch) {
	s := b.modes
	s.relay.Lock()
	defer s.relay.Unlock()
	s.mu.Lock()
	waiting := s.pending[key] == sw
	delete(s.pending, key)
	s.mu.Unlock()
	if waiting {
		b.switchAnswered(sw, nil, fmt.Errorf("the agent did not answer within %v", switchTimeout))
		b.flushEditor()
	}
}

// switchAnswered ends a switch: the agent answered (m), or it failed
// without an answer (m nil, and failure says why). The user is told; a held
// session set-up response goes to the editor, then the agent messages held
// behind it, and the editor's messages for the session go to the agent.
func (b *broker) switchAnswered(sw *modeSwitch, m *jsonrpc.Message, failure error) {
	if m != nil && m.Result == nil {
		failure = fmt.Errorf("the agent answered %s", brief(m.Error))
	}
	if m != nil {
		b.tracker.agentResponse(m)
		// What the answer says of the mode is judged here, not switched
		// from again.
		b.tracker.takeModeChanges()
	}
	info := b.tracker.info(sw.session.ID)
	if failure == nil && info.AgentMode != sw.to {
		if _, still := b.guard.Switch(info); still {
			failure = fmt.Errorf("the agent still reports mode %s", shownMode(info.AgentMode))
		}
	}
	if failure != nil {
		b.log.Warn("could not switch the agent out of a mode in which it decides by itself; every request of the session is asked", "session", sw.session.ID, "mode", shownMode(sw.from), "err", failure)
	}
	title, description := b.guard.Switched(info, sw.from, sw.to, failure)

	s := b.modes
	s.mu.Lock()
	delete(s.switching, sw.session.ID)
	var held [][]byte
	if s.holding == sw {
		s.holding, held, s.held = nil, s.held, nil
		s.isHolding.Store(false)
	}
	tell := !s.told[sw.session.ID]
	if len(s.told) >= MaxOpenSessions {
		// Bounded like the sessions themselves: at worst a user is told
		// twice.
		clear(s.told)
	}
	s.told[sw.session.ID] = true
	s.mu.Unlock()

	if sw.response != nil {
		b.relayQueued(sw.response)
	}
	if failure == nil {
		b.showMode(sw, m)
	}
	if tell && title != "" {
		b.tellUser(sw.session.ID, failure != nil, title, description)
	}
	b.releaseWaiting()
	for _, frame := range held {
		m := reparse(frame)
		if b.holdAgent(m, frame) {
			continue
		}
		b.relayAgent(m, frame)
	}
}

// showMode tells the editor the mode the agent agreed to, since the
// agent's answer goes to the broker alone and not every agent announces the
// change itself (Gemini CLI does not; Claude Code's answer to a
// set_config_option is the only place with the updated options): a
// config_option_update with the options the answer lists, else a
// current_mode_update (ACP v1; v2 has no modes).
func (b *broker) showMode(sw *modeSwitch, m *jsonrpc.Message) {
	var update any
	if options, ok := jsonrpc.Field(m.Result, "configOptions"); ok && sw.method == "session/set_config_option" && jsonrpc.Strict(options) == nil {
		update = map[string]any{"sessionUpdate": "config_option_update", "configOptions": json.RawMessage(clone(options))}
	} else if b.tracker.protocolVersion() < 2 {
		update = map[string]string{"sessionUpdate": "current_mode_update", "currentModeId": sw.to}
	} else {
		return
	}
	frame, err := jsonrpc.NewNotification("session/update", map[string]any{"sessionId": sw.session.ID, "update": update})
	if err != nil {
		return
	}
	b.trace.record("broker->editor", frame, "")
	if b.editor.Queue(frame) != nil {
		b.markEditorGone()
	}
}

// abandonSwitches ends every switch still unanswered when the agent's
// output ends, so that a held response still reaches the editor.
func (b *broker) abandonSwitches() {
	if b.guard == nil {
		return
	}
	s := b.modes
	s.relay.Lock()
	defer s.relay.Unlock()
	s.mu.Lock()
	var open []*modeSwitch
	for id, sw := range s.pending {
		open = append(open, sw)
		delete(s.pending, id)
	}
	s.mu.Unlock()
	for _, sw := range open {
		b.switchAnswered(sw, nil, errors.New("the agent's output ended"))
	}
}

// relayQueued queues an agent frame for the editor, as readAgent does.
func (b *broker) relayQueued(frame []byte) { b.relayQueuedAs("agent->editor", frame) }

// relayQueuedAs queues a frame for the editor, traced as dir.
func (b *broker) relayQueuedAs(dir string, frame []byte) {
	b.trace.record(dir, frame, "")
	if b.editor.Queue(frame) != nil {
		b.markEditorGone()
	}
}

// tellUser shows the user what the broker did to a session's mode: a
// notice where the editor takes notices, else an agent message (see
// userMessage).
func (b *broker) tellUser(sessionID string, warning bool, title, description string) {
	severity := "info"
	if warning {
		severity = "warning"
	}
	frame, err := b.userMessage(sessionID, severity, title, description, title+": "+description+"\n")
	if err != nil {
		return
	}
	b.trace.record("broker->editor", frame, "")
	if b.editor.Queue(frame) != nil {
		b.markEditorGone()
	}
}

func shownMode(mode string) string {
	if mode == AmbiguousMode {
		return "(reported ambiguously)"
	}
	return strconv.Quote(mode)
}
