package session

import (
	"encoding/json"
	"strings"

	"github.com/acp-broker/acp-broker/jsonrpc"
)

// Replay follows a recorded conversation through the tracker the live broker
// uses, so that the dry run (`rules explain --transcript`) knows the session
// and merges the tool call exactly as a running broker would have. It reads
// each message as readAgent and readEditor hand it to the tracker.
type Replay struct{ t *tracker }

// NewReplay returns a Replay that has seen nothing.
func NewReplay() *Replay { return &Replay{t: newTracker()} }

// Record feeds one line of a transcript: a line of the broker's --trace
// file, or an object {"dir": "agent" or "editor", "message": {...}} for a
// message that side sent. Lines the broker wrote itself, and lines that are
// not JSON-RPC messages, change nothing, as they changed nothing live.
func (r *Replay) Record(line []byte) {
	rec, err := jsonrpc.Members(line)
	if err != nil {
		return
	}
	var dir string
	if raw, ok := rec["dir"]; !ok || json.Unmarshal(raw, &dir) != nil {
		return
	}
	frame, ok := rec["message"]
	if !ok {
		return
	}
	m, err := jsonrpc.Parse(frame)
	if err != nil {
		return
	}
	var note string
	if raw, ok := rec["note"]; ok {
		_ = json.Unmarshal(raw, &note)
	}
	from, to, _ := strings.Cut(dir, "->")
	switch from {
	case fromEditor:
		if m.Kind == jsonrpc.Request {
			r.t.editorRequest(m)
		}
	case "broker":
		// The broker's own switch of a session's mode tells the tracker
		// the mode once the agent agrees, as it did live.
		if to == fromAgent && m.Kind == jsonrpc.Request && modeMethods[m.Method] {
			r.t.editorRequest(m)
		}
	case fromAgent:
		if to == "broker" {
			// The broker's own record of an agent message it did not relay
			// as it came: only a request it intercepted reached the
			// tracker, a session set-up response it held (traced again
			// when relayed) and the answer to the broker's mode switch; one it
			// refused, an update it dropped and a request it re-sent under
			// a fresh id did not (again).
			if m.Kind == jsonrpc.Request && note == "intercepted" {
				r.t.intercepted(m.Method, m.Params)
			}
			if m.Kind == jsonrpc.Response && (note == switchAnswerNote || note == heldResponseNote) {
				r.t.agentResponse(m)
			}
			return
		}
		switch m.Kind {
		case jsonrpc.Request:
			// A trace records an intercepted request as agent->broker, and
			// again as agent->editor if it was forwarded: the tracker saw it
			// once. A message the agent sent, as a hand-written transcript
			// gives it, passes the relay's checks first.
			if InterceptedMethods[m.Method] && to == "" && Refused(m.Method, m.ID, m.Params) == "" {
				r.t.intercepted(m.Method, m.Params)
			}
		case jsonrpc.Response:
			r.t.agentResponse(m)
		case jsonrpc.Notification:
			if m.Method == "session/update" {
				r.t.update(m.Params) // tracks nothing of an update the relay drops
			}
		}
	}
}

// Intercepted returns what the broker would hand its Policy with an agent's
// request (method, params) arriving now: the session as known, and for a
// permission request the merged tool call, which it merges as the broker
// does.
func (r *Replay) Intercepted(method string, params json.RawMessage) (Info, *ToolCall) {
	return r.t.intercepted(method, params)
}
