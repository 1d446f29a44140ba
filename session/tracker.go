package session

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/acp-broker/acp-broker/internal/shellwrap"
	"github.com/acp-broker/acp-broker/jsonrpc"
)

// Limits that keep the tracker's memory bounded whatever the peers do.
const (
	// MaxToolCallsPerSession caps the unfinished tool calls remembered for one
	// session; the oldest is dropped first. An agent that never reports its
	// tool calls finished cannot grow the broker without bound.
	MaxToolCallsPerSession = 1024
	// MaxOpenSessions caps the sessions the editor opened and has not
	// closed: far more than an editor opens in one connection. Only the
	// editor's opening another session beyond it drops one (the one opened
	// longest ago); the agent's traffic never does.
	MaxOpenSessions = 16384
	// MaxUnknownSessions caps the sessions the agent's updates name that the
	// editor did not open; the least recently used is dropped first. They
	// are kept apart, so that a flood of invented session ids can only push
	// out other invented ones.
	MaxUnknownSessions = 1024
	// MaxForgottenToolCalls caps the hashed ids of dropped tool calls
	// remembered for one opened session, so that a request about one is
	// not decided; beyond it, no request about an untracked tool call of
	// the session is.
	MaxForgottenToolCalls = 4096
)

// Info is what the broker knows of one ACP session.
type Info struct {
	ID string
	// Opened is set when the editor opened the session in this connection
	// (a successful session/new, load, resume or fork) and has not closed
	// it. Cwd, AdditionalDirectories and MCPServers are known only then.
	Opened                bool
	Cwd                   string
	AdditionalDirectories []string
	// MCPServers are the servers the editor passed, each exactly as sent.
	MCPServers []json.RawMessage

	// Parent is set for a subagent's session that the agent announced
	// (see subagents.go): the session whose subagent_update announced it.
	// Root is then the session the editor opened that it descends from;
	// Cwd, AdditionalDirectories and MCPServers are the root's, and its
	// rules, mode and remembered answers apply. WorkDir and WorkDirs are
	// where the child works: its cwd and additionalDirectories as
	// announced, else its parent's.
	Parent, Root string
	WorkDir      string
	WorkDirs     []string
	// Unreadable says why nothing of the session is decided: an
	// announcement of a subagent's session the broker could not read
	// exactly, or an id the agent gave a new session that was in use.
	Unreadable string
	// Agent is the agent's agentInfo.name from initialize.
	Agent string
	// AgentMode is the session's mode as the agent last reported it (see
	// modes.go), "" when it reported none; ModeConfigID is the id of its
	// mode config option, "" when it has none.
	AgentMode    string
	ModeConfigID string
}

// Known reports whether the session's directories are known: the editor
// opened it, or it is a subagent's session of one that it opened.
func (i Info) Known() bool { return i.Opened || i.Root != "" }

// RulesSession is the session whose answers remembered for one session
// apply: the session itself, or a subagent's session's root.
func (i Info) RulesSession() string {
	if i.Root != "" {
		return i.Root
	}
	return i.ID
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
	// Disagreements lists where the permission request's own toolCall says
	// something else than the agent announced for the tool call (its kind,
	// input, locations, content or tool name): what runs may be what was
	// announced, so the call must not be allowed automatically.
	Disagreements []string
	// Announced is, when there are Disagreements, what the agent's updates
	// announced of the tool call: what may run instead of what the request
	// shows, so that a deny rule sees it too.
	Announced map[string]json.RawMessage

	// announced is what session/update notifications said of the tool
	// call, merged; a permission request's own toolCall is merged into
	// Fields (what the editor shows now) but not here, so that a request
	// becomes neither the announcement the next request about the same
	// tool call is checked against nor what fills in what that request
	// leaves out (see mergeToolCall).
	announced map[string]json.RawMessage
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
	// Disagreements and Announced belong to the view a request is judged
	// on (mergeToolCall sets them there), never to the tracked tool call.
	return &ToolCall{ID: t.ID, Fields: maps.Clone(t.Fields), Ambiguous: t.Ambiguous}
}

// merge applies a ToolCall or ToolCallUpdate object to the view. A field
// given as null is left as it was: ACP and its SDKs read null in an update
// as "unchanged", so it must not erase what the editor still shows.
func (t *ToolCall) merge(fields map[string]json.RawMessage) { mergeFields(t.Fields, fields) }

