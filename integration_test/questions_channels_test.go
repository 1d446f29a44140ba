//go:build linux

package integration

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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
	Topic      string `json:"topic"`
	SequenceID string `json:"sequence_id"`
	Message    string `json:"message"`
	Actions    []struct {
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
// choice, then Decline. A token whose content was altered (its signature kept) and one
// made up are refused; pressing Production then reaches the agent exactly
// once, the editor's prompt is withdrawn, pressing it again does nothing,
// and the notification is replaced by one without buttons.
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
	var labels []string
	for _, a := range n.Actions {
		if a.Method != http.MethodPost || a.URL != ntfy.URL+"/acpb-test-reply" {
			t.Fatalf("button %+v", a)
		}
		buttons[a.Label] = a.Body
		labels = append(labels, a.Label)
	}
	// A button per choice, then Decline in the slot left.
	production := buttons["2. Production"]
	if !slices.Equal(labels, []string{"1. Staging", "2. Production", "Decline"}) || production == "" {
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
	// The notification is replaced, buttons and all.
	if r := ntfy.nextNotification(t); r.SequenceID != n.SequenceID || len(r.Actions) != 0 || r.Message == n.Message {
		t.Errorf("the notification was replaced by %+v", r)
	}
	s.Finish()
	lines := questionLines(t, dir)
	if len(lines) != 1 || lines[0].Decision != "accept" || lines[0].Source != "channel" || lines[0].Channel != "phone" {
		t.Fatalf("audit: %+v", lines)
	}
}

// TestQuestionOnNtfyTimedOutSaysWhy: a question nobody answered on the
// phone is answered cancel at [ask] timeout, and its notification is
// replaced by one that says so and why: the channel's own deadline is the
// broker's, and ntfy waits at it for the broker's outcome. (The timeout is
// long enough for the notification to be published first by a wide
// margin; nothing here measures time.)
func TestQuestionOnNtfyTimedOutSaysWhy(t *testing.T) {
	t.Parallel() // it waits out a 15 s timeout
	ntfy := startFakeNtfy(t)
	cfg := fmt.Sprintf("[ask]\nroute = \"channels\"\ntimeout = \"15s\"\n\n[[channel]]\nname = \"phone\"\ntype = \"ntfy\"\nserver = %q\ntopic = \"acpb-test\"\n", ntfy.URL)
	s, dir := questionBroker(t, cfg)
	openSession(t, s, "s1")
	s.AgentSend(formQuestion("5", "s1", "Deploy where?", deploySchema))
	n := ntfy.nextNotification(t)
	if !strings.Contains(n.Message, "Deploy where?") || len(n.Actions) == 0 {
		t.Fatalf("notification %+v", n)
	}
	s.AgentExpect(`{"jsonrpc":"2.0","id":5,"result":{"action":"cancel"}}`)
	r := ntfy.nextNotification(t)
	if want := "timed out: cancelled (nobody answered within 15s)\n"; r.SequenceID != n.SequenceID || len(r.Actions) != 0 || !strings.HasPrefix(r.Message, want) {
		t.Errorf("the notification was replaced by %+v; want it to start %q", r, want)
	}
	agentGotNothingMore(s)
	s.Finish()
	if lines := questionLines(t, dir); len(lines) != 1 || lines[0].Decision != "cancel" || lines[0].Source != "timeout" || lines[0].Reason != "nobody answered within 15s" {
		t.Fatalf("audit: %+v", lines)
	}
}

// webhookReceiver is the user's receiver: it keeps each prompt the broker
// POSTs (checking its signature) and acknowledges every event.
func webhookReceiver(t *testing.T, secret string) (*httptest.Server, <-chan webhookQuestion) {
	t.Helper()
	prompts := make(chan webhookQuestion, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(body)
		if r.Header.Get("X-Acp-Broker-Signature") != "sha256="+hex.EncodeToString(mac.Sum(nil)) {
			t.Errorf("unsigned or badly signed POST: %s", body)
		}
		var ev webhookQuestion
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Errorf("the broker POSTed %s: %v", body, err)
		}
		if ev.Event == "prompt" {
			prompts <- ev
		}
	}))
	t.Cleanup(srv.Close)
	return srv, prompts
}

