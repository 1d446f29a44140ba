// Package geminiapi is a scripted stand-in for the Gemini API
// (generativelanguage.googleapis.com) on loopback, for the integration
// tests that run the real gemini-cli: gemini-cli talks to it through its own
// base-URL setting (GOOGLE_GEMINI_BASE_URL).
//
// The model is scripted by the prompt: each line of the user's prompt that
// starts with "$ " is a shell command the model asks gemini-cli to run
// (gemini-cli's run_shell_command tool), and each line "call {JSON}" a call
// of any tool ({"name": ..., "args": {...}}), one after the other; once each
// has its function response the model answers with a final text. The
// script is stateless: for each request the server counts the function
// responses after the prompt, so a retried request gets the same answer, and
// whatever gemini-cli did with a call (ran it, or was refused) is in the
// next request, which the server records for the test.
package geminiapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
)

// Call is one function call the model makes.
type Call struct {
	Name string         `json:"name"`
	Args map[string]any `json:"args"`
}

// ShellTool is gemini-cli's shell tool; its arguments are command,
// description, dir_path and is_background.
const ShellTool = "run_shell_command"

// Final is the model's last answer to every prompt.
const Final = "All done."

// classifierVerdict answers gemini-cli's model router, which asks a small
// model (generateContent, not streamed) to rate each prompt before the
// turn, in this JSON shape.
const classifierVerdict = `{"complexity_reasoning": "one shell command", "complexity_score": 10}`

// Request is one request gemini-cli made, as the server received it.
type Request struct {
	Method string // the model method: streamGenerateContent, generateContent, countTokens, ...
	Model  string
	Body   GenerateRequest
}

// GenerateRequest is the part of a generateContent body the script reads.
type GenerateRequest struct {
	Contents []Content `json:"contents"`
}

// Content is one turn of the conversation.
type Content struct {
	Role  string `json:"role"`
	Parts []Part `json:"parts"`
}

// Part is one piece of a turn.
type Part struct {
	Text             string            `json:"text,omitempty"`
	FunctionCall     *Call             `json:"functionCall,omitempty"`
	FunctionResponse *FunctionResponse `json:"functionResponse,omitempty"`
}

// FunctionResponse is what gemini-cli tells the model a call did.
type FunctionResponse struct {
	ID       string         `json:"id,omitempty"`
	Name     string         `json:"name"`
	Response map[string]any `json:"response"`
}

// Server serves the script until Close.
type Server struct {
	URL string // the base URL to give gemini-cli

	ln  net.Listener
	srv *http.Server

	mu       sync.Mutex
	requests []Request
}

// Start serves the scripted model on a loopback port.
func Start() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{URL: "http://" + ln.Addr().String(), ln: ln}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve)}
	go s.srv.Serve(ln)
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// Requests returns every request so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// FunctionResponses returns the function responses of the last model
// request: what the model was told its calls did.
func (s *Server) FunctionResponses() []FunctionResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.requests) - 1; i >= 0; i-- {
		if r := s.requests[i]; r.Method == "streamGenerateContent" {
			return responsesSincePrompt(r.Body.Contents)
		}
	}
	return nil
}

// The Gemini API's paths are /{version}/models/{model}:{method}.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	model, method, ok := strings.Cut(r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:], ":")
	if !ok || r.Method != http.MethodPost {
		http.Error(w, `{"error":{"code":404,"message":"not served by the mock","status":"NOT_FOUND"}}`, http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req GenerateRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: method, Model: model, Body: req})
	s.mu.Unlock()

	switch method {
	case "countTokens":
		writeJSON(w, map[string]any{"totalTokens": 10})
	case "generateContent":
		writeJSON(w, textResponse(model, classifierVerdict))
	case "streamGenerateContent":
		w.Header().Set("Content-Type", "text/event-stream")
		chunk, _ := json.Marshal(s.next(model, req.Contents))
		fmt.Fprintf(w, "data: %s\r\n\r\n", chunk)
	default:
		http.Error(w, `{"error":{"code":404,"message":"method not served by the mock","status":"NOT_FOUND"}}`, http.StatusNotFound)
	}
}

// next is the model's answer to a conversation.
func (s *Server) next(model string, contents []Content) map[string]any {
	calls := Calls(prompt(contents))
	done := len(responsesSincePrompt(contents))
	if done >= len(calls) {
		return textResponse(model, Final)
	}
	return response(model, map[string]any{"functionCall": calls[done]})
}

// Calls returns the calls a prompt asks for, in order. A "call" line that
// is not a call's JSON asks for a call of no name, which gemini-cli
// refuses.
func Calls(prompt string) []Call {
	var out []Call
	for _, line := range strings.Split(prompt, "\n") {
		if cmd, ok := strings.CutPrefix(line, "$ "); ok {
			out = append(out, Call{
				Name: ShellTool,
				Args: map[string]any{"command": cmd, "description": "a command the test asked for"},
			})
		} else if js, ok := strings.CutPrefix(line, "call "); ok {
			var c Call
			_ = json.Unmarshal([]byte(js), &c)
			out = append(out, c)
		}
	}
	return out
}

// prompt is the text of the last user turn that has text.
func prompt(contents []Content) string {
	var text string
	for _, c := range contents {
		if c.Role != "user" {
			continue
		}
		var b strings.Builder
		for _, p := range c.Parts {
			b.WriteString(p.Text)
			b.WriteString("\n")
		}
		if t := b.String(); strings.TrimSpace(t) != "" {
			text = t
		}
	}
	return text
}

// responsesSincePrompt returns the function responses after the last user
// turn that has text: the calls of the current prompt that have an outcome.
func responsesSincePrompt(contents []Content) []FunctionResponse {
	var out []FunctionResponse
	for _, c := range contents {
		for _, p := range c.Parts {
			switch {
			case c.Role == "user" && p.Text != "":
				out = nil
			case p.FunctionResponse != nil:
				out = append(out, *p.FunctionResponse)
			}
		}
	}
	return out
}

func textResponse(model, text string) map[string]any {
	return response(model, map[string]any{"text": text})
}

func response(model string, part map[string]any) map[string]any {
	return map[string]any{
		"candidates": []any{map[string]any{
			"content":      map[string]any{"role": "model", "parts": []any{part}},
			"finishReason": "STOP",
			"index":        0,
		}},
		"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
		"modelVersion":  model,
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
