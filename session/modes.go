package session

import (
	"bytes"
	"encoding/json"
	"sync/atomic"

	"github.com/acp-broker/acp-broker/jsonrpc"
)

// AmbiguousMode is the mode recorded when the agent reported a session's
// mode in a message peers may read differently (a member repeated, or two
// spelled alike but for case): the mode may be any of them.
const AmbiguousMode = "\x00ambiguous"

// agentMode is what the agent last said of a session's own permission mode:
// ACP's session modes (modes.currentModeId, current_mode_update,
// session/set_mode) and the session config option of category "mode"
// (configOptions, config_option_update, session/set_config_option), which
// ACP v2 keeps alone.
type agentMode struct {
	id string // "" while the agent has said nothing
	// configID is the id of the session's mode config option, "" when the
	// agent offers none: the broker then switches with session/set_mode.
	configID string
}

// modeMethods are the requests, of the editor's or the broker's own, that
// change a session's mode once the agent answers them successfully.
var modeMethods = map[string]bool{"session/set_mode": true, "session/set_config_option": true}

// modeReport reads what a session set-up response, a set_config_option
// response or a current_mode_update / config_option_update says of the
// session's mode: modes.currentModeId or currentModeId, and the configOptions
// entry of category "mode" (its currentValue; its id, "configId" in ACP v2).
// A config option, where there is one, says the mode: it is what ACP v2
// keeps, and real agents give both the same value. found is false when obj
// says nothing of the mode.
func modeReport(obj json.RawMessage) (m agentMode, found bool) {
	if isEmptyObject(obj) {
		return agentMode{}, false // most answers to a mode change
	}
	if jsonrpc.Strict(obj) != nil {
		return agentMode{id: AmbiguousMode}, true
	}
	var v struct {
		Modes *struct {
			CurrentModeID *string `json:"currentModeId"`
		} `json:"modes"`
		CurrentModeID *string `json:"currentModeId"`
		ConfigOptions []struct {
			ID           string          `json:"id"`
			ConfigID     string          `json:"configId"`
			Category     *string         `json:"category"`
			CurrentValue json.RawMessage `json:"currentValue"`
		} `json:"configOptions"`
	}
	if json.Unmarshal(obj, &v) != nil {
		// A report of the mode the broker cannot read may be of any mode.
		if hasModeMember(obj) {
			return agentMode{id: AmbiguousMode}, true
		}
		return agentMode{}, false
	}
	switch {
	case v.Modes != nil && v.Modes.CurrentModeID != nil:
		m.id, found = *v.Modes.CurrentModeID, true
	case v.CurrentModeID != nil:
		m.id, found = *v.CurrentModeID, true
	}
	for _, o := range v.ConfigOptions {
		if o.Category == nil || *o.Category != "mode" {
			continue
		}
		m.configID = o.ID
		if m.configID == "" {
			m.configID = o.ConfigID
		}
		var value string
		if json.Unmarshal(o.CurrentValue, &value) != nil {
			value = AmbiguousMode
		}
		m.id, found = value, true
		break
	}
	return m, found
}

// isEmptyObject reports whether v is {}, with nothing but JSON's white
// space in or around it.
func isEmptyObject(v json.RawMessage) bool {
	const space = " \t\r\n"
	v = bytes.Trim(v, space)
	return len(v) >= 2 && v[0] == '{' && v[len(v)-1] == '}' && len(bytes.Trim(v[1:len(v)-1], space)) == 0
}

func hasModeMember(obj json.RawMessage) bool {
	for _, name := range []string{"modes", "currentModeId", "configOptions"} {
		if _, ok := jsonrpc.Field(obj, name); ok {
			return true
		}
	}
	return false
}

// modeReported records what a message of the agent's says of a session's
// mode. The caller holds t.mu.
func (t *tracker) modeReportedLocked(sessionID string, obj json.RawMessage) {
	m, found := modeReport(obj)
	if !found || sessionID == "" {
		return
	}
	s := t.session(sessionID)
	if m.configID == "" {
		m.configID = s.mode.configID
	}
	s.mode = m
	t.noteModeLocked(sessionID)
}