// webhookQuestion is a question's prompt event, as far as the tests read it.
type webhookQuestion struct {
	Event  string `json:"event"`
	Prompt struct {
		Mode, Message   string
		RequestedSchema json.RawMessage
	} `json:"prompt"`
	AnswerURL  string            `json:"answer_url"`
	AnswerURLs map[string]string `json:"answer_urls"`
}

// postAnswer POSTs body to an answer URL and returns the status and reply.
func postAnswer(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(reply)
}

// TestQuestionOnWebhookAnsweredAtItsURL: routed to the channels only, the
// deploy question is POSTed with one answer URL. A body that is no answer
// gets 400 and a choice the form does not offer 422, and the question stays
// open; the valid answer then reaches the agent exactly once, the editor
// never sees the question, and a second POST to the URL is refused (410
// while the broker still knows the URL, 404 once it has forgotten it).
func TestQuestionOnWebhookAnsweredAtItsURL(t *testing.T) {
	const secret = "webhook-test-secret-0123456789"
	t.Setenv("ACPB_TEST_WEBHOOK_SECRET", secret)
	receiver, prompts := webhookReceiver(t, secret)
	cfg := fmt.Sprintf("[ask]\nroute = \"channels\"\n\n[[channel]]\nname = \"bot\"\ntype = \"webhook\"\nurl = %q\nsecret_env = \"ACPB_TEST_WEBHOOK_SECRET\"\n", receiver.URL)
	s, dir := questionBroker(t, cfg)
	openSession(t, s, "s1")
	s.AgentSend(formQuestion("5", "s1", "Deploy where?", deploySchema))
	var q webhookQuestion
	select {
	case q = <-prompts:
	case <-time.After(waitTimeout):
		t.Fatal("the receiver got no prompt")
	}
	if q.Prompt.Mode != "form" || q.Prompt.Message != "Deploy where?" || string(q.Prompt.RequestedSchema) != deploySchema || q.AnswerURL == "" || q.AnswerURLs != nil {
		t.Fatalf("prompt %+v", q)
	}
	if status, reply := postAnswer(t, q.AnswerURL, `yes please`); status != http.StatusBadRequest {
		t.Fatalf("no answer: %d %s", status, reply)
	}
	if status, reply := postAnswer(t, q.AnswerURL, `{"action":"accept","content":{"target":"nowhere"}}`); status != http.StatusUnprocessableEntity || !strings.Contains(reply, "target") {
		t.Fatalf("a choice not offered: %d %s", status, reply)
	}
	agentGotNothingMore(s) // still open
	if status, reply := postAnswer(t, q.AnswerURL, `{"action":"accept","content":{"target":"production"}}`); status != http.StatusOK {
		t.Fatalf("the valid answer: %d %s", status, reply)
	}
	s.AgentExpect(deployAccepted)
	if status, reply := postAnswer(t, q.AnswerURL, `{"action":"accept","content":{"target":"staging"}}`); status != http.StatusGone && status != http.StatusNotFound {
		t.Fatalf("a second answer: %d %s", status, reply)
	}
	s.AgentToEditor(msgMarker) // the editor saw nothing of it
	agentGotNothingMore(s)
	s.Finish()
	lines := questionLines(t, dir)
	if len(lines) != 1 || lines[0].Decision != "accept" || lines[0].Source != "channel" || lines[0].Channel != "bot" || strings.Join(lines[0].Fields, ",") != "target" {
		t.Fatalf("audit: %+v", lines)
	}
}

