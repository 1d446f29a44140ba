package session

import (
	"encoding/json"
	"maps"
	"slices"
	"sync"

	"github.com/acp-broker/acp-broker/jsonrpc"
)

// Limits that keep the tracker's memory bounded whatever the peers do.
const (
	// MaxToolCallsPerSession caps the unfinished tool calls remembered for one
	// session; the oldest is dropped first. An agent that never reports its
	// tool calls finished cannot grow the broker without bound.
	MaxToolCallsPerSession = 1024
	// MaxSessions caps the sessions remembered; the least recently used is
	// dropped first.
	MaxSessions = 1024
)

// Info is what the broker knows of one ACP session.
type Info struct {
	ID                    string
	Cwd                   string
	AdditionalDirectories []string
	// MCPServers are the servers the editor passed, each exactly as sent.
	MCPServers []json.RawMessage
}

// ToolCall is the merged view of one tool call: every field the agent sent
// for it, in tool_call and tool_call_update notifications and in the
// permission request itself, later values replacing earlier ones as ACP
// specifies. Values stay raw so fields newer than this code survive.
type ToolCall struct {
	ID     string
	Fields map[string]json.RawMessage
	// Ambiguous is set when any message about this tool call carried a
	// member twice or in two letter cases: what the editor saw may differ from
	// what the broker read, so the call must not be decided automatically.
	Ambiguous bool
}

// String returns a string field of the tool call, or "" when it is absent or
// not a string.
func (t *ToolCall) String(name string) string {
	var s string
	if raw, ok := t.Fields[name]; ok {
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
	}
	return s
}

func (t *ToolCall) clone() *ToolCall {
	if t == nil {
		return nil
	}
	return &ToolCall{ID: t.ID, Fields: maps.Clone(t.Fields), Ambiguous: t.Ambiguous}
}

// merge applies a ToolCall or ToolCallUpdate object to the view.
func (t *ToolCall) merge(fields map[string]json.RawMessage) {
	for k, v := range fields {
		t.Fields[k] = v
	}
}

// Agent is what initialize told the broker about the two peers.
type Agent struct {
	ProtocolVersion    json.RawMessage
	ClientCapabilities json.RawMessage
	ClientInfo         json.RawMessage
	AgentCapabilities  json.RawMessage
	AgentInfo          json.RawMessage
}

type sessionState struct {
	info      Info
	toolCalls map[string]*ToolCall
	order     []string // tool call ids, oldest first
	lastUsed  uint64
}

// tracker follows sessions and tool calls from the messages passing through.
// It reads copies of what it needs and never changes a message; a message it
// cannot read is simply not tracked.
type tracker struct {
	mu       sync.Mutex
	agent    Agent
	sessions map[string]*sessionState
	clock    uint64
	// requests maps editor request ids to the tracked requests awaiting the
	// agent's response.
	requests map[string]trackedRequest
}

type trackedRequest struct {
	method string
	params json.RawMessage
}

func newTracker() *tracker {
	return &tracker{sessions: make(map[string]*sessionState), requests: make(map[string]trackedRequest)}
}

// sessionMethods are the editor requests whose params and response describe a
// session. The unstable session/fork answers with a new session like
// session/new does.
var sessionMethods = map[string]bool{
	"session/new": true, "session/load": true, "session/resume": true, "session/fork": true,
	"session/close": true, "initialize": true,
}

// editorRequest notes a request from the editor whose response it needs.
func (t *tracker) editorRequest(m *jsonrpc.Message) {
	if !sessionMethods[m.Method] {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.requests[m.IDKey()] = trackedRequest{method: m.Method, params: clone(m.Params)}
	if m.Method == "initialize" {
		t.agent.ProtocolVersion, _ = fieldCopy(m.Params, "protocolVersion")
		t.agent.ClientCapabilities, _ = fieldCopy(m.Params, "clientCapabilities")
		t.agent.ClientInfo, _ = fieldCopy(m.Params, "clientInfo")
	}
}

// agentResponse completes a tracked request with the agent's response.
func (t *tracker) agentResponse(m *jsonrpc.Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.requests) == 0 {
		return
	}
	key := m.IDKey()
	req, ok := t.requests[key]
	if !ok {
		return
	}
	delete(t.requests, key)
	if m.Result == nil {
		return // the request failed: nothing changed
	}
	switch req.method {
	case "initialize":
		if v, ok := fieldCopy(m.Result, "protocolVersion"); ok {
			t.agent.ProtocolVersion = v
		}
		t.agent.AgentCapabilities, _ = fieldCopy(m.Result, "agentCapabilities")
		t.agent.AgentInfo, _ = fieldCopy(m.Result, "agentInfo")
	case "session/close":
		if id, ok := jsonrpc.String(req.params, "sessionId"); ok {
			delete(t.sessions, id)
		}
	default:
		id, ok := jsonrpc.String(m.Result, "sessionId")
		if !ok {
			id, ok = jsonrpc.String(req.params, "sessionId")
		}
		if !ok {
			return
		}
		info := Info{ID: id}
		info.Cwd, _ = jsonrpc.String(req.params, "cwd")
		if raw, ok := jsonrpc.Field(req.params, "additionalDirectories"); ok {
			_ = json.Unmarshal(raw, &info.AdditionalDirectories)
		}
		if raw, ok := jsonrpc.Field(req.params, "mcpServers"); ok {
			_ = json.Unmarshal(raw, &info.MCPServers)
		}
		s := t.session(id)
		s.info = info
	}
}

