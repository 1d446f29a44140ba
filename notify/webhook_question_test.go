package notify

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// postAnswer POSTs body to a question's answer URL as a receiver would,
// and returns the status and what the listener said.
func postAnswer(t *testing.T, u, body string) (int, string) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp, err := c.Post(u, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("answer: %v", err)
	}
	said, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(said)
}

// questionURL reads what the receiver got for a question: the prompt and
// its one answer URL.
func questionURL(t *testing.T, w *Webhook, got receivedPrompt) (Prompt, string) {
	t.Helper()
	var q struct {
		Event      string            `json:"event"`
		Prompt     Prompt            `json:"prompt"`
		AnswerURL  string            `json:"answer_url"`
		AnswerURLs map[string]string `json:"answer_urls"`
	}
	if err := json.Unmarshal(got.body, &q); err != nil {
		t.Fatal(err)
	}
	capability, ok := strings.CutPrefix(q.AnswerURL, w.base+"/answer/")
	if raw, err := tokenEncoding.DecodeString(capability); !ok || err != nil || len(raw) != 32 || q.AnswerURLs != nil || q.Event != "prompt" {
		t.Fatalf("receiver got %s, want a prompt with one answer_url <listener>/answer/<256-bit capability>", got.body)
	}
	return q.Prompt, q.AnswerURL
}

// A question's answer URL takes the answer as JSON: content that does not
// satisfy the form is refused with 422 and the reason, and the URL keeps
// working until a valid answer; then it is spent.
func TestWebhookAnswersAQuestion(t *testing.T) {
	httpChanLeakCheck(t)
	rc := newFakeReceiver(t)
	w := startWebhook(t, rc)
	p := formQuestion(questionSchema)
	res := askAsync(t, t.Context(), w, p)
	sent, u := questionURL(t, w, recvWithin(t, rc.prompts, "the question"))
	if sent.Message != p.Message || sent.Mode != "form" || string(sent.RequestedSchema) == "" {
		t.Errorf("receiver got %+v", sent)
	}

	for _, tc := range []struct {
		body   string
		status int
		says   string
	}{
		{`{"action":"accept","content":{"target":"moon"}}`, 422, `field "target": "moon" is not one of "staging", "production"`},
		{`{"action":"accept","content":{"notes":"x"}}`, 422, `field "target": required`},
		{`{"action":"accept","content":{"target":"staging","sudo":true}}`, 422, `field "sudo"`},
		{`{"action":"accept","content":{"target":"staging","target":"production"}}`, 400, "not an answer"},
		{`{"action":"allow"}`, 422, `action "allow"`},
		{`{"optionId":"allow"}`, 400, `no "action"`},
		{`yes please`, 400, "not an answer"},
		{``, 400, "not an answer"},
		{`{"action":"accept","content":{"notes":"` + strings.Repeat("x", 70000) + `"}}`, 413, "more than"},
	} {
		if status, said := postAnswer(t, u, tc.body); status != tc.status || !strings.Contains(said, tc.says) {
			t.Errorf("POST %.60s = %d %q; want %d saying %q", tc.body, status, said, tc.status, tc.says)
		}
	}
	select {
	case r := <-res:
		t.Fatalf("Ask returned on an invalid answer: %+v, %v", r.ans, r.err)
	default:
	}
	if status, said := postAnswer(t, u, `{"action":"accept","content":{"target":"production","notes":"after 5pm"}}`); status != http.StatusOK || said != "answered: accept\n" {
		t.Fatalf("valid answer: %d %q", status, said)
	}
	r := recvWithin(t, res, "Ask")
	if want := (Answer{Action: "accept", Content: `{"target":"production","notes":"after 5pm"}`, Channel: "hook", Who: "127.0.0.1"}); r.err != nil || r.ans != want {
		t.Fatalf("Ask = %+v, %v; want %+v", r.ans, r.err, want)
	}
	if status, _ := postAnswer(t, u, `{"action":"decline"}`); !refused(status) {
		t.Errorf("a second answer got %d, want it refused", status)
	}
	done := recvWithin(t, rc.resolved, "the resolved event")
	if done.ID != p.ID || done.By != "hook" || done.Decision != "accept" || done.Text != "answered here: accepted" {
		t.Errorf("resolved = %+v", done)
	}
}