// localQuestionID waits until `acp-broker pending`, run by the test, lists
// a question whose line contains message, and returns its id and the
// listing.
func localQuestionID(t *testing.T, dir, message string) (string, string) {
	t.Helper()
	return pendingListed(t, dir, "the question "+message, func(line string) (string, bool) {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "question" && strings.Contains(line, message) {
			return f[1], true
		}
		return "", false
	})
}

// answerQuestion runs `acp-broker answer id args...` as the test, a
// process that is not the agent's.
func answerQuestion(dir, id string, args ...string) (string, error) {
	cmd := exec.Command(brokerBin, append([]string{"answer", id}, args...)...)
	cmd.Env = runtimeEnv(dir)
	cmd.Stdin = nil // not a terminal: the answer comes from the flags alone
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestQuestionOnLocalAnsweredWithFields: on the editor route, the deploy
// question reaches the editor and `acp-broker pending`; `acp-broker answer
// ID --field target=nowhere` is refused and leaves it pending;
// nor is the same content sent straight to the broker's socket by a
// process that is not the agent's, and the audit line names that refusal;
// `--field target=production` reaches the agent exactly once, the editor's
// prompt is withdrawn, and a second answer is refused.
func TestQuestionOnLocalAnsweredWithFields(t *testing.T) {
	s, dir := questionBroker(t, "")
	openSession(t, s, "s1")
	q := formQuestion("5", "s1", "Deploy where?", deploySchema)
	s.AgentToEditor(q)
	id, _ := localQuestionID(t, dir, "Deploy where?")
	if out, err := answerQuestion(dir, id, "--field", "target=nowhere"); err == nil || !strings.Contains(out, "nowhere") {
		t.Fatalf("a choice not offered: %v\n%s", err, out)
	}
	// The CLI checked that answer itself; a bare client of the socket,
	// not the agent's, that skips the check is refused by the broker.
	sum := sha256.Sum256([]byte(q))
	raw, _ := json.Marshal(map[string]any{
		"socket": filepath.Join(dir, "run", "acp-broker", strconv.Itoa(s.cmd.Process.Pid)+".sock"),
		"id":     id, "digest": hex.EncodeToString(sum[:]),
		"action": "accept", "content": map[string]string{"target": "nowhere"},
	})
	bare := exec.Command(fakeAgentBin, "-local-answer", string(raw))
	bare.Env = runtimeEnv(dir)
	if out, err := bare.CombinedOutput(); err == nil || !strings.Contains(string(out), "nowhere") {
		t.Fatalf("the socket's answer to content the form does not offer: %v\n%s", err, out)
	}
	agentGotNothingMore(s)
	if again, listing := localQuestionID(t, dir, "Deploy where?"); again != id {
		t.Fatalf("the question is no longer pending as %s:\n%s", id, listing)
	}
	if out, err := answerQuestion(dir, id, "--field", "target=production"); err != nil {
		t.Fatalf("answer: %v\n%s", err, out)
	}
	s.AgentExpect(deployAccepted)
	s.EditorExpect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":5}}`)
	if out, err := answerQuestion(dir, id, "--field", "target=staging"); err == nil {
		t.Fatalf("a second answer was taken: %s", out)
	}
	s.EditorSend(`{"jsonrpc":"2.0","id":5,"result":{"action":"decline"}}`)
	agentGotNothingMore(s)
	s.Finish()
	lines := questionLines(t, dir)
	if len(lines) != 1 || lines[0].Decision != "accept" || lines[0].Channel != "local" || strings.Join(lines[0].Fields, ",") != "target" {
		t.Fatalf("audit: %+v", lines)
	}
	// The socket's refusal is named in the audit line, as a channel's is;
	// the CLI's own sent nothing, and the late second answer came after
	// the line.
	if r := lines[0].Refused; len(r) != 1 || !strings.HasPrefix(r[0], "local: ") || !strings.Contains(r[0], "nowhere") {
		t.Fatalf("refused: %q, want the socket's refusal of target=nowhere", r)
	}
}
