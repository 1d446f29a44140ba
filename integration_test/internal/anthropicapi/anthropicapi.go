// Package anthropicapi is a scripted stand-in for the Anthropic Messages API
// on loopback, for the tests that run the real Claude Code CLI (under
// claude-agent-acp) offline. It owns only the HTTP side: it knows nothing of
// ACP or of the broker.
//
// A conversation is recognised by a marker in its first user message. Each
// reply is chosen from the request alone: a conversation whose request
// already holds n assistant turns gets the script's step n, so retries and
// parallel requests get the same answer. Requests of no scripted
// conversation (titles, summaries, probes) get a short text answer; paths
// other than the Messages API are answered 404 and recorded.
package anthropicapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Step is one reply of the model: a call of Tool with Input, or, when Tool
// is empty, the final answer Text.
type Step struct {
	Tool  string
	Input any
	Text  string
}

// Conversation is the script of the conversation whose first user message
// contains Marker. Once the steps are used up, the model answers "done".
type Conversation struct {
	Marker string
	Steps  []Step
}

// ToolResult is a tool_result block the model was sent back.
type ToolResult struct {
	ToolUseID string
	IsError   bool
	Text      string
}

// Server is the mock API; its zero value is not usable, call Start.
type Server struct {
	URL string // base URL, for ANTHROPIC_BASE_URL

	convs []Conversation
	srv   *http.Server
	ln    net.Listener

	mu      sync.Mutex
	log     []string                // one line per request
	unknown []string                // requests of paths the mock does not serve
	results map[string][]ToolResult // by marker, in the order first seen
	seen    map[string]bool         // tool_use ids already in results
	changed chan struct{}           // closed and replaced on every request
}

// Start serves convs on a fresh loopback port.
func Start(convs ...Conversation) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{
		URL:     "http://" + ln.Addr().String(),
		convs:   convs,
		ln:      ln,
		results: map[string][]ToolResult{},
		seen:    map[string]bool{},
		changed: make(chan struct{}),
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Log is one line per request served so far.
func (s *Server) Log() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

// Unknown lists the requests of paths the mock does not serve.
func (s *Server) Unknown() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.unknown...)
}

// ToolResults returns the tool results the conversation with marker has
// sent the model so far.
func (s *Server) ToolResults(marker string) []ToolResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ToolResult(nil), s.results[marker]...)
}

// WaitToolResults waits until the conversation with marker has sent n tool
// results, and returns them; after timeout it returns what there is.
func (s *Server) WaitToolResults(marker string, n int, timeout time.Duration) []ToolResult {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		got, changed := append([]ToolResult(nil), s.results[marker]...), s.changed
		s.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-changed:
		case <-deadline.C:
			return got
		}
	}
}

// request is the part of a Messages API request the mock reads.
type request struct {
	Model    string    `json:"model"`
	Stream   bool      `json:"stream"`
	Messages []message `json:"messages"`
	Tools    []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or a list of blocks
}

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
	Content   json.RawMessage `json:"content"` // of a tool_result: a string or blocks
}

func (m message) blocks() []block {
	var text string
	if json.Unmarshal(m.Content, &text) == nil {
		return []block{{Type: "text", Text: text}}
	}
	var bs []block
	_ = json.Unmarshal(m.Content, &bs)
	return bs
}

