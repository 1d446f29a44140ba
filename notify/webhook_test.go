package notify

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var webhookTestSecret = []byte("webhook-test-secret")

// fakeReceiver is the user's webhook receiver: it checks each delivery's
// signature with its own code (not the channel's), refuses what does not
// verify, and hands the test what it got.
type fakeReceiver struct {
	srv      *httptest.Server
	secret   []byte
	status   atomic.Int32 // what to answer deliveries; 0 is 200
	prompts  chan receivedPrompt
	resolved chan webhookResolved
	bad      chan string
}

type receivedPrompt struct {
	Event      string            `json:"event"`
	Prompt     Prompt            `json:"prompt"`
	AnswerURLs map[string]string `json:"answer_urls"`
	body       []byte
	signature  string
}

func newFakeReceiver(t *testing.T) *fakeReceiver {
	rc := &fakeReceiver{
		secret:   webhookTestSecret,
		prompts:  make(chan receivedPrompt, 16),
		resolved: make(chan webhookResolved, 16),
		bad:      make(chan string, 16),
	}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

// receiverVerify is how a receiver checks X-Acp-Broker-Signature.
func receiverVerify(secret, body []byte, header string) bool {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return false
	}
	sig, err := hex.DecodeString(hexSig)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return hmac.Equal(sig, mac.Sum(nil))
}