func mergeFields(into, fields map[string]json.RawMessage) {
	for k, v := range fields {
		if !jsonrpc.IsNull(v) {
			into[k] = v
		}
	}
}

// whatItDoes are the tool call fields that say what the tool does; a
// permission request must not contradict the agent's announcement of them.
var whatItDoes = []string{"kind", "rawInput", "locations", "content"}

// disagreements compares a permission request's toolCall (fields) with
// what the agent's updates announced. A field the announcement left empty
// ({}, [], "") may be filled in; one it gave may only be repeated (see
// agrees).
func (t *ToolCall) disagreements(fields map[string]json.RawMessage) []string {
	var out []string
	for _, k := range whatItDoes {
		announced, ok := t.announced[k]
		asked, given := fields[k]
		if !ok || !given || jsonrpc.IsNull(asked) || placeholder(announced) {
			continue
		}
		if !agrees(announced, asked) {
			out = append(out, fmt.Sprintf("the request's %s (%s) is not what the agent announced for tool call %q (%s)", k, brief(asked), t.ID, brief(announced)))
		}
	}
	if announced := toolName(t.announced); announced != "" {
		merged := maps.Clone(t.announced)
		for k, v := range fields {
			if !jsonrpc.IsNull(v) {
				merged[k] = v
			}
		}
		if asked := toolName(merged); asked != announced {
			out = append(out, fmt.Sprintf("the request names the tool %q, the agent announced %q for tool call %q", asked, announced, t.ID))
		}
	}
	return out
}

// agrees reports whether a request's value repeats an announced one: the
// same JSON value, or, for an object (rawInput), one that repeats every
// announced member with the same value and may add others (agents add a
// reason or a description when they ask). A command agrees with a shell
// started on exactly it (see sameCommand).
func agrees(announced, asked json.RawMessage) bool {
	if canonical(announced) == canonical(asked) {
		return true
	}
	was, err1 := jsonrpc.Members(announced)
	is, err2 := jsonrpc.Members(asked)
	if err1 != nil || err2 != nil || was == nil || is == nil {
		return false
	}
	for k, v := range was {
		if jsonrpc.IsNull(v) {
			continue
		}
		if w, ok := is[k]; !ok || (canonical(v) != canonical(w) && !(k == "command" && sameCommand(v, w))) {
			return false
		}
	}
	return true
}

// sameCommand reports whether one command only starts a shell, -c or -lc,
// on exactly the other (`/bin/bash -lc 'git status'` and "git status"):
// codex-acp 2.6 announces a started command with its shell and asks about
// it with the shell stripped.
func sameCommand(a, b json.RawMessage) bool {
	return shellwrap.Wraps(a, b) || shellwrap.Wraps(b, a)
}

// judgedInput is the rawInput a request is judged on when its command is
// the script of the shell command the agent announced: the request's, with
// the announced command, which is what runs (in its shell's dialect); nil
// when the request's rawInput stands as it is.
func judgedInput(announced, asked json.RawMessage) json.RawMessage {
	was, err1 := jsonrpc.Members(announced)
	is, err2 := jsonrpc.Members(asked)
	if err1 != nil || err2 != nil {
		return nil
	}
	wrapper, command := was["command"], is["command"]
	if wrapper == nil || command == nil || !shellwrap.Wraps(wrapper, command) {
		return nil
	}
	is["command"] = wrapper
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if enc.Encode(is) != nil {
		return nil
	}
	return bytes.TrimSpace(out.Bytes())
}

