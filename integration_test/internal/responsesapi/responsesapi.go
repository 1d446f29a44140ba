// Package responsesapi is a stand-in for the OpenAI Responses API
// (POST /v1/responses, streamed as server-sent events) on loopback, for the
// real-adapter tests: it plays a model that, for each prompt it was
// scripted for, makes the scripted tool calls one response at a time and
// then gives a final answer, and it records what the agent reported back
// for each call.
package responsesapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Call is one tool call the model makes: a function call with Arguments,
// or, when Input is set, a call of a custom (free-form) tool with that text.
type Call struct {
	ID        string // call_id; the agent's output for the call names it
	Name      string // the tool, as the agent declared it
	Arguments any    // marshalled to the JSON string the API carries
	Input     string
	Namespace string // the namespace the agent declared the tool in, if any
}

// Turn is what the model does for one prompt: Calls in order, each in a
// response of its own, then Answer as a message.
type Turn struct {
	Calls  []Call
	Answer string
}

// Request is one model request, as far as the tests look at it.
type Request struct {
	Prompt  string            // the text of the input's last user message
	Outputs map[string]string // call_id -> the function_call_output's text
	Tools   []string          // the tools the model may call (see declared)
	Body    map[string]any
}

// Server is the mock model. A request is answered from the Turn of its
// prompt: with the first call whose output the input does not hold yet, or
// with the answer once it holds them all, so a repeated request gets the
// same reply. A prompt nobody scripted gets an answer saying so, and no call.
type Server struct {
	URL string // the API base, ending in /v1

	turns map[string]Turn
	log   func(method, path string, body []byte)
	srv   *http.Server

	mu       sync.Mutex
	requests []Request
	other    []string // requests to paths the mock does not serve
	changed  chan struct{}
}

// Start serves turns, keyed by prompt text, on a loopback port until Close.
// log, if not nil, is given every HTTP request the agent makes.
func Start(turns map[string]Turn, log func(method, path string, body []byte)) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{
		URL:     "http://" + ln.Addr().String() + "/v1",
		turns:   turns,
		log:     log,
		changed: make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/responses", s.responses)
	mux.HandleFunc("/", s.notServed)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server.
func (s *Server) Close() { _ = s.srv.Close() }

// Requests returns the model requests so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Output is what the agent last reported to the model for call id, and
// whether it reported anything.
func (s *Server) Output(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.requests) - 1; i >= 0; i-- {
		if out, ok := s.requests[i].Outputs[id]; ok {
			return out, true
		}
	}
	return "", false
}

// WaitRequests waits until the agent has made at least n model requests.
func (s *Server) WaitRequests(n int, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		have, changed := len(s.requests), s.changed
		s.mu.Unlock()
		if have >= n {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}

// Unserved lists the requests to paths other than POST /v1/responses.
func (s *Server) Unserved() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.other...)
}

func (s *Server) notServed(w http.ResponseWriter, r *http.Request) {
	if s.log != nil {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		s.log(r.Method, r.URL.Path, body)
	}
	s.mu.Lock()
	s.other = append(s.other, r.Method+" "+r.URL.Path)
	s.mu.Unlock()
	http.NotFound(w, r)
}