func (rc *fakeReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	sig := r.Header.Get("X-Acp-Broker-Signature")
	if err != nil || r.Method != http.MethodPost || !receiverVerify(rc.secret, body, sig) {
		rc.bad <- string(body)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var ev struct {
		Event string `json:"event"`
	}
	json.Unmarshal(body, &ev)
	switch ev.Event {
	case "prompt":
		p := receivedPrompt{body: body, signature: sig}
		if err := json.Unmarshal(body, &p); err != nil {
			rc.bad <- string(body)
			http.Error(w, "bad prompt", http.StatusBadRequest)
			return
		}
		rc.prompts <- p
	case "resolved":
		var res webhookResolved
		json.Unmarshal(body, &res)
		rc.resolved <- res
	default:
		rc.bad <- string(body)
	}
	if s := rc.status.Load(); s != 0 {
		w.WriteHeader(int(s))
	}
}

func startWebhook(t *testing.T, rc *fakeReceiver) *Webhook {
	t.Helper()
	w := &Webhook{ChannelName: "hook", URL: rc.srv.URL + "/hooks/s3cretpath", Secret: webhookTestSecret, HTTPClient: rc.srv.Client()}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// answerURL POSTs to an answer URL as the receiver would, and returns the
// status.
func answerURL(t *testing.T, u string) int {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp, err := c.Post(u, "text/plain", strings.NewReader("yes please"))
	if err != nil {
		t.Fatalf("answer: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func refused(code int) bool { return code == http.StatusNotFound || code == http.StatusGone }

func TestWebhookAnswers(t *testing.T) {
	for _, option := range []string{"opt-allow", "opt-always", "opt-reject"} {
		t.Run(option, func(t *testing.T) {
			httpChanLeakCheck(t)
			rc := newFakeReceiver(t)
			w := startWebhook(t, rc)
			p := httpChanPrompt("11-1")
			res := askAsync(t, t.Context(), w, p)

			got := recvWithin(t, rc.prompts, "the request")
			if !strings.HasPrefix(w.base, "http://127.0.0.1:") {
				t.Errorf("the listener is at %q, want loopback", w.base)
			}
			if got.Event != "prompt" || !reflect.DeepEqual(got.Prompt, p) {
				t.Errorf("receiver got %+v, want the prompt %+v", got.Prompt, p)
			}
			var urls []string
			for _, o := range p.Options {
				u := got.AnswerURLs[o.ID]
				capability, ok := strings.CutPrefix(u, w.base+"/answer/")
				if raw, err := tokenEncoding.DecodeString(capability); !ok || err != nil || len(raw) != 32 {
					t.Errorf("answer URL for %s = %q, want <listener>/answer/<256-bit capability>", o.ID, u)
				}
				urls = append(urls, u)
			}
			if len(got.AnswerURLs) != len(p.Options) || len(slices.Compact(slices.Sorted(slices.Values(urls)))) != len(urls) {
				t.Errorf("answer URLs = %v, want one distinct URL per option", got.AnswerURLs)
			}

			if code := answerURL(t, got.AnswerURLs[option]); code != http.StatusOK {
				t.Fatalf("answering: %d", code)
			}
			r := recvWithin(t, res, "Ask")
			if r.err != nil {
				t.Fatal(r.err)
			}
			if want := (Answer{OptionID: option, Channel: "hook", Who: "127.0.0.1"}); r.ans != want {
				t.Errorf("answer = %+v, want %+v", r.ans, want)
			}
			done := recvWithin(t, rc.resolved, "the resolved event")
			if done.ID != p.ID || done.Digest != p.Digest || done.By != "hook" || !strings.HasPrefix(done.Text, "answered here: ") {
				t.Errorf("resolved = %+v", done)
			}
		})
	}
}

// The receiver can tell a genuine delivery from a tampered one.
func TestWebhookSignatureCoversTheExactBody(t *testing.T) {
	httpChanLeakCheck(t)
	rc := newFakeReceiver(t)
	w := startWebhook(t, rc)
	ctx, cancel := context.WithCancel(t.Context())
	res := askAsync(t, ctx, w, httpChanPrompt("12-1"))
	got := recvWithin(t, rc.prompts, "the request")
	cancel()
	recvWithin(t, res, "Ask")

	if !receiverVerify(webhookTestSecret, got.body, got.signature) {
		t.Fatalf("a genuine delivery does not verify")
	}
	if got.signature != webhookSignature(webhookTestSecret, got.body) {
		t.Errorf("signature header = %q", got.signature)
	}
	tampered := []byte(strings.Replace(string(got.body), "rm -rf build", "rm -rf /    ", 1))
	if string(tampered) == string(got.body) {
		t.Fatal("the body does not hold the command")
	}
	for name, ok := range map[string]bool{
		"tampered body":    receiverVerify(webhookTestSecret, tampered, got.signature),
		"one bit flipped":  receiverVerify(webhookTestSecret, append(got.body[:len(got.body)-1:len(got.body)-1], got.body[len(got.body)-1]^1), got.signature),
		"another secret":   receiverVerify([]byte("another secret"), got.body, got.signature),
		"no sha256 prefix": receiverVerify(webhookTestSecret, got.body, strings.TrimPrefix(got.signature, "sha256=")),
	} {
		if ok {
			t.Errorf("%s: verifies", name)
		}
	}
	if strings.Contains(string(got.body), string(webhookTestSecret)) {
		t.Error("the body holds the secret")
	}
}

// An answer URL answers once; a replay, here or in a later request, is
// refused and answers nothing.
func TestWebhookRefusesReplays(t *testing.T) {
	httpChanLeakCheck(t)
	rc := newFakeReceiver(t)
	w := startWebhook(t, rc)
	p := httpChanPrompt("13-1")

	res := askAsync(t, t.Context(), w, p)
	first := recvWithin(t, rc.prompts, "the first request")
	if code := answerURL(t, first.AnswerURLs["opt-always"]); code != http.StatusOK {
		t.Fatalf("answering: %d", code)
	}
	if r := recvWithin(t, res, "the first Ask"); r.err != nil || r.ans.OptionID != "opt-always" {
		t.Fatalf("first Ask = %+v, %v", r.ans, r.err)
	}
	recvWithin(t, rc.resolved, "the first resolved event")
	for _, id := range []string{"opt-always", "opt-allow"} {
		if code := answerURL(t, first.AnswerURLs[id]); !refused(code) {
			t.Errorf("replaying %s after the answer: %d, want 404 or 410", id, code)
		}
	}

	// The same request asked again: the old URLs do not answer it.
	res = askAsync(t, t.Context(), w, p)
	second := recvWithin(t, rc.prompts, "the second request")
	for id, u := range first.AnswerURLs {
		if code := answerURL(t, u); !refused(code) {
			t.Errorf("an earlier request's %s URL: %d, want 404 or 410", id, code)
		}
		if second.AnswerURLs[id] == u {
			t.Errorf("the second request reuses the URL for %s", id)
		}
	}
	if code := answerURL(t, second.AnswerURLs["opt-reject"]); code != http.StatusOK {
		t.Fatalf("answering: %d", code)
	}
	if r := recvWithin(t, res, "the second Ask"); r.err != nil || r.ans.OptionID != "opt-reject" {
		t.Fatalf("second Ask = %+v, %v; want the fresh answer, the replays ignored", r.ans, r.err)
	}
}

// Made-up URLs are refused, and so is a GET of a real one (a link preview
// must not answer).
func TestWebhookRefusesForgedCapabilities(t *testing.T) {
	httpChanLeakCheck(t)
	rc := newFakeReceiver(t)
	w := startWebhook(t, rc)
	res := askAsync(t, t.Context(), w, httpChanPrompt("14-1"))
	got := recvWithin(t, rc.prompts, "the request")
	real := got.AnswerURLs["opt-allow"]
	base := real[:strings.LastIndex(real, "/")+1]
	capability := real[len(base):]

	for name, u := range map[string]string{
		"random capability":   base + secureRandomToken(32),
		"short capability":    base + "abc",
		"capability + 1 char": real + "A",
		"capability - 1 char": real[:len(real)-1],
		"padded":              real + "=",
		"another path":        strings.Replace(real, "/answer/", "/answers/", 1),
		"hex of the hash":     base + hex.EncodeToString(func() []byte { h := sha256.Sum256([]byte(capability)); return h[:] }()),
	} {
		if code := answerURL(t, u); !refused(code) {
			t.Errorf("%s: %d, want 404 or 410", name, code)
		}
	}
	resp, err := http.Get(real)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET of an answer URL: %s, want 405", resp.Status)
	}
	http.DefaultClient.CloseIdleConnections()

	select {
	case r := <-res:
		t.Fatalf("Ask returned on a forged answer: %+v, %v", r.ans, r.err)
	default:
	}
	if code := answerURL(t, got.AnswerURLs["opt-reject"]); code != http.StatusOK {
		t.Fatalf("answering: %d", code)
	}
	if r := recvWithin(t, res, "Ask"); r.err != nil || r.ans.OptionID != "opt-reject" {
		t.Fatalf("Ask = %+v, %v", r.ans, r.err)
	}
}

func TestWebhookExpiresWithTheRequest(t *testing.T) {
	t.Run("withdrawn", func(t *testing.T) {
		httpChanLeakCheck(t)
		rc := newFakeReceiver(t)
		w := startWebhook(t, rc)
		ctx, withdraw := context.WithCancelCause(t.Context())
		res := askAsync(t, ctx, w, httpChanPrompt("15-1"))
		got := recvWithin(t, rc.prompts, "the request")
		withdraw(&Outcome{By: "editor", Decision: "allow"})
		if r := recvWithin(t, res, "Ask"); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("Ask = %+v, %v; want ctx's error", r.ans, r.err)
		}
		done := recvWithin(t, rc.resolved, "the resolved event")
		if done.Text != "answered in the editor: allowed" || done.By != "editor" || done.Decision != "allow" {
			t.Errorf("resolved = %+v", done)
		}
		for id, u := range got.AnswerURLs {
			if code := answerURL(t, u); !refused(code) {
				t.Errorf("%s after the request ended: %d, want 404 or 410", id, code)
			}
		}
	})

	t.Run("past the deadline while waiting", func(t *testing.T) {
		httpChanLeakCheck(t)
		rc := newFakeReceiver(t)
		w := &Webhook{ChannelName: "hook", URL: rc.srv.URL, Secret: webhookTestSecret, HTTPClient: rc.srv.Client()}
		var skew atomic.Int64
		w.now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		p := httpChanPrompt("15-2")
		p.Deadline = time.Now().Add(time.Hour)
		res := askAsync(t, t.Context(), w, p)
		got := recvWithin(t, rc.prompts, "the request")

		skew.Store(int64(2 * time.Hour)) // the listener's clock is past the deadline
		if code := answerURL(t, got.AnswerURLs["opt-allow"]); code != http.StatusGone {
			t.Errorf("answer past the deadline: %d, want 410", code)
		}
		skew.Store(0)
		if code := answerURL(t, got.AnswerURLs["opt-reject"]); code != http.StatusOK {
			t.Fatalf("answer before the deadline: %d", code)
		}
		if r := recvWithin(t, res, "Ask"); r.err != nil || r.ans.OptionID != "opt-reject" {
			t.Fatalf("Ask = %+v, %v", r.ans, r.err)
		}
	})

	t.Run("deadline passes", func(t *testing.T) {
		httpChanLeakCheck(t)
		rc := newFakeReceiver(t)
		w := startWebhook(t, rc)
		p := httpChanPrompt("15-3")
		// The deadline is to pass while Ask waits, after it sent the
		// request; a test paused past it before Ask began gets no request
		// at all (rightly), and tries again with a longer one.
		var got receivedPrompt
		for wait := 300 * time.Millisecond; ; wait *= 2 {
			p.Deadline = time.Now().Add(wait)
			r := recvWithin(t, askAsync(t, t.Context(), w, p), "Ask")
			if !errors.Is(r.err, ErrNoAnswer) || !errors.Is(r.err, errPastDeadline) {
				t.Fatalf("Ask = %+v, %v; want no answer at the deadline", r.ans, r.err)
			}
			select {
			case got = <-rc.prompts: // the receiver has it before the POST returns
			default:
				if wait > httpChanWait {
					t.Fatal("Ask never sent the request before its deadline")
				}
				continue
			}
			break
		}
		if done := recvWithin(t, rc.resolved, "the resolved event"); done.Text != "timed out" {
			t.Errorf("resolved = %+v", done)
		}
		if code := answerURL(t, got.AnswerURLs["opt-allow"]); !refused(code) {
			t.Errorf("answer after the deadline: %d, want 404 or 410", code)
		}
	})
}

// One request's answer URL never answers another.
func TestWebhookRefusesAnotherRequestsCapability(t *testing.T) {
	httpChanLeakCheck(t)
	rc := newFakeReceiver(t)
	w := startWebhook(t, rc)
	resA := askAsync(t, t.Context(), w, httpChanPrompt("16-1"))
	a := recvWithin(t, rc.prompts, "request A")
	resB := askAsync(t, t.Context(), w, httpChanPrompt("16-2"))
	b := recvWithin(t, rc.prompts, "request B")
	if a.Prompt.ID == b.Prompt.ID {
		a, b = b, a
	}
	if a.Prompt.ID != "16-1" {
		a, b = b, a
	}

	if code := answerURL(t, b.AnswerURLs["opt-allow"]); code != http.StatusOK {
		t.Fatalf("answering B: %d", code)
	}
	if r := recvWithin(t, resB, "Ask B"); r.err != nil || r.ans.OptionID != "opt-allow" {
		t.Fatalf("Ask B = %+v, %v", r.ans, r.err)
	}
	for id, u := range b.AnswerURLs {
		if code := answerURL(t, u); !refused(code) {
			t.Errorf("B's %s URL while A waits: %d, want 404 or 410", id, code)
		}
	}
	select {
	case r := <-resA:
		t.Fatalf("A was answered by B's URL: %+v, %v", r.ans, r.err)
	default:
	}
	if code := answerURL(t, a.AnswerURLs["opt-reject"]); code != http.StatusOK {
		t.Fatalf("answering A: %d", code)
	}
	if r := recvWithin(t, resA, "Ask A"); r.err != nil || r.ans.OptionID != "opt-reject" {
		t.Fatalf("Ask A = %+v, %v; want its own answer", r.ans, r.err)
	}
}

// Two answers to one request at once: exactly one wins, and it is the one
// Ask returns.
func TestWebhookConcurrentAnswersOneWins(t *testing.T) {
	httpChanLeakCheck(t)
	rc := newFakeReceiver(t)
	w := startWebhook(t, rc)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	for i := range 20 {
		res := askAsync(t, t.Context(), w, httpChanPrompt("17-1"))
		got := recvWithin(t, rc.prompts, "the request")
		options := []string{"opt-allow", "opt-reject"}
		codes := make([]int, len(options))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for j, id := range options {
			wg.Go(func() {
				<-start
				resp, err := client.Post(got.AnswerURLs[id], "text/plain", nil)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				codes[j] = resp.StatusCode
			})
		}
		close(start)
		wg.Wait()
		r := recvWithin(t, res, "Ask")
		recvWithin(t, rc.resolved, "the resolved event")
		if r.err != nil {
			t.Fatalf("round %d: Ask: %v", i, r.err)
		}
		winners := 0
		for j, code := range codes {
			switch {
			case code == http.StatusOK:
				winners++
				if r.ans.OptionID != options[j] {
					t.Errorf("round %d: %s got 200 but Ask returned %s", i, options[j], r.ans.OptionID)
				}
			case !refused(code):
				t.Errorf("round %d: %s got %d", i, options[j], code)
			}
		}
		if winners != 1 {
			t.Fatalf("round %d: %d answers won (%v), want exactly 1", i, winners, codes)
		}
	}
}

func TestWebhookReceiverFailureIsNoAnswer(t *testing.T) {
	for _, status := range []int{http.StatusInternalServerError, http.StatusUnauthorized, http.StatusFound} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			httpChanLeakCheck(t)
			rc := newFakeReceiver(t)
			rc.status.Store(int32(status))
			w := startWebhook(t, rc)
			ans, err := w.Ask(t.Context(), httpChanPrompt("18-1"))
			if !errors.Is(err, ErrNoAnswer) || ans != (Answer{}) {
				t.Fatalf("Ask = %+v, %v; want no answer", ans, err)
			}
			got := recvWithin(t, rc.prompts, "the request")
			for _, secret := range []string{"s3cretpath", string(webhookTestSecret)} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q holds %q", err, secret)
				}
			}
			if code := answerURL(t, got.AnswerURLs["opt-allow"]); !refused(code) {
				t.Errorf("answer after a failed delivery: %d, want 404 or 410", code)
			}
			select {
			case r := <-rc.resolved:
				t.Errorf("resolved %+v sent for a request the receiver refused", r)
			default:
			}
		})
	}

	// The default client follows no redirect: the signed request goes only
	// where it was configured to.
	t.Run("redirect", func(t *testing.T) {
		httpChanLeakCheck(t)
		rc := newFakeReceiver(t)
		redirect := httptest.NewServer(http.RedirectHandler(rc.srv.URL, http.StatusTemporaryRedirect))
		t.Cleanup(redirect.Close)
		w := &Webhook{ChannelName: "hook", URL: redirect.URL, Secret: webhookTestSecret}
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		_, err := w.Ask(t.Context(), httpChanPrompt("18-3"))
		if !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "307") {
			t.Fatalf("Ask = %v, want no answer", err)
		}
		select {
		case p := <-rc.prompts:
			t.Errorf("the redirect was followed: the receiver got %+v", p.Prompt)
		default:
		}
	})

	t.Run("ended before it began", func(t *testing.T) {
		httpChanLeakCheck(t)
		rc := newFakeReceiver(t)
		w := startWebhook(t, rc)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := w.Ask(ctx, httpChanPrompt("18-4")); !errors.Is(err, context.Canceled) {
			t.Fatalf("Ask = %v, want ctx's error", err)
		}
		select {
		case p := <-rc.prompts:
			t.Errorf("a request with an ended context was sent: %+v", p.Prompt)
		case r := <-rc.resolved:
			t.Errorf("resolved %+v sent for a request never sent", r)
		default:
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		httpChanLeakCheck(t)
		rc := newFakeReceiver(t)
		w := startWebhook(t, rc)
		rc.srv.Close()
		_, err := w.Ask(t.Context(), httpChanPrompt("18-2"))
		if !errors.Is(err, ErrNoAnswer) {
			t.Fatalf("Ask = %v, want no answer", err)
		}
		if strings.Contains(err.Error(), "s3cretpath") {
			t.Errorf("error %q holds the URL's path", err)
		}
	})
}

