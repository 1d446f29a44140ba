package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// The helpers shared by ntfy_test.go and webhook_test.go.

// httpChanWait bounds every wait of these tests.
const httpChanWait = 10 * time.Second

// httpChanLeakCheck fails the test if it ends with more goroutines than it
// started with, once its cleanups have run. Call it first in a test, so
// that its cleanup runs last; the tests that use it are not parallel.
func httpChanLeakCheck(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(httpChanWait)
		for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("%d goroutines left behind (%d before, %d after):\n%s", n-before, before, n, buf)
				return
			}
			runtime.Gosched()
			time.Sleep(pause) // goleak-style: goroutines take a moment to exit
		}
	})
}

// recvWithin receives from c or fails the test after httpChanWait.
func recvWithin[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(httpChanWait)
	defer timer.Stop()
	select {
	case v := <-c:
		return v
	case <-timer.C:
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

type askResult struct {
	ans Answer
	err error
}

// askAsync runs ch.Ask in a goroutine; the test must receive its result.
// When Ask returns, no subscription of its may still be reading: the
// leak check at the end of the test cannot see one, because the test's
// context ends first.
func askAsync(t *testing.T, ctx context.Context, ch Channel, p Prompt) <-chan askResult {
	c := make(chan askResult, 1)
	go func() {
		ans, err := ch.Ask(ctx, p)
		// The reader signals it is done as its last act, so it may still be
		// on its way out for a moment; one that is still reading stays.
		deadline := time.Now().Add(httpChanWait)
		g := goroutinesIn("notify.(*ntfyStream).read")
		for g != "" && time.Now().Before(deadline) {
			runtime.Gosched()
			time.Sleep(time.Millisecond)
			g = goroutinesIn("notify.(*ntfyStream).read")
		}
		if g != "" {
			t.Errorf("Ask returned with its subscription still open:\n%s", g)
		}
		c <- askResult{ans, err}
	}()
	return c
}

// goroutinesIn returns the stacks of the goroutines running fn.
func goroutinesIn(fn string) string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var found []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			found = append(found, g)
		}
	}
	return strings.Join(found, "\n\n")
}

// httpChanPrompt is a request with the usual three options.
func httpChanPrompt(id string) Prompt {
	return Prompt{
		Version:  PromptVersion,
		ID:       id,
		Session:  "sess-1",
		Agent:    "claude",
		Title:    "Run rm",
		Kind:     "execute",
		Commands: []string{"rm -rf build"},
		Reason:   "no rule matched",
		Options: []Option{
			{ID: "opt-allow", Kind: "allow_once", Name: "Allow"},
			{ID: "opt-always", Kind: "allow_always", Name: "Always allow"},
			{ID: "opt-reject", Kind: "reject_once", Name: "Reject"},
		},
		Digest: Digest([]byte(`{"id":` + strconv.Quote(id) + `}`)),
	}
}

// ---- a fake ntfy server ----

// fakeNtfy implements the part of ntfy's API the channel uses: JSON
// publishing (POST /), plain publishing (POST /<topic>, what an http
// action does) and the JSON subscription stream (GET /<topic>/json, with
// since=<unix time>). Publishing and subscribing need the bearer token
// when one is set; plain publishing, the phone's, needs none.
type fakeNtfy struct {
	srv   *httptest.Server
	token string

	mu         sync.Mutex
	next       int
	cache      []fakeNtfyMessage
	subs       map[*fakeNtfySub]struct{}
	gate       chan struct{} // when not nil, new subscriptions wait for it to close
	failStatus int           // when not 0, JSON publishing answers it
	auth       []string      // the Authorization header of every publish and subscribe

	published  chan fakeNtfyMessage // every JSON publish, in order
	subscribed chan string          // the since parameter of every subscription
}

type fakeNtfySub struct {
	topic string
	c     chan []byte
	drop  chan struct{}
}

// fakeNtfyMessage is a message as ntfy sends it to subscribers.
type fakeNtfyMessage struct {
	ID         string           `json:"id"`
	Time       int64            `json:"time"`
	Event      string           `json:"event"`
	Topic      string           `json:"topic"`
	SequenceID string           `json:"sequence_id,omitempty"`
	Title      string           `json:"title,omitempty"`
	Message    string           `json:"message,omitempty"`
	Priority   int              `json:"priority,omitempty"`
	Tags       []string         `json:"tags,omitempty"`
	Actions    []fakeNtfyAction `json:"actions,omitempty"`
}