// toolName is the tool's name as the rules read it: the newer "name" field,
// else Claude Code's _meta.claudeCode.toolName.
func toolName(fields map[string]json.RawMessage) string {
	var name string
	if raw, ok := fields["name"]; ok && json.Unmarshal(raw, &name) == nil && name != "" {
		return name
	}
	var meta struct {
		ClaudeCode struct {
			ToolName string `json:"toolName"`
		} `json:"claudeCode"`
	}
	if raw, ok := fields["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	return meta.ClaudeCode.ToolName
}

// toolCallKey is the tool call id a peer may read in v: the string, or for
// a number the property name a JavaScript editor keys it under (1 and 1.0
// are "1"); "" for anything else.
func toolCallKey(v json.RawMessage) string {
	if s, ok := jsonrpc.Unquote(v); ok {
		return s
	}
	if f, err := strconv.ParseFloat(string(v), 64); err == nil {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return ""
}

// placeholder reports whether an announced value says nothing yet: agents
// announce a tool call with rawInput {} and fill it in later.
func placeholder(v json.RawMessage) bool {
	switch canonical(v) {
	case "null", "{}", "[]", `""`:
		return true
	}
	return false
}

// canonical is a JSON value in one spelling: members sorted, no
// whitespace, numbers as written, and members whose value is null left out
// (an absent optional field and a null one mean the same in ACP).
func canonical(v json.RawMessage) string {
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var x any
	if d.Decode(&x) != nil {
		return string(v) // compared as sent; unreadable values are flagged elsewhere
	}
	b, _ := json.Marshal(dropNulls(x))
	return string(b)
}

func dropNulls(x any) any {
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			if v == nil {
				delete(x, k)
			} else {
				x[k] = dropNulls(v)
			}
		}
	case []any:
		for i, v := range x {
			x[i] = dropNulls(v)
		}
	}
	return x
}

// brief shortens a value for a reason shown to the human.
func brief(v json.RawMessage) string {
	s := canonical(v)
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
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
	lastUsed  uint64   // opened sessions: when opened; unknown ones: last update
	// forgotten holds the ids (hashed, however long they are) of tool
	// calls of an opened session that were dropped, because the agent
	// reported them completed or failed or because there were too many:
	// a request about one of them cannot be checked against what was
	// announced. At most MaxForgottenToolCalls, oldest first in
	// forgottenOrder; overflowed is set once one had to go, after which
	// no request about a tool call not tracked can be checked.
	forgotten      map[[sha256.Size]byte]bool
	forgottenOrder [][sha256.Size]byte
	overflowed     bool
	// dropped is set when a tool call of a session nobody opened was
	// dropped: it is not remembered in forgotten, so a session announced
	// as a subagent's afterwards cannot check any untracked tool call.
	dropped bool
	// child is set for a subagent's session the agent announced.
	child *subagent
	// mode is what the agent said of the session's own mode.
	mode agentMode
}

// forget drops a tool call and, in an opened session, remembers that it
// did.
func (s *sessionState) forget(id string) {
	delete(s.toolCalls, id)
	s.order = slices.DeleteFunc(s.order, func(x string) bool { return x == id })
	if !s.info.Opened && s.child == nil {
		s.dropped = true
		return // nothing of a session the editor did not open is decided
	}
	if s.forgotten == nil {
		s.forgotten = make(map[[sha256.Size]byte]bool)
	}
	if key := sha256.Sum256([]byte(id)); !s.forgotten[key] {
		if len(s.forgottenOrder) >= MaxForgottenToolCalls {
			delete(s.forgotten, s.forgottenOrder[0])
			s.forgottenOrder = s.forgottenOrder[1:]
			s.overflowed = true
		}
		s.forgotten[key] = true
		s.forgottenOrder = append(s.forgottenOrder, key)
	}
}

// mayHaveForgotten reports whether the broker may have dropped what the
// agent announced of a tool call.
func (s *sessionState) mayHaveForgotten(id string) bool {
	return s.overflowed || s.forgotten[sha256.Sum256([]byte(id))]
}

// announcedAnew forgets that a tool call was dropped: the agent announces
// it again.
func (s *sessionState) announcedAnew(id string) {
	if key := sha256.Sum256([]byte(id)); s.forgotten[key] {
		delete(s.forgotten, key)
		s.forgottenOrder = slices.DeleteFunc(s.forgottenOrder, func(x [sha256.Size]byte) bool { return x == key })
	}
}

// tracker follows sessions and tool calls from the messages passing through.
// It reads copies of what it needs and never changes a message; a message it
// cannot read is simply not tracked.
type tracker struct {
	mu    sync.Mutex
	agent Agent
	// agentInfoName is agent.AgentInfo's name, read once: the relay asks
	// for it on every message that may change a session's mode.
	agentInfoName string
	// opened are the sessions the editor opened and has not closed: only the
	// editor adds or removes them.
	opened map[string]*sessionState
	// unknown are the sessions the agent's updates name that the editor did
	// not open (subagents' sessions, or invented ids), bounded apart.
	unknown map[string]*sessionState
	// children are the subagents' sessions the agent announced on sessions
	// the editor opened, or on other children (see subagents.go).
	children map[string]*sessionState
	clock    uint64
	// requests maps editor request ids to the tracked requests awaiting the
	// agent's response.
	requests map[string]trackedRequest
	// modesChanged are the sessions whose mode the agent reported.
	modesChanged modeChanges
}