func TestWebhookClose(t *testing.T) {
	httpChanLeakCheck(t)
	rc := newFakeReceiver(t)
	w := startWebhook(t, rc)
	res := askAsync(t, t.Context(), w, httpChanPrompt("19-1"))
	got := recvWithin(t, rc.prompts, "the request")
	addr := strings.TrimPrefix(w.base, "http://")

	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if r := recvWithin(t, res, "Ask"); !errors.Is(r.err, ErrNoAnswer) {
		t.Fatalf("pending Ask after Close = %+v, %v; want no answer", r.ans, r.err)
	}
	if c, err := net.DialTimeout("tcp", addr, httpChanWait); err == nil {
		c.Close()
		t.Errorf("the listener at %s still accepts connections", addr)
	}
	resp, err := http.Post(got.AnswerURLs["opt-allow"], "text/plain", nil)
	if err == nil {
		resp.Body.Close()
		t.Errorf("answer after Close: %s", resp.Status)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := w.Start(); err == nil {
		t.Error("Start after Close succeeded")
	}
	if _, err := w.Ask(t.Context(), httpChanPrompt("19-2")); !errors.Is(err, ErrNoAnswer) {
		t.Errorf("Ask after Close = %v, want no answer", err)
	}
}

func TestWebhookRefusesABadConfig(t *testing.T) {
	httpChanLeakCheck(t)
	if _, err := (&Webhook{ChannelName: "hook", URL: "http://127.0.0.1:1/x", Secret: webhookTestSecret}).Ask(t.Context(), httpChanPrompt("20-1")); err == nil || !strings.Contains(err.Error(), "not started") {
		t.Errorf("Ask before Start = %v", err)
	}
	if err := (&Webhook{Listen: "127.0.0.1:0", PublicURL: "ftp://x"}).Start(); err == nil {
		t.Error("Start with an ftp public URL succeeded")
	}
	w := &Webhook{ChannelName: "hook", URL: "http://127.0.0.1:1/x", PublicURL: "https://broker.example/cb/"}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Ask(t.Context(), httpChanPrompt("20-2")); err == nil || !strings.Contains(err.Error(), "secret") {
		t.Errorf("Ask without a secret = %v", err)
	}
	w.Secret = webhookTestSecret
	p := httpChanPrompt("20-3")
	p.Options = nil
	if _, err := w.Ask(t.Context(), p); !errors.Is(err, ErrNoAnswer) {
		t.Errorf("Ask with no options = %v, want no answer", err)
	}
	if err := w.Start(); err == nil {
		t.Error("a second Start succeeded")
	}
	req, urls, _, err := w.open(httpChanPrompt("20-4"), nil)
	if err != nil {
		t.Fatal(err)
	}
	w.end(req)
	if u := urls["opt-allow"]; !strings.HasPrefix(u, "https://broker.example/cb/answer/") {
		t.Errorf("answer URL %q is not under the public URL", u)
	}
}