func TestWebhookDeclinesAndCancelsAQuestion(t *testing.T) {
	for _, action := range []string{"decline", "cancel"} {
		t.Run(action, func(t *testing.T) {
			httpChanLeakCheck(t)
			rc := newFakeReceiver(t)
			w := startWebhook(t, rc)
			res := askAsync(t, t.Context(), w, formQuestion(questionSchema))
			_, u := questionURL(t, w, recvWithin(t, rc.prompts, "the question"))
			if status, _ := postAnswer(t, u, `{"action":"`+action+`"}`); status != http.StatusOK {
				t.Fatalf("answer: %d", status)
			}
			r := recvWithin(t, res, "Ask")
			if want := (Answer{Action: action, Channel: "hook", Who: "127.0.0.1"}); r.err != nil || r.ans != want {
				t.Fatalf("Ask = %+v, %v; want %+v", r.ans, r.err, want)
			}
			recvWithin(t, rc.resolved, "the resolved event")
		})
	}
}

// URL mode: the receiver gets the whole URL, and consent carries no
// content.
func TestWebhookURLQuestion(t *testing.T) {
	httpChanLeakCheck(t)
	rc := newFakeReceiver(t)
	w := startWebhook(t, rc)
	p := urlQuestion(t)
	res := askAsync(t, t.Context(), w, p)
	sent, u := questionURL(t, w, recvWithin(t, rc.prompts, "the question"))
	if sent.URL != p.URL || sent.Mode != "url" || sent.ElicitationID != "el-1" {
		t.Errorf("receiver got %+v", sent)
	}
	if status, said := postAnswer(t, u, `{"action":"accept","content":{"a":"b"}}`); status != 422 || !strings.Contains(said, "carries no content") {
		t.Errorf("accept with content: %d %q", status, said)
	}
	if status, _ := postAnswer(t, u, `{"action":"accept"}`); status != http.StatusOK {
		t.Fatalf("accept: %d", status)
	}
	if r := recvWithin(t, res, "Ask"); r.err != nil || r.ans != (Answer{Action: "accept", Channel: "hook", Who: "127.0.0.1"}) {
		t.Fatalf("Ask = %+v, %v", r.ans, r.err)
	}
	recvWithin(t, rc.resolved, "the resolved event")
}

// A withdrawn question's URL answers no more, and the receiver is told.
func TestWebhookQuestionWithdrawn(t *testing.T) {
	httpChanLeakCheck(t)
	rc := newFakeReceiver(t)
	w := startWebhook(t, rc)
	ctx, withdraw := context.WithCancelCause(t.Context())
	defer withdraw(nil)
	res := askAsync(t, ctx, w, formQuestion(questionSchema))
	_, u := questionURL(t, w, recvWithin(t, rc.prompts, "the question"))
	withdraw(&Outcome{By: "editor", Decision: "decline"})
	if r := recvWithin(t, res, "Ask"); !errors.Is(r.err, context.Canceled) || r.ans != (Answer{}) {
		t.Fatalf("Ask = %+v, %v", r.ans, r.err)
	}
	done := recvWithin(t, rc.resolved, "the resolved event")
	if done.Text != "answered in the editor: declined" || done.By != "editor" || done.Decision != "decline" {
		t.Errorf("resolved = %+v", done)
	}
	if status, _ := postAnswer(t, u, `{"action":"accept","content":{"target":"staging"}}`); !refused(status) {
		t.Errorf("answer after withdrawal got %d, want it refused", status)
	}
}

// A question whose schema cannot be checked is not sent.
func TestWebhookUncheckableQuestion(t *testing.T) {
	rc := newFakeReceiver(t)
	w := startWebhook(t, rc)
	ans, err := w.Ask(t.Context(), formQuestion(`{"properties":{"a":{"type":"string","pattern":"x"}}}`))
	if !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "only in the editor") {
		t.Fatalf("Ask = %+v, %v", ans, err)
	}
	select {
	case got := <-rc.prompts:
		t.Fatalf("sent %s", got.body)
	default:
	}
}