type trackedRequest struct {
	method string
	params json.RawMessage
}

func newTracker() *tracker {
	return &tracker{opened: make(map[string]*sessionState), unknown: make(map[string]*sessionState), children: make(map[string]*sessionState), requests: make(map[string]trackedRequest)}
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
	if !sessionMethods[m.Method] && !modeMethods[m.Method] {
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
	key := m.IDKey()
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.requests) == 0 {
		return
	}
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
		var version float64
		if json.Unmarshal(t.agent.ProtocolVersion, &version) == nil && version >= 2 {
			// ACP v2 calls it info: without it a v2 agent is one the
			// broker does not know, and its blind mode is kept.
			if info, ok := fieldCopy(m.Result, "info"); ok {
				t.agent.AgentInfo = info
			}
		}
		t.agentInfoName, _ = jsonrpc.String(t.agent.AgentInfo, "name")
	case "session/close":
		if id, ok := jsonrpc.String(req.params, "sessionId"); ok {
			t.endChildren(id)
			delete(t.opened, id)
			delete(t.unknown, id)
			delete(t.children, id)
		}
	case "session/set_mode", "session/set_config_option":
		t.modeAnsweredLocked(req, m.Result)
	default:
		// session/load and session/resume name the session the editor
		// means; session/new and session/fork learn it from the answer.
		var id string
		var ok bool
		if req.method == "session/load" || req.method == "session/resume" {
			id, ok = jsonrpc.String(req.params, "sessionId")
		} else {
			// The agent names the new session: one it names twice, or in
			// another letter case, may be another to the editor.
			var raw json.RawMessage
			if names := jsonrpc.Namesakes(m.Result, "sessionId"); names != nil {
				raw, ok = jsonrpc.Only(names[0], "sessionId")
			}
			if ok {
				id, ok = jsonrpc.Unquote(raw)
			}
		}
		if !ok || id == "" {
			return
		}
		info := Info{ID: id, Opened: true}
		if req.method == "session/new" || req.method == "session/fork" {
			_, open := t.opened[id]
			_, child := t.children[id]
			if open || child {
				// Two sessions the editor tells apart under one id: the
				// agent's requests of either could be judged by the
				// other's directories and rules.
				info.Unreadable = fmt.Sprintf("the agent answered %s with the id of a session already in use (%q)", req.method, id)
			}
		}
		info.Cwd, _ = jsonrpc.String(req.params, "cwd")
		if raw, ok := jsonrpc.Field(req.params, "additionalDirectories"); ok {
			_ = json.Unmarshal(raw, &info.AdditionalDirectories)
		}
		if raw, ok := jsonrpc.Field(req.params, "mcpServers"); ok {
			_ = json.Unmarshal(raw, &info.MCPServers)
		}
		t.open(info)
		t.modeReportedLocked(id, m.Result)
	}
}

// open records a session the editor opened. Tool calls the agent announced
// for it before (session/load replays them before its answer) stay.
func (t *tracker) open(info Info) {
	t.clock++
	s, ok := t.opened[info.ID]
	if !ok {
		s, ok = t.unknown[info.ID]
		delete(t.unknown, info.ID)
	}
	if !ok {
		// The editor opening a subagent's session makes it its own.
		s, ok = t.children[info.ID]
		delete(t.children, info.ID)
	}
	if ok {
		s.child = nil
	}
	if !ok {
		s = &sessionState{toolCalls: make(map[string]*ToolCall)}
	}
	s.info, s.lastUsed = info, t.clock
	t.opened[info.ID] = s
	if len(t.opened) > MaxOpenSessions {
		evictOldest(t.opened)
	}
}