type fakeNtfyAction struct {
	ID      string            `json:"id"`
	Action  string            `json:"action"`
	Label   string            `json:"label"`
	Clear   bool              `json:"clear"`
	URL     string            `json:"url,omitempty"`
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
}

func newFakeNtfy(t *testing.T, token string) *fakeNtfy {
	f := &fakeNtfy{
		token:      token,
		subs:       map[*fakeNtfySub]struct{}{},
		published:  make(chan fakeNtfyMessage, 64),
		subscribed: make(chan string, 64),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /{$}", f.publishJSON)
	mux.HandleFunc("POST /{topic}", f.publishPlain)
	mux.HandleFunc("GET /{topic}/json", f.subscribe)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeNtfy) authorized(w http.ResponseWriter, r *http.Request) bool {
	f.mu.Lock()
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.mu.Unlock()
	if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"code":40301,"http":403,"error":"forbidden"}`+"\n")
		return false
	}
	return true
}

// add stores a message and sends it to the topic's subscribers.
func (f *fakeNtfy) add(m fakeNtfyMessage) fakeNtfyMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	m.ID = fmt.Sprintf("msg%08d", f.next)
	m.Time = time.Now().Unix()
	m.Event = "message"
	if m.SequenceID == "" {
		m.SequenceID = m.ID
	}
	f.cache = append(f.cache, m)
	line, _ := json.Marshal(m)
	f.sendLocked(m.Topic, line)
	return m
}

func (f *fakeNtfy) sendLocked(topic string, line []byte) {
	for s := range f.subs {
		if s.topic == topic {
			s.c <- line // buffered generously; tests send few
		}
	}
}

// inject sends a raw line to the topic's subscribers, as if ntfy had.
func (f *fakeNtfy) inject(topic, line string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sendLocked(topic, []byte(line))
}

func (f *fakeNtfy) publishJSON(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(w, r) {
		return
	}
	var in struct {
		Topic      string           `json:"topic"`
		SequenceID string           `json:"sequence_id"`
		Title      string           `json:"title"`
		Message    string           `json:"message"`
		Priority   int              `json:"priority"`
		Tags       []string         `json:"tags"`
		Actions    []fakeNtfyAction `json:"actions"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields() // catches a misspelt field
	if err := dec.Decode(&in); err != nil || in.Topic == "" {
		http.Error(w, `{"code":40001,"http":400,"error":"invalid request"}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	fail := f.failStatus
	f.mu.Unlock()
	if fail != 0 {
		http.Error(w, `{"error":"failing on purpose"}`, fail)
		return
	}
	for i := range in.Actions {
		in.Actions[i].ID = strconv.Itoa(i)
	}
	m := f.add(fakeNtfyMessage{Topic: in.Topic, SequenceID: in.SequenceID, Title: in.Title, Message: in.Message, Priority: in.Priority, Tags: in.Tags, Actions: in.Actions})
	f.published <- m
	json.NewEncoder(w).Encode(m)
}

func (f *fakeNtfy) publishPlain(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4096))
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	m := f.add(fakeNtfyMessage{Topic: r.PathValue("topic"), Message: string(body)})
	json.NewEncoder(w).Encode(m)
}

func (f *fakeNtfy) subscribe(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(w, r) {
		return
	}
	f.subscribed <- r.URL.Query().Get("since")
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	since := int64(-1)
	if s := r.URL.Query().Get("since"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			http.Error(w, "bad since", http.StatusBadRequest)
			return
		}
		since = n
	}
	topic := r.PathValue("topic")
	// As ntfy does: subscribe, then send "open", then the cached messages.
	s := &fakeNtfySub{topic: topic, c: make(chan []byte, 256), drop: make(chan struct{})}
	f.mu.Lock()
	if since >= 0 {
		for _, m := range f.cache {
			if m.Topic == topic && m.Time >= since {
				line, _ := json.Marshal(m)
				s.c <- line
			}
		}
	}
	f.subs[s] = struct{}{}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.subs, s)
		f.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "application/x-ndjson; charset=utf-8")
	flusher := w.(http.Flusher)
	open, _ := json.Marshal(fakeNtfyMessage{ID: "open0000", Time: time.Now().Unix(), Event: "open", Topic: topic})
	w.Write(append(open, '\n'))
	flusher.Flush()
	for {
		select {
		case line := <-s.c:
			w.Write(append(line, '\n'))
			flusher.Flush()
		case <-s.drop:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// dropStreams ends every open subscription; once it returns, no stream that
// was open gets another message.
func (f *fakeNtfy) dropStreams() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.subs {
		close(s.drop)
		delete(f.subs, s)
	}
}

// press does what the ntfy app does when the button is tapped: the action's
// HTTP request.
func (f *fakeNtfy) press(t *testing.T, m fakeNtfyMessage, label string) {
	t.Helper()
	i := slices.IndexFunc(m.Actions, func(a fakeNtfyAction) bool { return a.Label == label })
	if i < 0 {
		t.Fatalf("no %q button on %+v", label, m.Actions)
	}
	a := m.Actions[i]
	if a.Action != "http" {
		t.Fatalf("button %q is a %q action, want http", label, a.Action)
	}
	method := a.Method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequest(method, a.URL, strings.NewReader(a.Body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range a.Headers {
		req.Header.Set(k, v)
	}
	f.do(t, req)
}

// post publishes body to topic as anyone could.
func (f *fakeNtfy) post(t *testing.T, topic, body string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+"/"+topic, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	f.do(t, req)
}

func (f *fakeNtfy) do(t *testing.T, req *http.Request) {
	t.Helper()
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s", req.Method, req.URL.Path, resp.Status)
	}
}

var ntfyTestSecret = []byte("0123456789abcdef-test-secret")

func newTestNtfy(f *fakeNtfy) *Ntfy {
	return &Ntfy{
		ChannelName: "phone",
		Server:      f.srv.URL,
		Topic:       "acp-prompts",
		ReplyTopic:  "acp-answers",
		Token:       f.token,
		Secret:      ntfyTestSecret,
		HTTPClient:  f.srv.Client(),
	}
}

// buttonClaims decodes the token a button carries.
func buttonClaims(t *testing.T, m fakeNtfyMessage, label string) (string, ntfyClaims) {
	t.Helper()
	i := slices.IndexFunc(m.Actions, func(a fakeNtfyAction) bool { return a.Label == label })
	if i < 0 {
		t.Fatalf("no %q button", label)
	}
	c, ok := ntfyVerify(ntfyTestSecret, m.Actions[i].Body)
	if !ok {
		t.Fatalf("the %q button's token does not verify", label)
	}
	return m.Actions[i].Body, c
}

// wantUpdate checks that the next publish replaces the prompt m with a
// notification without buttons that says text.
func wantUpdate(t *testing.T, f *fakeNtfy, m fakeNtfyMessage, text string) {
	t.Helper()
	u := recvWithin(t, f.published, "the notification's update")
	switch {
	case u.SequenceID != m.SequenceID:
		t.Errorf("update has sequence id %q, want the prompt's %q", u.SequenceID, m.SequenceID)
	case u.Topic != m.Topic:
		t.Errorf("update went to topic %q, want %q", u.Topic, m.Topic)
	case len(u.Actions) != 0:
		t.Errorf("update still has buttons: %+v", u.Actions)
	case !strings.HasPrefix(u.Message, text+"\n"):
		t.Errorf("update says %q, want it to start with %q", u.Message, text)
	}
}

// ---- tests ----

func TestNtfyButtonsChooseTheirOption(t *testing.T) {
	onceAndRejectAlways := httpChanPrompt("7-2")
	onceAndRejectAlways.Options = []Option{
		{ID: "a1", Kind: "allow_once", Name: "Yes"},
		{ID: "r2", Kind: "reject_always", Name: "Never"},
	}
	for _, tc := range []struct {
		name    string
		p       Prompt
		buttons []string
		press   string
		want    string
		update  string
	}{
		{"allow once", httpChanPrompt("7-1"), []string{"Allow once", "Always", "Reject"}, "Allow once", "opt-allow", "answered on the phone: allowed once"},
		{"always", httpChanPrompt("7-1"), []string{"Allow once", "Always", "Reject"}, "Always", "opt-always", "answered on the phone: always allowed"},
		{"reject", httpChanPrompt("7-1"), []string{"Allow once", "Always", "Reject"}, "Reject", "opt-reject", "answered on the phone: rejected"},
		{"reject always stands in for reject once", onceAndRejectAlways, []string{"Allow once", "Reject"}, "Reject", "r2", "answered on the phone: always rejected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			httpChanLeakCheck(t)
			f := newFakeNtfy(t, "tk_broker0123456789")
			n := newTestNtfy(f)
			res := askAsync(t, t.Context(), n, tc.p)

			m := recvWithin(t, f.published, "the prompt")
			if m.Topic != "acp-prompts" || m.Title != "acp-broker: claude asks" || m.Priority != 4 {
				t.Errorf("prompt = topic %q, title %q, priority %d", m.Topic, m.Title, m.Priority)
			}
			if !strings.Contains(m.Message, "rm -rf build") || !strings.Contains(m.Message, "kind: execute") {
				t.Errorf("prompt message %q lacks the command or the kind", m.Message)
			}
			var labels []string
			for _, a := range m.Actions {
				labels = append(labels, a.Label)
				if a.Action != "http" || a.Method != http.MethodPost || a.URL != f.srv.URL+"/acp-answers" || !a.Clear || len(a.Headers) != 0 {
					t.Errorf("button %q = %+v, want a clearing http POST to the reply topic, no headers", a.Label, a)
				}
			}
			if !slices.Equal(labels, tc.buttons) {
				t.Errorf("buttons = %q, want %q", labels, tc.buttons)
			}

			f.press(t, m, tc.press)
			r := recvWithin(t, res, "Ask")
			if r.err != nil {
				t.Fatalf("Ask: %v", r.err)
			}
			if want := (Answer{OptionID: tc.want, Channel: "phone", Who: "ntfy"}); r.ans != want {
				t.Errorf("answer = %+v, want %+v", r.ans, want)
			}
			wantUpdate(t, f, m, tc.update)
		})
	}
}

// Only a token this Ask signed, for this request, naming an offered option,
// not expired, answers: everything else on the reply topic is ignored and
// Ask keeps waiting for the real answer.
func TestNtfyIgnoresWhatIsNotItsAnswer(t *testing.T) {
	httpChanLeakCheck(t)
	f := newFakeNtfy(t, "")
	n := newTestNtfy(f)
	n.HTTPClient = nil // the default client
	p := httpChanPrompt("9-1")

	// An earlier Ask of the very same request (the same id and digest): its
	// tokens must not answer a later one.
	res := askAsync(t, t.Context(), n, p)
	first := recvWithin(t, f.published, "the first prompt")
	oldAlways, _ := buttonClaims(t, first, "Always")
	f.press(t, first, "Reject")
	if r := recvWithin(t, res, "the first Ask"); r.err != nil || r.ans.OptionID != "opt-reject" {
		t.Fatalf("first Ask = %+v, %v", r.ans, r.err)
	}
	recvWithin(t, f.published, "the first prompt's update")

	res = askAsync(t, t.Context(), n, p)
	m := recvWithin(t, f.published, "the prompt")
	_, c := buttonClaims(t, m, "Always")
	resign := func(change func(*ntfyClaims)) string {
		c := c
		change(&c)
		return ntfySign(ntfyTestSecret, c)
	}
	payload, _, _ := strings.Cut(oldAlways, ".")
	ignored := map[string]string{
		"garbage":                  "hello",
		"empty":                    "",
		"no signature":             payload,
		"two dots":                 "a.b.c",
		"bad base64":               "!!!.???",
		"signed with another key":  ntfySign([]byte("another-key-of-16-bytes"), c),
		"signature of another":     payload + "." + strings.SplitN(resign(func(*ntfyClaims) {}), ".", 2)[1],
		"another request id":       resign(func(c *ntfyClaims) { c.ID = "9-2" }),
		"another digest":           resign(func(c *ntfyClaims) { c.Digest = Digest([]byte("other")) }),
		"expired":                  resign(func(c *ntfyClaims) { c.Exp = time.Now().Add(-time.Second).Unix() }),
		"another Ask's nonce":      resign(func(c *ntfyClaims) { c.Nonce = "AAAAAAAAAAAAAAAAAAAAAA" }),
		"an option not offered":    resign(func(c *ntfyClaims) { c.OptionID = "opt-sudo" }),
		"another version":          resign(func(c *ntfyClaims) { c.V = 2 }),
		"replay of an earlier Ask": oldAlways,
		"padded base64":            strings.Replace(resign(func(*ntfyClaims) {}), ".", "=.", 1),
	}
	for name, body := range ignored {
		t.Logf("posting %s", name)
		f.post(t, "acp-answers", body)
	}
	// A valid token outside a message event, and lines that are not
	// messages at all.
	valid := resign(func(*ntfyClaims) {})
	poll, _ := json.Marshal(map[string]string{"event": "poll_request", "message": valid})
	f.inject("acp-answers", string(poll))
	f.inject("acp-answers", `{"event":"keepalive"}`)
	f.inject("acp-answers", `not json`)
	f.inject("acp-answers", `{"event":"message","message":42}`)

	select {
	case r := <-res:
		t.Fatalf("Ask returned on an invalid answer: %+v, %v", r.ans, r.err)
	default:
	}
	f.press(t, m, "Reject")
	r := recvWithin(t, res, "Ask")
	if r.err != nil || r.ans.OptionID != "opt-reject" {
		t.Fatalf("Ask = %+v, %v; want the pressed Reject, every earlier message ignored", r.ans, r.err)
	}
	wantUpdate(t, f, m, "answered on the phone: rejected")
}

func TestNtfyRetractsWhenTheRequestEnds(t *testing.T) {
	for _, tc := range []struct {
		cause error
		want  string
	}{
		{&Outcome{By: "editor", Decision: "allow"}, "answered in the editor: allowed"},
		{&Outcome{By: "slack", Decision: "deny"}, "answered on slack: rejected"},
		{&Outcome{By: "timeout", Decision: "deny"}, "timed out: rejected"},
		{&Outcome{By: "cancel", Decision: "cancelled"}, "withdrawn: the turn was cancelled"},
		{context.DeadlineExceeded, "timed out"},
		{context.Canceled, "withdrawn"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			httpChanLeakCheck(t)
			f := newFakeNtfy(t, "tk_broker0123456789")
			n := newTestNtfy(f)
			ctx, withdraw := context.WithCancelCause(t.Context())
			defer withdraw(nil)
			res := askAsync(t, ctx, n, httpChanPrompt("4-1"))
			m := recvWithin(t, f.published, "the prompt")

			withdraw(tc.cause)
			r := recvWithin(t, res, "Ask")
			if !errors.Is(r.err, context.Canceled) || r.ans != (Answer{}) {
				t.Fatalf("Ask = %+v, %v; want ctx's error", r.ans, r.err)
			}
			wantUpdate(t, f, m, tc.want)
		})
	}
}

func TestNtfyStopsAtTheDeadline(t *testing.T) {
	httpChanLeakCheck(t)
	f := newFakeNtfy(t, "")
	n := newTestNtfy(f)

	p := httpChanPrompt("5-1")
	p.Deadline = time.Now().Add(-time.Second)
	if _, err := n.Ask(t.Context(), p); !errors.Is(err, ErrNoAnswer) || !errors.Is(err, errPastDeadline) {
		t.Fatalf("Ask past the deadline = %v, want no answer", err)
	}
	select {
	case m := <-f.published:
		t.Fatalf("published %+v for a request past its deadline", m)
	default:
	}

	// The deadline is to pass while Ask waits, after it published; a test
	// paused past it before Ask began publishes nothing (rightly), and
	// tries again with a longer one.
	var m fakeNtfyMessage
	for wait := 300 * time.Millisecond; ; wait *= 2 {
		p.Deadline = time.Now().Add(wait)
		r := recvWithin(t, askAsync(t, t.Context(), n, p), "Ask")
		if !errors.Is(r.err, ErrNoAnswer) || !errors.Is(r.err, errPastDeadline) {
			t.Fatalf("Ask = %+v, %v; want no answer at the deadline", r.ans, r.err)
		}
		select {
		case m = <-f.published:
		default:
			if wait > httpChanWait {
				t.Fatal("Ask never published before its deadline")
			}
			continue
		}
		break
	}
	_, c := buttonClaims(t, m, "Allow once")
	if c.Exp != p.Deadline.Unix() {
		t.Errorf("token expires at %d, want the deadline %d", c.Exp, p.Deadline.Unix())
	}
	wantUpdate(t, f, m, "timed out")
}

// An answer published while the subscription was down is still read: Ask
// subscribes again asking for every message since the prompt.
func TestNtfyResubscribesAfterTheStreamBreaks(t *testing.T) {
	httpChanLeakCheck(t)
	f := newFakeNtfy(t, "tk_broker0123456789")
	n := newTestNtfy(f)
	start := time.Now().Unix()
	res := askAsync(t, t.Context(), n, httpChanPrompt("6-1"))
	if since := recvWithin(t, f.subscribed, "the subscription"); since != "" {
		t.Errorf("first subscription asks since=%q, want only new messages", since)
	}
	m := recvWithin(t, f.published, "the prompt")

	gate := make(chan struct{})
	f.mu.Lock()
	f.gate = gate
	f.mu.Unlock()
	f.dropStreams()
	f.press(t, m, "Always") // while no stream is open
	since := recvWithin(t, f.subscribed, "the second subscription")
	if s, err := strconv.ParseInt(since, 10, 64); err != nil || s < start || s > time.Now().Unix() {
		t.Errorf("second subscription asks since=%q, want the prompt's publishing time", since)
	}
	close(gate)

	r := recvWithin(t, res, "Ask")
	if r.err != nil || r.ans.OptionID != "opt-always" {
		t.Fatalf("Ask = %+v, %v; want the answer sent while disconnected", r.ans, r.err)
	}
	wantUpdate(t, f, m, "answered on the phone: always allowed")
}

// The token goes to the server only as the Authorization header: never into
// the notification, the buttons or an error.
func TestNtfyKeepsTheTokenSecret(t *testing.T) {
	httpChanLeakCheck(t)
	const token = "tk_verysecret0123456789"
	f := newFakeNtfy(t, token)
	n := newTestNtfy(f)
	res := askAsync(t, t.Context(), n, httpChanPrompt("8-1"))
	m := recvWithin(t, f.published, "the prompt")
	raw, _ := json.Marshal(m)
	if strings.Contains(string(raw), token) || strings.Contains(string(raw), string(ntfyTestSecret)) {
		t.Errorf("the notification holds a secret: %s", raw)
	}
	f.press(t, m, "Allow once")
	if r := recvWithin(t, res, "Ask"); r.err != nil {
		t.Fatal(r.err)
	}
	recvWithin(t, f.published, "the update")
	f.mu.Lock()
	auth := slices.Clone(f.auth)
	f.mu.Unlock()
	if len(auth) < 3 { // subscribe, publish, update
		t.Fatalf("saw %d authorized requests, want at least 3", len(auth))
	}
	for _, a := range auth {
		if a != "Bearer "+token {
			t.Errorf("Authorization = %q, want the bearer token", a)
		}
	}

	// A wrong token: the server refuses, and the error does not repeat it.
	n.Token = "tk_wrongsecret0123456789"
	_, err := n.Ask(t.Context(), httpChanPrompt("8-2"))
	if !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "403") {
		t.Fatalf("Ask with a wrong token = %v, want a refusal", err)
	}
	for _, secret := range []string{n.Token, token, string(ntfyTestSecret), "acp-answers", "acp-prompts"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q contains %q", err, secret)
		}
	}
}

func TestNtfyPublishFailureIsNoAnswer(t *testing.T) {
	for _, status := range []int{http.StatusInternalServerError, http.StatusTooManyRequests, http.StatusBadRequest} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			httpChanLeakCheck(t)
			f := newFakeNtfy(t, "tk_broker0123456789")
			f.failStatus = status
			n := newTestNtfy(f)
			ans, err := n.Ask(t.Context(), httpChanPrompt("3-1"))
			if !errors.Is(err, ErrNoAnswer) || ans != (Answer{}) {
				t.Fatalf("Ask = %+v, %v; want no answer", ans, err)
			}
			if !strings.Contains(err.Error(), strconv.Itoa(status)) {
				t.Errorf("error %q does not say what the server answered", err)
			}
			for _, secret := range []string{f.token, string(ntfyTestSecret), "acp-answers", "acp-prompts"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q contains %q", err, secret)
				}
			}
		})
	}

	t.Run("unreachable", func(t *testing.T) {
		httpChanLeakCheck(t)
		f := newFakeNtfy(t, "")
		n := newTestNtfy(f)
		f.srv.Close()
		_, err := n.Ask(t.Context(), httpChanPrompt("3-2"))
		if !errors.Is(err, ErrNoAnswer) {
			t.Fatalf("Ask = %v, want no answer", err)
		}
		if strings.Contains(err.Error(), "acp-answers") {
			t.Errorf("error %q names the reply topic", err)
		}
	})
}

func TestNtfyRefusesABadConfig(t *testing.T) {
	good := Ntfy{ChannelName: "phone", Server: "https://ntfy.example", Topic: "a", ReplyTopic: "b", Token: "tk_secret_token", Secret: ntfyTestSecret}
	for name, change := range map[string]func(*Ntfy){
		"short secret":      func(n *Ntfy) { n.Secret = []byte("short") },
		"no secret":         func(n *Ntfy) { n.Secret = nil },
		"same topics":       func(n *Ntfy) { n.ReplyTopic = n.Topic },
		"topic with slash":  func(n *Ntfy) { n.Topic = "a/b" },
		"empty reply topic": func(n *Ntfy) { n.ReplyTopic = "" },
		"no server":         func(n *Ntfy) { n.Server = "" },
		"server not http":   func(n *Ntfy) { n.Server = "ftp://ntfy.example" },
		"token on 2 lines":  func(n *Ntfy) { n.Token = "tk_secret\r\nX-Evil: 1" },
	} {
		n := good
		change(&n)
		_, err := n.Ask(t.Context(), httpChanPrompt("1-1"))
		if err == nil {
			t.Errorf("%s: Ask succeeded", name)
			continue
		}
		if strings.Contains(err.Error(), "tk_secret") || strings.Contains(err.Error(), string(ntfyTestSecret)) {
			t.Errorf("%s: error %q holds a secret", name, err)
		}
	}
	n := good
	p := httpChanPrompt("1-1")
	p.Options = []Option{{ID: "x", Kind: "something_else"}}
	if _, err := n.Ask(t.Context(), p); !errors.Is(err, ErrNoAnswer) {
		t.Errorf("Ask with no option a button can answer = %v, want no answer", err)
	}
}

func TestNtfyCutsLongPromptsSafely(t *testing.T) {
	p := httpChanPrompt("2-1")
	p.Agent = strings.Repeat("ä", 300)
	p.Commands = []string{strings.Repeat("é", 5000), "echo two"}
	p.Reason = strings.Repeat("why\n", 1000)
	n := Ntfy{Topic: "a", ReplyTopic: "b", Server: "https://ntfy.example", Secret: ntfyTestSecret}
	m, err := n.promptMessage(p, &ntfyAsk{nonce: "n", exp: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Message) > 4096 || !utf8.ValidString(m.Message) || !strings.HasSuffix(m.Message, "…") {
		t.Errorf("message is %d bytes, valid UTF-8 %v; want at most 4096, cut with a mark", len(m.Message), utf8.ValidString(m.Message))
	}
	if len(m.Title) > ntfyTitleLimit || !utf8.ValidString(m.Title) || strings.Contains(m.Title, "\n") {
		t.Errorf("title %q is too long or not one valid line", m.Title)
	}
	body, _ := json.Marshal(m)
	if len(body) > 8192 {
		t.Errorf("the published JSON is %d bytes", len(body))
	}
}

// FuzzNtfyVerify feeds the token check what anyone may publish on the reply
// topic: it never panics, and accepts only the tokens that were signed.
func FuzzNtfyVerify(f *testing.F) {
	secret := []byte("fuzz-secret-0123456789")
	signed := map[string]bool{}
	for _, opt := range []string{"a", "b"} {
		tok := ntfySign(secret, ntfyClaims{V: 1, ID: "1-1", Digest: "d", OptionID: opt, Exp: 1 << 40, Nonce: "n"})
		signed[tok] = true
		f.Add(tok)
		f.Add(tok + "x")
		f.Add(strings.Replace(tok, ".", "..", 1))
	}
	f.Add("")
	f.Add(".")
	f.Add("e30.AAAA")
	f.Fuzz(func(t *testing.T, msg string) {
		c, ok := ntfyVerify(secret, msg)
		if ok && !signed[strings.TrimSpace(msg)] {
			t.Fatalf("accepted %q (%+v), which was never signed", msg, c)
		}
	})
}
