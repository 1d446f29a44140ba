//go:build linux

package integration

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// A question answered on each channel the broker has, through the real
// binary: the agent gets the answer exactly once, and content a channel
// sends that does not fit the form is refused, the question left open.

// deployAccepted is the agent's answer when the human picks Production.
const deployAccepted = `{"jsonrpc":"2.0","id":5,"result":{"action":"accept","content":{"target":"production"}}}`

// fakeNtfy is an ntfy server as far as the broker uses one: it takes
// published notifications (POST /), takes messages posted to a topic
// (POST /TOPIC, as a phone's button does) and streams them to the topic's
// subscribers (GET /TOPIC/json), replaying every earlier one to a
// subscription that asks for messages since a time.
type fakeNtfy struct {
	*httptest.Server
	published chan ntfyNotification
	mu        sync.Mutex
	messages  map[string][]string
	changed   chan struct{} // closed and replaced on each new message
}

// ntfyNotification is what the broker publishes, as far as the tests read it.
type ntfyNotification struct {
	Topic   string `json:"topic"`
	Message string `json:"message"`
	Actions []struct {
		Label, URL, Method, Body string
	} `json:"actions"`
}

func startFakeNtfy(t *testing.T) *fakeNtfy {
	t.Helper()
	f := &fakeNtfy{published: make(chan ntfyNotification, 16), messages: map[string][]string{}, changed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /{$}", func(w http.ResponseWriter, r *http.Request) {
		var n ntfyNotification
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.published <- n
	})
	mux.HandleFunc("POST /{topic}", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.messages[r.PathValue("topic")] = append(f.messages[r.PathValue("topic")], string(body))
		close(f.changed)
		f.changed = make(chan struct{})
		f.mu.Unlock()
	})
	mux.HandleFunc("GET /{topic}/json", func(w http.ResponseWriter, r *http.Request) {
		topic := r.PathValue("topic")
		f.mu.Lock()
		next := len(f.messages[topic])
		f.mu.Unlock()
		if r.URL.Query().Get("since") != "" {
			next = 0
		}
		enc := json.NewEncoder(w)
		_ = enc.Encode(map[string]string{"event": "open", "topic": topic})
		w.(http.Flusher).Flush()
		for {
			f.mu.Lock()
			pending, changed := f.messages[topic][next:], f.changed
			f.mu.Unlock()
			for _, m := range pending {
				_ = enc.Encode(map[string]string{"event": "message", "topic": topic, "message": m})
				next++
			}
			w.(http.Flusher).Flush()
			select {
			case <-changed:
			case <-r.Context().Done():
				return
			}
		}
	})
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Server.Close)
	return f
}

// nextNotification waits for the broker's next notification.
func (f *fakeNtfy) nextNotification(t *testing.T) ntfyNotification {
	t.Helper()
	select {
	case n := <-f.published:
		return n
	case <-time.After(waitTimeout):
		t.Fatal("the broker published no notification")
		return ntfyNotification{}
	}
}

// press does what the phone does when a button is tapped: it posts the
// button's body to the button's URL.
func press(t *testing.T, url, body string) {
	t.Helper()
	resp, err := http.Post(url, "text/plain", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// TestQuestionOnNtfyAnsweredByAChoiceButton: routed to the editor and the
// channels, the deploy question reaches ntfy with a signed button per
// choice. A token whose content was altered (its signature kept) and one
// made up are refused; pressing Production then reaches the agent exactly
// once, the editor's prompt is withdrawn, and pressing it again does
// nothing.
func TestQuestionOnNtfyAnsweredByAChoiceButton(t *testing.T) {
	ntfy := startFakeNtfy(t)
	cfg := fmt.Sprintf("[ask]\nroute = \"both\"\n\n[[channel]]\nname = \"phone\"\ntype = \"ntfy\"\nserver = %q\ntopic = \"acpb-test\"\n", ntfy.URL)
	s, dir := questionBroker(t, cfg)
	openSession(t, s, "s1")
	s.AgentToEditor(formQuestion("5", "s1", "Deploy where?", deploySchema))
	n := ntfy.nextNotification(t)
	if n.Topic != "acpb-test" || !strings.Contains(n.Message, "Deploy where?") {
		t.Fatalf("notification %+v", n)
	}
	buttons := map[string]string{}
	for _, a := range n.Actions {
		if a.Method != http.MethodPost || a.URL != ntfy.URL+"/acpb-test-reply" {
			t.Fatalf("button %+v", a)
		}
		buttons[a.Label] = a.Body
	}
	production, ok := buttons["2. Production"]
	if len(n.Actions) != 3 || !ok || buttons["1. Staging"] == "" || buttons["Decline"] == "" {
		t.Fatalf("buttons %+v", n.Actions)
	}

	// The Production token, its content changed to staging, its signature
	// kept; then a token with no valid signature at all.
	payload, sig, _ := strings.Cut(production, ".")
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil || !strings.Contains(string(raw), "production") {
		t.Fatalf("token payload %q (%v)", raw, err)
	}
	altered := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), "production", "staging", 1))) + "." + sig
	press(t, ntfy.URL+"/acpb-test-reply", altered)
	press(t, ntfy.URL+"/acpb-test-reply", payload+"."+base64.RawURLEncoding.EncodeToString(make([]byte, 32)))
	// The subscription delivers in order: had either been taken, the agent
	// would get staging (or something else) before Production.
	press(t, ntfy.URL+"/acpb-test-reply", production)
	s.AgentExpect(deployAccepted)
	s.EditorExpect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":5}}`)
	press(t, ntfy.URL+"/acpb-test-reply", production)
	press(t, ntfy.URL+"/acpb-test-reply", buttons["1. Staging"])
	s.EditorSend(`{"jsonrpc":"2.0","id":5,"result":{"action":"decline"}}`)
	agentGotNothingMore(s)
	s.Finish()
	lines := questionLines(t, dir)
	if len(lines) != 1 || lines[0].Decision != "accept" || lines[0].Source != "channel" || lines[0].Channel != "phone" {
		t.Fatalf("audit: %+v", lines)
	}
}