// session returns the state of a session for the agent's traffic: the one
// the editor opened, else an unknown one, created if needed. The caller
// holds t.mu.
func (t *tracker) session(id string) *sessionState {
	if s, ok := t.opened[id]; ok {
		return s
	}
	t.clock++
	if s, ok := t.children[id]; ok {
		s.lastUsed = t.clock
		return s
	}
	s, ok := t.unknown[id]
	if !ok {
		if len(t.unknown) >= MaxUnknownSessions {
			evictOldest(t.unknown)
		}
		s = &sessionState{info: Info{ID: id}, toolCalls: make(map[string]*ToolCall)}
		t.unknown[id] = s
	}
	s.lastUsed = t.clock
	return s
}

func evictOldest(sessions map[string]*sessionState) {
	var oldest string
	var at uint64
	for id, s := range sessions {
		if oldest == "" || s.lastUsed < at {
			oldest, at = id, s.lastUsed
		}
	}
	delete(sessions, oldest)
}

// update follows a session/update notification from the agent. Only
// tool_call and tool_call_update are decoded, and the mode and subagent
// kinds read; an update whose bytes show it can be none of them (see
// mayConcernTracker) is not scanned at all, every other one, however large,
// is passed over after scanning its member names.
//
// A notification whose sessionId, update, sessionUpdate or toolCallId is
// repeated or given in another letter case may mean another tool call, or
// another session, to the editor than to the broker (see
// jsonrpc.Namesakes): every tool call it may name, in every session it may
// name, is then marked Ambiguous, so none of them is decided automatically.
func (t *tracker) update(params json.RawMessage) (ownToolCall bool) {
	if !mayConcernTracker(params) {
		return false
	}
	return t.readUpdate(params)
}

// readUpdate is update for params that may concern the tracker.
func (t *tracker) readUpdate(params json.RawMessage) (ownToolCall bool) {
	// One pass over the params, the update's own members included: a
	// streamed chunk is skipped once.
	top, nested := jsonrpc.NestedNamesakes(params, []string{"sessionId", "update"}, 1, "sessionUpdate", "toolCallId")
	if top == nil {
		return false
	}
	sessions, updates := top[0], top[1]
	sessionRaw, ok1 := jsonrpc.Only(sessions, "sessionId")
	upd, ok2 := jsonrpc.Only(updates, "update")
	if !ok1 || !ok2 {
		return t.ambiguousUpdate(sessions, updates)
	}
	if len(nested) != 1 {
		return false // the update is not an object
	}
	inner := nested[0]
	if namesOwnID(inner[1]) {
		return true
	}
	kindRaw, ok3 := jsonrpc.Only(inner[0], "sessionUpdate")
	idRaw, ok4 := jsonrpc.Only(inner[1], "toolCallId")
	if ok4 {
		_, ok4 = jsonrpc.Unquote(idRaw) // a number is "1" to a JavaScript editor
	}
	if !ok3 || (len(inner[1]) > 0 && !ok4) {
		return t.ambiguousUpdate(sessions, updates)
	}
	sessionID, ok := jsonrpc.Unquote(sessionRaw)
	if !ok {
		return false
	}
	switch kind, _ := jsonrpc.Unquote(kindRaw); kind {
	case "tool_call", "tool_call_update":
	case kindSubagent:
		t.subagentUpdate(sessionID, upd)
		return false
	case kindCurrentMode, kindConfigOption:
		t.modeUpdate(sessionID, upd)
		return false
	default:
		return
	}
	t.mergeToolCall(sessionID, upd, false)
	return false
}

// The update kinds the tracker reads other than the tool calls'.
const (
	kindSubagent     = "subagent_update"
	kindCurrentMode  = "current_mode_update"
	kindConfigOption = "config_option_update"
)

// mayConcernTracker reports whether update may read a session/update's
// params as anything: without it, the update (an agent_message_chunk, most
// often) is relayed without a second pass over its content. It looks for
// the bytes all that the tracker reads must be spelled with, at memory
// speed and without regard to structure, so a false "may" costs only the
// full reading.
//
// Whatever the tracker reads of an update is under a member a peer may take
// for toolCallId, or is one of the other kinds update reads, or is a tool
// call id of the broker's own (which drops the update). Without \u escapes,
// a member name that equals "toolCallId" in any letter case is those ten
// ASCII letters in some case, since no other rune folds to one of them; a
// kind is its bytes as they are (no other escape can spell a letter), and
// so is an id starting with ownIDPrefix.
func mayConcernTracker(params []byte) bool {
	return hasUnicodeEscape(params) ||
		mayNameOwnID(params) ||
		mayNameToolCallID(params) ||
		mayNameKind(params, kindSubagent, kindCurrentMode, kindConfigOption)
}

