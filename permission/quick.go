package permission

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// humanReaction is the least time a person takes to read a permission
// prompt and answer it. An editor that answers sooner approves (or
// rejects) on its own: avante.nvim's auto_approve_tool_permissions, which
// is on by default, answers every forwarded request with no human.
const humanReaction = 100 * time.Millisecond

// maxQuickSessions bounds the sessions remembered as warned about; beyond
// it the oldest are forgotten (and may be warned about again).
const maxQuickSessions = 4096

// quickAnswers notes the sessions whose editor answered a forwarded
// permission request faster than a person can, so that the warning is
// given once per session. It never changes an answer.
type quickAnswers struct {
	mu     sync.Mutex
	warned map[string]bool
	order  []string
}

// first reports whether this is the session's first quick answer.
func (q *quickAnswers) first(sessionID string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.warned[sessionID] {
		return false
	}
	if q.warned == nil {
		q.warned = map[string]bool{}
	}
	if len(q.order) >= maxQuickSessions {
		delete(q.warned, q.order[0])
		q.order = q.order[1:]
	}
	q.warned[sessionID] = true
	q.order = append(q.order, sessionID)
	return true
}

// editorAnswered is told how long the editor took to choose an option of
// a permission request the broker forwarded; an answer faster than a
// person can give is warned about on stderr and in the audit log, once per
// session, naming the editor: a line of its own in the audit log, beside
// the request's own line.
func (e *Engine) editorAnswered(sessionID string, took time.Duration) {
	if took >= humanReaction || !e.quick.first(sessionID) {
		return
	}
	editor := e.editorName()
	hint := "it may approve requests on its own, so what the broker forwards to be asked may not reach a human (avante.nvim: set behaviour.auto_approve_tool_permissions = false)"
	e.Log.Warn("the editor answers permission requests faster than a person can", "editor", editor, "session", sessionID, "answered_in_ms", ms(took), "hint", hint)
	reason := fmt.Sprintf("the editor %s answered a permission request in %.1f ms, faster than a person can: %s", editor, ms(took), hint)
	e.write(Record{Session: sessionID, Method: "editor/answers", Decision: "warning", Source: "editor", Reason: reason, Latency: ms(took)})
}

// editorName names the editor from the clientInfo of initialize: its
// title and name, and version, quoted (it is the editor's own text).
func (e *Engine) editorName() string {
	var info struct {
		Name    string `json:"name"`
		Title   string `json:"title"`
		Version string `json:"version"`
	}
	if ed := e.editorHandle(); ed != nil {
		_ = json.Unmarshal(ed.ClientInfo(), &info)
	}
	name := strings.TrimSpace(info.Name)
	if title := strings.TrimSpace(info.Title); title != "" && title != name {
		name = strings.TrimSpace(title + " (" + name + ")")
	}
	if name == "" {
		return "(initialize had no clientInfo name)"
	}
	if v := strings.TrimSpace(info.Version); v != "" {
		name += " " + v
	}
	return strconv.Quote(name)
}