// noteModeLocked records that the agent reported a session's mode, for
// takeModeChanges. The caller holds t.mu.
func (t *tracker) noteModeLocked(sessionID string) {
	if len(t.modesChanged.sessions) < MaxUnknownSessions {
		t.modesChanged.sessions = append(t.modesChanged.sessions, sessionID)
	}
	t.modesChanged.changed.Store(true)
}

// modeUpdate follows a current_mode_update or config_option_update.
func (t *tracker) modeUpdate(sessionID string, upd json.RawMessage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.modeReportedLocked(sessionID, upd)
}

// modeAnswered follows the agent's successful answer to a session/set_mode
// or session/set_config_option: the mode the request asked for, unless the
// answer's configOptions say otherwise. The caller holds t.mu.
func (t *tracker) modeAnsweredLocked(req trackedRequest, result json.RawMessage) {
	sessionID, _ := jsonrpc.String(req.params, "sessionId")
	if sessionID == "" {
		return
	}
	if _, found := modeReport(result); found {
		t.modeReportedLocked(sessionID, result)
		return
	}
	s := t.session(sessionID)
	if jsonrpc.Strict(req.params) != nil {
		s.mode.id = AmbiguousMode
		t.noteModeLocked(sessionID)
		return
	}
	switch req.method {
	case "session/set_mode":
		if id, ok := jsonrpc.String(req.params, "modeId"); ok {
			s.mode.id = id
			t.noteModeLocked(sessionID)
		}
	case "session/set_config_option":
		if id, ok := jsonrpc.String(req.params, "configId"); ok && id != "" && id == s.mode.configID {
			value, ok := jsonrpc.String(req.params, "value")
			if !ok {
				value = AmbiguousMode
			}
			s.mode.id = value
			t.noteModeLocked(sessionID)
		}
	}
}

// modeChange returns the mode an editor's request asks the agent to put its
// session in: session/set_mode's modeId, or the value of a
// session/set_config_option on the session's mode config option. ok is
// false for any other request.
func (t *tracker) modeChange(m *jsonrpc.Message) (sessionID, mode string, ok bool) {
	if !modeMethods[m.Method] {
		return "", "", false
	}
	sessionID, _ = jsonrpc.String(m.Params, "sessionId")
	if jsonrpc.Strict(m.Params) != nil {
		// The agent may read another mode than the broker would.
		return sessionID, AmbiguousMode, true
	}
	if m.Method == "session/set_mode" {
		mode, ok = jsonrpc.String(m.Params, "modeId")
		return sessionID, mode, ok
	}
	configID, _ := jsonrpc.String(m.Params, "configId")
	t.mu.Lock()
	s, known := t.opened[sessionID]
	isMode := known && configID != "" && configID == s.mode.configID
	t.mu.Unlock()
	if !isMode {
		return "", "", false
	}
	mode, ok = jsonrpc.String(m.Params, "value")
	return sessionID, mode, ok
}

// forgetRequest drops an editor request that was tracked but never reached
// the agent: an answer with its id tells nothing.
func (t *tracker) forgetRequest(m *jsonrpc.Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.requests, m.IDKey())
}

// agentNameLocked is the agentInfo.name the agent's initialize response
// gave. The caller holds t.mu.
func (t *tracker) agentNameLocked() string { return t.agentInfoName }

// modeChanges counts the sessions whose mode the agent reported, for the
// broker to check after each message; changed is set when there are any,
// so that a message that reports none costs one atomic load.
type modeChanges struct {
	changed  atomic.Bool
	sessions []string
}

// takeModeChanges returns the sessions whose mode the agent reported since
// the last call.
func (t *tracker) takeModeChanges() []string {
	if !t.modesChanged.changed.Load() {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.modesChanged.sessions
	t.modesChanged.sessions = nil
	t.modesChanged.changed.Store(false)
	return out
}

// agentName is the agentInfo.name of the agent's initialize response.
func (t *tracker) agentName() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.agentNameLocked()
}

// protocolVersion is the protocol version initialize agreed on, 0 if none.
func (t *tracker) protocolVersion() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var v float64
	_ = json.Unmarshal(t.agent.ProtocolVersion, &v)
	return v
}

// clientSupportsNotices reports whether the editor advertised
// clientCapabilities.session.notices.
func (t *tracker) clientSupportsNotices() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := jsonrpc.Field(t.agent.ClientCapabilities, "session", "notices")
	return ok && !jsonrpc.IsNull(v)
}