// The searches below look for an anchor that starts with a byte rare in
// agents' text and check the bytes around it: bytes.Index is many times
// slower for a needle that starts with a frequent byte (a backslash, an "a").

// hasUnicodeEscape reports whether data may hold a \u escape: a u after a
// backslash (which may itself be escaped).
func hasUnicodeEscape(data []byte) bool {
	for i := 1; i < len(data); i++ {
		j := bytes.IndexByte(data[i:], 'u')
		if j < 0 {
			return false
		}
		i += j
		if data[i-1] == '\\' {
			return true
		}
	}
	return false
}

// ownIDAnchor is ownIDPrefix without its first bytes, so that it starts
// with a byte rare in agents' text (see above).
var ownIDAnchor = []byte(ownIDPrefix[len("acp"):])

// mayNameOwnID reports whether data holds ownIDPrefix, unescaped.
func mayNameOwnID(data []byte) bool {
	lead := len(ownIDPrefix) - len(ownIDAnchor)
	for i := 0; ; {
		j := bytes.Index(data[i:], ownIDAnchor)
		if j < 0 {
			return false
		}
		i += j
		if i >= lead && bytes.HasPrefix(data[i-lead:], []byte(ownIDPrefix)) {
			return true
		}
		i++
	}
}

// mayNameToolCallID reports whether data holds, unescaped, a string that
// equals "toolCallId" but for letter case: a member name ends there.
func mayNameToolCallID(data []byte) bool {
	const name = "toolCallId"
	for _, end := range [][]byte{[]byte(`d"`), []byte(`D"`)} {
		for i := 0; ; {
			j := bytes.Index(data[i:], end)
			if j < 0 {
				break
			}
			i += j
			if i+1 >= len(name) && bytes.EqualFold(data[i+1-len(name):i+1], []byte(name)) {
				return true
			}
			i++
		}
	}
	return false
}

// mayNameKind reports whether data holds, unescaped, a string ending with
// one of kinds, which all end in "_update".
func mayNameKind(data []byte, kinds ...string) bool {
	const anchor = `_update"`
	for i := 0; ; {
		j := bytes.Index(data[i:], []byte(anchor))
		if j < 0 {
			return false
		}
		i += j + len(anchor)
		for _, k := range kinds {
			if bytes.HasSuffix(data[:i], []byte(k+`"`)) {
				return true
			}
		}
	}
}

// namesOwnID reports whether any of a tool call's toolCallId namesakes is
// one of the broker's own ids.
func namesOwnID(ids []jsonrpc.Namesake) bool {
	for _, id := range ids {
		if s, ok := jsonrpc.Unquote(id.Value); ok && strings.HasPrefix(s, ownIDPrefix) {
			return true
		}
	}
	return false
}