// text is the concatenated text of a content value (a string or blocks).
func contentText(raw json.RawMessage) string {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return text
	}
	var bs []block
	_ = json.Unmarshal(raw, &bs)
	var b strings.Builder
	for _, x := range bs {
		b.WriteString(x.Text)
	}
	return b.String()
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := readAll(r)
	path := r.URL.Path
	switch {
	case r.Method == http.MethodPost && path == "/v1/messages":
		s.messages(w, body)
	case r.Method == http.MethodPost && path == "/v1/messages/count_tokens":
		s.record(fmt.Sprintf("POST %s", path), nil)
		writeJSON(w, map[string]any{"input_tokens": len(body) / 4})
	default:
		s.record(fmt.Sprintf("%s %s", r.Method, r.URL.RequestURI()), func() {
			s.unknown = append(s.unknown, r.Method+" "+r.URL.RequestURI())
		})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"type":"error","error":{"type":"not_found_error","message":"not served by the mock"}}`))
	}
}

// record appends a log line and runs also, under the lock.
func (s *Server) record(line string, also func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, line)
	if also != nil {
		also()
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) messages(w http.ResponseWriter, body []byte) {
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		s.record("POST /v1/messages (unreadable)", nil)
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"unreadable"}}`, http.StatusBadRequest)
		return
	}
	conv, idx := s.match(req)
	assistantTurns := 0
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			assistantTurns++
		}
	}
	step := Step{Text: "ok"}
	if conv != nil {
		step = Step{Text: "done"}
		if assistantTurns < len(conv.Steps) {
			step = conv.Steps[assistantTurns]
		}
	}
	var tools []string
	for _, t := range req.Tools {
		tools = append(tools, t.Name)
	}
	s.record(fmt.Sprintf("POST /v1/messages model=%s stream=%v conversation=%d turn=%d tools=%s", req.Model, req.Stream, idx, assistantTurns, strings.Join(tools, ",")), func() {
		if conv == nil {
			return
		}
		for _, m := range req.Messages {
			if m.Role != "user" {
				continue
			}
			for _, b := range m.blocks() {
				if b.Type != "tool_result" || s.seen[b.ToolUseID] {
					continue
				}
				s.seen[b.ToolUseID] = true
				s.results[conv.Marker] = append(s.results[conv.Marker], ToolResult{b.ToolUseID, b.IsError, contentText(b.Content)})
			}
		}
	})
	id := fmt.Sprintf("%d_%d", idx, assistantTurns)
	if req.Stream {
		writeStream(w, req.Model, id, step)
	} else {
		writeJSON(w, reply(req.Model, id, step))
	}
}

// match finds the scripted conversation of req: one that offers tools (the
// agent's own loop, not a side request such as a title) and whose first
// user message contains the marker. idx is its index, or -1.
func (s *Server) match(req request) (*Conversation, int) {
	if len(req.Tools) == 0 || len(req.Messages) == 0 {
		return nil, -1
	}
	var first strings.Builder
	for _, b := range req.Messages[0].blocks() {
		first.WriteString(b.Text)
	}
	for i := range s.convs {
		if strings.Contains(first.String(), s.convs[i].Marker) {
			return &s.convs[i], i
		}
	}
	return nil, -1
}

// content is the content block of step, and the stop reason it implies.
func content(id string, step Step) (map[string]any, string) {
	if step.Tool != "" {
		return map[string]any{"type": "tool_use", "id": "toolu_mock_" + id, "name": step.Tool, "input": step.Input}, "tool_use"
	}
	return map[string]any{"type": "text", "text": step.Text}, "end_turn"
}

var usage = map[string]any{"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}

func reply(model, id string, step Step) map[string]any {
	block, stop := content(id, step)
	return map[string]any{
		"id": "msg_mock_" + id, "type": "message", "role": "assistant", "model": model,
		"content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": usage,
	}
}

// writeStream answers with the server-sent events of the streaming API: the
// block starts empty and its input or text arrives as one delta.
func writeStream(w http.ResponseWriter, model, id string, step Step) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	event := func(name string, data map[string]any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	}
	event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_mock_" + id, "type": "message", "role": "assistant", "model": model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": usage,
	}})
	block, stop := content(id, step)
	var delta map[string]any
	if step.Tool != "" {
		input, _ := json.Marshal(step.Input)
		block["input"] = map[string]any{}
		delta = map[string]any{"type": "input_json_delta", "partial_json": string(input)}
	} else {
		block["text"] = ""
		delta = map[string]any{"type": "text_delta", "text": step.Text}
	}
	event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": block})
	event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": delta})
	event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
	event("message_stop", map[string]any{"type": "message_stop"})
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func readAll(r *http.Request) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(http.MaxBytesReader(nil, r.Body, 64<<20))
	return b.Bytes(), err
}