// session returns the state of a session, creating it if needed. The caller
// holds t.mu.
func (t *tracker) session(id string) *sessionState {
	t.clock++
	s, ok := t.sessions[id]
	if !ok {
		if len(t.sessions) >= MaxSessions {
			t.evictSession()
		}
		s = &sessionState{info: Info{ID: id}, toolCalls: make(map[string]*ToolCall)}
		t.sessions[id] = s
	}
	s.lastUsed = t.clock
	return s
}

func (t *tracker) evictSession() {
	var oldest string
	var at uint64
	for id, s := range t.sessions {
		if oldest == "" || s.lastUsed < at {
			oldest, at = id, s.lastUsed
		}
	}
	delete(t.sessions, oldest)
}

// update follows a session/update notification from the agent. Only
// tool_call and tool_call_update are decoded; every other update, however
// large, is passed over after reading its type.
func (t *tracker) update(params json.RawMessage) {
	switch kind, _ := jsonrpc.String(params, "update", "sessionUpdate"); kind {
	case "tool_call", "tool_call_update":
	default:
		return
	}
	upd, ok := jsonrpc.Field(params, "update")
	if !ok {
		return
	}
	sessionID, ok := jsonrpc.String(params, "sessionId")
	if !ok {
		return
	}
	t.mergeToolCall(sessionID, upd)
}

// mergeToolCall merges a ToolCall or ToolCallUpdate object into the session's
// view and returns a copy of the result.
func (t *tracker) mergeToolCall(sessionID string, obj json.RawMessage) *ToolCall {
	fields, err := jsonrpc.Members(obj)
	ambiguous := err != nil
	if ambiguous {
		fields = nil
	}
	id, _ := jsonrpc.String(obj, "toolCallId")
	if id == "" {
		return nil
	}
	delete(fields, "sessionUpdate")
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.session(sessionID)
	tc, ok := s.toolCalls[id]
	if !ok {
		if len(s.order) >= MaxToolCallsPerSession {
			delete(s.toolCalls, s.order[0])
			s.order = slices.Delete(s.order, 0, 1)
		}
		tc = &ToolCall{ID: id, Fields: make(map[string]json.RawMessage)}
		s.toolCalls[id] = tc
		s.order = append(s.order, id)
	}
	tc.merge(cloneFields(fields))
	tc.Ambiguous = tc.Ambiguous || ambiguous
	view := tc.clone()
	if status := tc.String("status"); status == "completed" || status == "failed" {
		delete(s.toolCalls, id)
		s.order = slices.DeleteFunc(s.order, func(x string) bool { return x == id })
	}
	return view
}

// intercepted returns what is known of an intercepted request's session and,
// for a permission request, merges its toolCall into the session's view and
// returns the result.
func (t *tracker) intercepted(method string, params json.RawMessage) (Info, *ToolCall) {
	sessionID, _ := jsonrpc.String(params, "sessionId")
	if sessionID == "" {
		return Info{}, nil
	}
	info := t.info(sessionID)
	if method == "session/request_permission" {
		if tc, ok := jsonrpc.Field(params, "toolCall"); ok {
			return info, t.mergeToolCall(sessionID, tc)
		}
	}
	return info, nil
}

// info returns a copy of what is known of a session.
func (t *tracker) info(sessionID string) Info {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.sessions[sessionID]
	if !ok {
		return Info{ID: sessionID}
	}
	info := s.info
	info.AdditionalDirectories = slices.Clone(info.AdditionalDirectories)
	info.MCPServers = slices.Clone(info.MCPServers)
	return info
}

// toolCall returns a copy of the merged view of one tool call, or nil.
func (t *tracker) toolCall(sessionID, toolCallID string) *ToolCall {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.sessions[sessionID]; ok {
		return s.toolCalls[toolCallID].clone()
	}
	return nil
}

func (t *tracker) agentInfo() Agent {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.agent
}

// counts reports how many sessions and tool calls are tracked, for tests of
// the memory bounds.
func (t *tracker) counts() (sessions, toolCalls int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.sessions {
		toolCalls += len(s.toolCalls)
	}
	return len(t.sessions), toolCalls
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

func fieldCopy(obj json.RawMessage, key string) (json.RawMessage, bool) {
	v, ok := jsonrpc.Field(obj, key)
	return clone(v), ok
}

// cloneFields copies field values out of a frame buffer the reader reuses.
func cloneFields(fields map[string]json.RawMessage) map[string]json.RawMessage {
	for k, v := range fields {
		fields[k] = clone(v)
	}
	return fields
}