// ambiguousUpdate marks every tool call a session/update that peers may
// read differently may name, in every session it may name, Ambiguous. It
// reports whether any of them is a tool call of the broker's own, and then
// marks nothing: the broker drops such an update.
func (t *tracker) ambiguousUpdate(sessions, updates []jsonrpc.Namesake) (ownToolCall bool) {
	var ids []string
	for _, upd := range updates {
		names := jsonrpc.Namesakes(upd.Value, "toolCallId")
		if names == nil {
			if bytes.Contains(upd.Value, []byte(ownIDPrefix)) {
				return true // not readable: it may name one
			}
			continue
		}
		if namesOwnID(names[0]) {
			return true
		}
		for _, tc := range names[0] {
			if id := toolCallKey(tc.Value); id != "" {
				ids = append(ids, id)
			}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, sess := range sessions {
		sessionID, ok := jsonrpc.Unquote(sess.Value)
		if !ok {
			continue
		}
		for _, id := range ids {
			t.toolCallLocked(t.session(sessionID), id).Ambiguous = true
		}
	}
	return false
}

// ToolCallFields are the members of ACP's ToolCall and ToolCallUpdate. A
// member whose name differs from one of them only in letter case is that
// member to a peer that folds case (Go's encoding/json, acp-go-sdk) and
// nothing to the broker: a tool call object carrying one is ambiguous.
var ToolCallFields = []string{"toolCallId", "title", "kind", "status", "content", "locations", "rawInput", "rawOutput", "name", "_meta", "sessionUpdate"}

// mergeToolCall merges a ToolCall or ToolCallUpdate object into the session's
// view and returns a copy of the result. fromRequest marks a permission
// request's toolCall, which is checked against what was announced: updates
// may change a tool call, the request asking about it may not.
func (t *tracker) mergeToolCall(sessionID string, obj json.RawMessage, fromRequest bool) *ToolCall {
	fields, err := jsonrpc.ExactMembers(obj, ToolCallFields...)
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
	tc := t.toolCallLocked(s, id)
	fields = cloneFields(fields)
	var disagreements []string
	if fromRequest {
		disagreements = tc.disagreements(fields)
		if len(tc.announced) == 0 && s.mayHaveForgotten(id) {
			disagreements = append(disagreements, fmt.Sprintf("the broker may have forgotten what the agent announced of tool call %q (it reported it finished, or announced too many), so the request cannot be checked against it", id))
		}
	} else {
		s.announcedAnew(id)
		mergeFields(tc.announced, fields)
	}
	tc.merge(fields)
	tc.Ambiguous = tc.Ambiguous || ambiguous
	if !fromRequest {
		// Only the agent's updates end a tool call: a request saying it
		// completed must not make the broker forget what was announced.
		if status := (&ToolCall{Fields: tc.announced}).String("status"); status == "completed" || status == "failed" {
			s.forget(id)
		}
		// Nothing judges an update: no view of it is made.
		return nil
	}
	// A request is judged on the announcement and on what it says itself:
	// what an earlier request said must not fill in what this one leaves
	// out.
	view := &ToolCall{ID: tc.ID, Fields: maps.Clone(tc.announced), Ambiguous: tc.Ambiguous}
	view.merge(fields)
	if input := judgedInput(tc.announced["rawInput"], fields["rawInput"]); input != nil {
		view.Fields["rawInput"] = input
	}
	view.Disagreements = disagreements
	if len(disagreements) > 0 {
		view.Announced = maps.Clone(tc.announced)
	}
	return view
}

// toolCallLocked returns the session's tool call, tracked from now on if
// it was not. The caller holds t.mu.
func (t *tracker) toolCallLocked(s *sessionState, id string) *ToolCall {
	tc, ok := s.toolCalls[id]
	if !ok {
		if len(s.order) >= MaxToolCallsPerSession {
			s.forget(s.order[0])
		}
		tc = &ToolCall{ID: id, Fields: make(map[string]json.RawMessage), announced: make(map[string]json.RawMessage)}
		s.toolCalls[id] = tc
		s.order = append(s.order, id)
	}
	return tc
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
		if tc, ok := PermissionToolCall(params); ok {
			return info, t.mergeToolCall(sessionID, tc, true)
		}
	}
	return info, nil
}

// info returns a copy of what is known of a session: Opened is false for a
// session the editor did not open.
func (t *tracker) info(sessionID string) Info {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.opened[sessionID]
	if !ok {
		if s, ok := t.children[sessionID]; ok {
			return t.childInfo(s)
		}
		return Info{ID: sessionID}
	}
	info := s.info
	info.AdditionalDirectories = slices.Clone(info.AdditionalDirectories)
	info.MCPServers = slices.Clone(info.MCPServers)
	info.Agent = t.agentNameLocked()
	info.AgentMode, info.ModeConfigID = s.mode.id, s.mode.configID
	return info
}

// toolCall returns a copy of the merged view of one tool call, or nil.
func (t *tracker) toolCall(sessionID, toolCallID string) *ToolCall {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.opened[sessionID]
	if !ok {
		s, ok = t.children[sessionID]
	}
	if !ok {
		s, ok = t.unknown[sessionID]
	}
	if ok {
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
	for _, all := range []map[string]*sessionState{t.opened, t.unknown, t.children} {
		for _, s := range all {
			toolCalls += len(s.toolCalls)
		}
	}
	return len(t.opened) + len(t.unknown) + len(t.children), toolCalls
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