func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if s.log != nil {
		s.log(r.Method, r.URL.Path, body)
	}
	var raw map[string]any
	if err := json.Unmarshal(body, &raw); err != nil {
		http.Error(w, "request is not JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	req := readRequest(raw)

	s.mu.Lock()
	s.requests = append(s.requests, req)
	n := len(s.requests)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()

	var item map[string]any
	turn, scripted := s.turns[req.Prompt]
	next := -1
	for i, c := range turn.Calls {
		if _, done := req.Outputs[c.ID]; !done {
			next = i
			break
		}
	}
	switch {
	case !scripted:
		item = message(n, fmt.Sprintf("the mock model has no script for the prompt %q", req.Prompt))
	case next >= 0 && !slices.Contains(req.Tools, turn.Calls[next].Name):
		// A model calls only the tools it was offered.
		item = message(n, fmt.Sprintf("the mock model was scripted to call %q, which the request does not declare (it declares %q)", turn.Calls[next].Name, req.Tools))
	case next < 0:
		item = message(n, turn.Answer)
	default:
		c := turn.Calls[next]
		if c.Input != "" {
			item = map[string]any{
				"type": "custom_tool_call", "id": "ctc_" + c.ID, "call_id": c.ID,
				"name": c.Name, "input": c.Input, "status": "completed",
			}
			break
		}
		args, err := json.Marshal(c.Arguments)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		item = map[string]any{
			"type": "function_call", "id": "fc_" + c.ID, "call_id": c.ID,
			"name": c.Name, "arguments": string(args), "status": "completed",
		}
		if c.Namespace != "" {
			item["namespace"] = c.Namespace
		}
	}
	stream(w, fmt.Sprintf("resp_%d", n), item)
}

func message(n int, text string) map[string]any {
	return map[string]any{
		"type": "message", "id": fmt.Sprintf("msg_%d", n), "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}},
	}
}

// stream writes one response holding item, as the API streams it:
// response.created, the item added (still empty) and done, response.completed.
func stream(w http.ResponseWriter, respID string, item map[string]any) {
	added := map[string]any{}
	for k, v := range item {
		added[k] = v
	}
	added["status"] = "in_progress"
	switch item["type"] {
	case "function_call":
		added["arguments"] = ""
	case "custom_tool_call":
		added["input"] = ""
	default:
		added["content"] = []any{}
	}
	events := []map[string]any{
		{"type": "response.created", "response": map[string]any{"id": respID, "status": "in_progress"}},
		{"type": "response.output_item.added", "output_index": 0, "item": added},
		{"type": "response.output_item.done", "output_index": 0, "item": item},
		{"type": "response.completed", "response": map[string]any{
			"id": respID, "status": "completed", "output": []any{item},
			"usage": map[string]any{
				"input_tokens": 10, "input_tokens_details": map[string]any{"cached_tokens": 0},
				"output_tokens": 5, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
				"total_tokens": 15,
			},
		}},
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	for i, ev := range events {
		ev["sequence_number"] = i
		data, err := json.Marshal(ev)
		if err != nil {
			return
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev["type"], data); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}

func readRequest(body map[string]any) Request {
	req := Request{Outputs: map[string]string{}, Body: body}
	items, _ := body["input"].([]any)
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			continue
		}
		switch {
		case m["type"] == "function_call_output" || m["type"] == "custom_tool_call_output":
			id, _ := m["call_id"].(string)
			req.Outputs[id] = text(m["output"])
		case m["type"] == "message" && m["role"] == "user":
			req.Prompt = text(m["content"])
		case m["type"] == "agent_message":
			// A task another agent (Codex's parent thread) sends a
			// subagent: its payload is the content's encrypted_content,
			// which only the real API would encrypt.
			req.Prompt = payload(m["content"])
		case m["type"] == "additional_tools":
			req.Tools = append(req.Tools, declared(m["tools"])...)
		}
	}
	req.Tools = append(req.Tools, declared(body["tools"])...)
	return req
}

// declared lists the names of the tools in a "tools" list, and of the
// tools in its namespaces (Codex's code mode declares its tools in an
// input item of type additional_tools, in namespaces such as "functions").
func declared(tools any) []string {
	var names []string
	list, _ := tools.([]any)
	for _, t := range list {
		m, ok := t.(map[string]any)
		if !ok {
			continue
		}
		if m["type"] == "namespace" {
			names = append(names, declared(m["tools"])...)
		} else if name, ok := m["name"].(string); ok {
			names = append(names, name)
		}
	}
	return names
}

// payload is the encrypted_content of an agent_message's content.
func payload(content any) string {
	items, _ := content.([]any)
	for _, it := range items {
		if m, ok := it.(map[string]any); ok && m["type"] == "encrypted_content" {
			p, _ := m["encrypted_content"].(string)
			return p
		}
	}
	return ""
}

// text flattens a string or a list of content items to their text.
func text(v any) string {
	switch o := v.(type) {
	case string:
		return o
	case []any:
		var parts []string
		for _, p := range o {
			if m, ok := p.(map[string]any); ok {
				if t, ok := m["text"].(string); ok {
					parts = append(parts, t)
				}
			}
		}
		return strings.Join(parts, "\n")
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}