// A question past its deadline, or withdrawn before Ask, is not sent, as a
// request is not.
func TestWebhookSendsNoExpiredOrWithdrawnQuestion(t *testing.T) {
	rc := newFakeReceiver(t)
	w := startWebhook(t, rc)
	expired := formQuestion(questionSchema)
	expired.Deadline = time.Now().Add(-time.Second)
	if ans, err := w.Ask(t.Context(), expired); !errors.Is(err, ErrNoAnswer) || !errors.Is(err, errPastDeadline) {
		t.Errorf("Ask(expired) = %+v, %v; want past its deadline, no answer", ans, err)
	}
	ctx, withdraw := context.WithCancel(t.Context())
	withdraw()
	if ans, err := w.Ask(ctx, formQuestion(questionSchema)); !errors.Is(err, context.Canceled) {
		t.Errorf("Ask(withdrawn) = %+v, %v; want ctx's error", ans, err)
	}
	select {
	case got := <-rc.prompts:
		t.Fatalf("sent %s", got.body)
	default:
	}
}

// A request the broker ended itself is resolved with why, in the text and
// as "reason", one line of plain text.
func TestWebhookResolvedSaysWhy(t *testing.T) {
	for _, p := range []Prompt{formQuestion(questionSchema), httpChanPrompt("5-7")} {
		t.Run(p.ID, func(t *testing.T) {
			httpChanLeakCheck(t)
			rc := newFakeReceiver(t)
			w := startWebhook(t, rc)
			ctx, withdraw := context.WithCancelCause(t.Context())
			defer withdraw(nil)
			res := askAsync(t, ctx, w, p)
			recvWithin(t, rc.prompts, "the prompt")
			withdraw(&Outcome{By: "timeout", Decision: "deny", Reason: "nobody answered\nwithin 5m"})
			if r := recvWithin(t, res, "Ask"); !errors.Is(r.err, context.Canceled) {
				t.Fatalf("Ask = %+v, %v", r.ans, r.err)
			}
			done := recvWithin(t, rc.resolved, "the resolved event")
			if done.Text != "timed out: rejected (nobody answered within 5m)" || done.Reason != "nobody answered within 5m" || done.By != "timeout" || done.Decision != "deny" {
				t.Errorf("resolved = %+v", done)
			}
		})
	}
}

// At its own deadline, the webhook waits for the asker to say what became
// of the request before it sends "resolved" with how and why.
func TestWebhookDeadlineWaitsForTheOutcome(t *testing.T) {
	httpChanLeakCheck(t)
	lengthenGrace(t)
	rc := newFakeReceiver(t)
	w := startWebhook(t, rc)
	p := httpChanPrompt("5-8")
	p.Deadline = time.Now().Add(300 * time.Millisecond)
	ctx, withdraw := context.WithCancelCause(t.Context())
	defer withdraw(nil)
	res := askAsync(t, ctx, w, p)
	got := recvWithin(t, rc.prompts, "the request")
	// Withdrawn after the deadline: only a channel that waits for the
	// outcome can tell. (Withdrawn before it, the event is the same.)
	<-time.After(time.Until(p.Deadline) + 200*time.Millisecond)
	withdraw(&Outcome{By: "timeout", Decision: "deny", Reason: "nobody answered within 300ms"})
	if r := recvWithin(t, res, "Ask"); r.err == nil {
		t.Fatalf("Ask = %+v; want no answer", r.ans)
	}
	done := recvWithin(t, rc.resolved, "the resolved event")
	if done.Text != "timed out: rejected (nobody answered within 300ms)" || done.Reason != "nobody answered within 300ms" || done.By != "timeout" {
		t.Errorf("resolved = %+v", done)
	}
	if code := answerURL(t, got.AnswerURLs["opt-allow"]); !refused(code) {
		t.Errorf("answer after the deadline: %d, want 404 or 410", code)
	}
}
