package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/acp-broker/acp-broker/elicit"
)

// Webhook asks through an HTTP receiver of the user's (a chat bot, a home
// server): Ask POSTs the prompt to URL, and the receiver answers by POSTing
// to one of the answer URLs that came with it, served by a listener that
// Start opens.
//
// What Ask POSTs is JSON, signed with an HMAC-SHA256 of its exact bytes
// under Secret in the header "X-Acp-Broker-Signature: sha256=<hex>":
//
//	{"event": "prompt", "prompt": {...}, "answer_urls": {"<option id>": "<PublicURL>/answer/<capability>", ...}}
//
// Each answer URL holds a fresh random 256-bit capability for one option of
// one request. It can be used once: the first POST to any of a request's
// answer URLs (with any body) answers it, and every later one is refused,
// as are URLs of requests that ended (answered, withdrawn, past their
// deadline) and URLs that were never handed out: 410 for one whose request
// is over while the listener still holds it (an answer just taken, a
// deadline just passed), 404 once the request has ended and its URLs are
// forgotten, and for an unknown URL. A GET never answers, so a link preview
// cannot.
//
// An answer that won at the listener is returned even if ctx ended
// meanwhile: the human was told it was taken, and the caller, who applies
// the first answer, decides whether it came first.
//
// A question (an agent's elicitation) comes with one answer URL instead:
//
//	{"event": "prompt", "prompt": {..., "message": ..., "mode": "form", "requestedSchema": {...}}, "answer_url": "<PublicURL>/answer/<capability>"}
//
// (or "mode": "url" with "url" and "elicitationId"). The receiver POSTs the
// answer's JSON to it: {"action": "accept", "content": {...}},
// {"action": "decline"} or {"action": "cancel"}; URL mode's accept, consent
// to open the URL, has no content. A body that is not such an answer gets
// 400, content that does not satisfy requestedSchema 422, each with the
// reason, and the URL stays usable until a valid answer or the request's
// end. A question whose schema the broker cannot check is not sent.
//
// When a request ends after its prompt was delivered, Ask POSTs, signed the
// same way and best effort (for at most 5 s), what became of it:
//
//	{"event": "resolved", "id": "...", "digest": "...", "text": "answered in the editor: allowed", "by": "editor", "decision": "allow"}
//
// and, when the broker ended it itself, why, in "text" and in "reason":
// "text": "timed out: rejected (nobody answered within 5m)", "reason":
// "nobody answered within 5m" (at the prompt's deadline Ask waits a moment
// for ctx to say so).
//
// The listener speaks plain HTTP. Anyone who can see an answer URL can
// answer with it: on anything but loopback, put it behind TLS and set
// PublicURL to the https address.
type Webhook struct {
	// ChannelName is the channel's name from the config.
	ChannelName string
	// URL is where the request JSON is POSTed. It never appears in errors.
	URL string
	// Secret is the HMAC-SHA256 key that signs what is POSTed. It must not
	// be empty, and never appears in errors.
	Secret []byte
	// Listen is the callback listener's address, "127.0.0.1:0" if empty.
	Listen string
	// PublicURL is the callback listener's base URL as the receiver sees
	// it; empty means "http://" and the address the listener got.
	PublicURL string
	// HTTPClient makes the requests to URL; nil means a client with
	// connect, TLS and response-header timeouts that follows no redirects.
	HTTPClient *http.Client

	mu      sync.Mutex
	srv     *http.Server
	served  chan struct{} // closed when the listener has stopped
	closed  chan struct{} // closed by Close
	base    string
	pending map[[sha256.Size]byte]*webhookCap // by the capability's hash
	// now is the clock the listener checks deadlines with (tests set it).
	now func() time.Time
}

// webhookCap is one answer URL: an option of a request, or a question.
type webhookCap struct {
	req      *webhookReq
	option   Option
	question *Prompt      // set for a question's URL, which takes its answer as the body
	form     *elicit.Form // the question's form, read once by Ask; nil in URL mode
}

// webhookReq is one Ask's state; every field but answer is guarded by
// Webhook.mu.
type webhookReq struct {
	deadline time.Time
	keys     [][sha256.Size]byte
	// over is set by the first answer and when Ask stops waiting: from
	// then on no answer URL of the request answers.
	over   bool
	answer chan Answer // buffered: gets at most one answer
}

const (
	webhookPostTimeout = 30 * time.Second
	webhookAnswerLimit = 64 << 10
	webhookCapBytes    = 32
)

// Name is the channel's name.
func (w *Webhook) Name() string { return w.ChannelName }

// Start opens the callback listener. A Webhook is started once; after
// Close it stays closed.
func (w *Webhook) Start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.srv != nil {
		return w.errorf("already started")
	}
	if w.PublicURL != "" {
		u, err := url.Parse(w.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return w.errorf("the public URL must be an http or https URL")
		}
	}
	listen := w.Listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return w.errorf("listen for answers: %w", err)
	}
	w.base = strings.TrimRight(w.PublicURL, "/")
	if w.base == "" {
		w.base = "http://" + ln.Addr().String()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /answer/{capability}", w.serveAnswer)
	w.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelDebug),
	}
	w.served = make(chan struct{})
	w.closed = make(chan struct{})
	if w.pending == nil {
		w.pending = make(map[[sha256.Size]byte]*webhookCap)
	}
	srv, served := w.srv, w.served
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	return nil
}

// Close stops the callback listener and waits for it; pending Asks return
// an error. Closing a Webhook that was never started does nothing.
func (w *Webhook) Close() error {
	w.mu.Lock()
	srv, served, closed := w.srv, w.served, w.closed
	if srv == nil || isClosed(closed) {
		w.mu.Unlock()
		return nil
	}
	close(closed)
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(ctx)
	if err != nil {
		err = srv.Close()
	}
	<-served
	if err != nil {
		return w.errorf("stop the listener: %w", err)
	}
	return nil
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (w *Webhook) errorf(format string, args ...any) error {
	return fmt.Errorf("webhook %s: "+format, append([]any{w.ChannelName}, args...)...)
}

func (w *Webhook) clock() time.Time {
	if w.now != nil {
		return w.now()
	}
	return time.Now()
}

// Ask POSTs p to the receiver and waits for an answer at one of its answer
// URLs; see Webhook.
func (w *Webhook) Ask(ctx context.Context, p Prompt) (Answer, error) {
	switch {
	case w.URL == "":
		return Answer{}, w.errorf("no URL to send requests to")
	case len(w.Secret) == 0:
		return Answer{}, w.errorf("the signing secret is empty")
	case !p.IsQuestion() && len(p.Options) == 0:
		return Answer{}, w.errorf("the request offers no option: %w", ErrNoAnswer)
	case !p.Deadline.IsZero() && !time.Now().Before(p.Deadline):
		return Answer{}, w.errorf("%w: %w", errPastDeadline, ErrNoAnswer)
	case ctx.Err() != nil:
		return Answer{}, ctx.Err()
	}
	var form *elicit.Form
	if p.IsQuestion() {
		// Read once, here: not under w.mu, and not again for each POST.
		var err error
		if form, err = p.CheckQuestion(); err != nil {
			return Answer{}, w.errorf("%w", err)
		}
	}
	req, urls, closed, err := w.open(p, form)
	if err != nil {
		return Answer{}, err
	}
	sent := webhookPrompt{Event: "prompt", Prompt: onWire(p), AnswerURLs: urls}
	if p.IsQuestion() {
		sent.AnswerURL, sent.AnswerURLs = urls[""], nil
	}
	body, err := json.Marshal(sent)
	if err != nil {
		w.end(req)
		return Answer{}, w.errorf("encode the request: %w", err)
	}
	if err := w.post(ctx, body); err != nil {
		w.end(req)
		if ans, ok := answered(req); ok { // the receiver answered, then failed the POST
			w.resolve(ctx, p, ans, nil)
			return ans, nil
		}
		if ctx.Err() != nil {
			// The receiver may have the prompt already.
			w.resolve(ctx, p, Answer{}, ctx.Err())
			return Answer{}, ctx.Err()
		}
		return Answer{}, w.errorf("send the request: %w", err)
	}

	var deadline <-chan time.Time
	if !p.Deadline.IsZero() {
		t := time.NewTimer(time.Until(p.Deadline))
		defer t.Stop()
		deadline = t.C
	}
	var ans Answer
	select {
	case ans = <-req.answer:
		w.end(req)
		if !p.IsQuestion() {
			_, err = p.Choose(ans.OptionID, "")
		}
	case <-deadline:
		err = w.errorf("%w: %w", errPastDeadline, ErrNoAnswer)
	case <-ctx.Done():
		err = ctx.Err()
	case <-closed:
		err = w.errorf("the channel was closed: %w", ErrNoAnswer)
	}
	if err != nil {
		w.end(req)
		// An answer recorded before the request ended here is still the
		// human's answer: the caller decides whether it came first.
		if a, ok := answered(req); ok {
			ans, err = a, nil
		}
	}
	if errors.Is(err, errPastDeadline) {
		awaitOutcome(ctx)
	}
	w.resolve(ctx, p, ans, err)
	if err != nil {
		return Answer{}, err
	}
	return ans, nil
}

func answered(req *webhookReq) (Answer, bool) {
	select {
	case a := <-req.answer:
		return a, true
	default:
		return Answer{}, false
	}
}

// open makes a capability for each option of p (or one for a question,
// its URL under ""), and returns their URLs and the channel Close closes.
func (w *Webhook) open(p Prompt, form *elicit.Form) (*webhookReq, map[string]string, <-chan struct{}, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.srv == nil:
		return nil, nil, nil, w.errorf("not started")
	case isClosed(w.closed):
		return nil, nil, nil, w.errorf("closed: %w", ErrNoAnswer)
	}
	req := &webhookReq{deadline: p.Deadline, answer: make(chan Answer, 1)}
	urls := make(map[string]string, len(p.Options))
	add := func(name string, c *webhookCap) {
		capability := secureRandomToken(webhookCapBytes)
		key := sha256.Sum256([]byte(capability))
		w.pending[key] = c
		req.keys = append(req.keys, key)
		urls[name] = w.base + "/answer/" + capability
	}
	if p.IsQuestion() {
		add("", &webhookCap{req: req, question: &p, form: form})
		return req, urls, w.closed, nil
	}
	for _, o := range p.Options {
		if _, dup := urls[o.ID]; dup {
			continue
		}
		add(o.ID, &webhookCap{req: req, option: o})
	}
	return req, urls, w.closed, nil
}

// end makes every answer URL of req refuse from now on.
func (w *Webhook) end(req *webhookReq) {
	w.mu.Lock()
	defer w.mu.Unlock()
	req.over = true
	for _, k := range req.keys {
		delete(w.pending, k)
	}
}

// serveAnswer takes a POST to an answer URL. Only the first use of a live
// capability answers (for a question, the first with a valid answer); its
// request is over from then on.
func (w *Webhook) serveAnswer(rw http.ResponseWriter, r *http.Request) {
	body, bodyErr := io.ReadAll(http.MaxBytesReader(rw, r.Body, webhookAnswerLimit))
	capability := r.PathValue("capability")
	if raw, err := tokenEncoding.DecodeString(capability); err != nil || len(raw) != webhookCapBytes {
		http.Error(rw, "no such answer URL", http.StatusNotFound)
		return
	}
	key := sha256.Sum256([]byte(capability))
	who := "webhook"
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil && host != "" {
		who = host
	}

	// live looks the capability up, and refuses it once its request is
	// over; w.mu is held from when it returns true.
	var c *webhookCap
	live := func() bool {
		w.mu.Lock()
		c = w.pending[key]
		switch {
		case c == nil:
			w.mu.Unlock()
			http.Error(rw, "no such answer URL", http.StatusNotFound)
			return false
		case c.req.over:
			w.mu.Unlock()
			http.Error(rw, "this request was already answered or withdrawn", http.StatusGone)
			return false
		case !c.req.deadline.IsZero() && !w.clock().Before(c.req.deadline):
			w.mu.Unlock()
			http.Error(rw, "this request has expired", http.StatusGone)
			return false
		}
		return true
	}
	if !live() {
		return
	}
	if c.question != nil {
		// The answer is checked without w.mu, which every other answer
		// and Ask need; the request may end meanwhile, so it is looked up
		// again before it takes the answer.
		question, form := c.question, c.form
		w.mu.Unlock()
		ans, status, err := questionAnswer(question, form, body, bodyErr)
		if err != nil {
			// No answer: the URL stays usable for a valid one.
			http.Error(rw, err.Error(), status)
			return
		}
		if !live() {
			return
		}
		ans.Channel, ans.Who = w.ChannelName, who
		c.req.over = true
		c.req.answer <- ans
		w.mu.Unlock()
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(rw, "answered: %s\n", ans.Action)
		return
	}
	c.req.over = true
	c.req.answer <- Answer{OptionID: c.option.ID, Channel: w.ChannelName, Who: who}
	w.mu.Unlock()
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(rw, "answered: %s\n", webhookOneLine(c.option.Name, c.option.ID))
}

// questionAnswer reads a question's answer from a POST body, and says the
// HTTP status for one that is none: 413 for a body past the limit, 400 for
// one that is not an answer, 422 for content that fails the form.
func questionAnswer(p *Prompt, form *elicit.Form, body []byte, bodyErr error) (Answer, int, error) {
	if bodyErr != nil {
		return Answer{}, http.StatusRequestEntityTooLarge, fmt.Errorf("the answer is more than %d bytes", webhookAnswerLimit)
	}
	action, content, err := parseQuestionReply(body)
	if err != nil {
		return Answer{}, http.StatusBadRequest, fmt.Errorf(`not an answer (want {"action": "accept"|"decline"|"cancel", "content": {...}}): %w`, err)
	}
	ans, err := p.ReplyTo(form, action, content)
	if err != nil {
		return Answer{}, http.StatusUnprocessableEntity, err
	}
	return ans, 0, nil
}

func webhookOneLine(name, id string) string {
	if name == "" {
		name = id
	}
	return Truncate(strings.Join(strings.Fields(name), " "), 200)
}

// webhookPrompt is what Ask POSTs.
type webhookPrompt struct {
	Event      string            `json:"event"`
	Prompt     Prompt            `json:"prompt"`
	AnswerURLs map[string]string `json:"answer_urls,omitempty"`
	// AnswerURL is a question's one answer URL.
	AnswerURL string `json:"answer_url,omitempty"`
}

// webhookResolved is what Ask POSTs when a delivered request ends.
type webhookResolved struct {
	Event    string `json:"event"`
	ID       string `json:"id"`
	Digest   string `json:"digest"`
	Text     string `json:"text"`
	By       string `json:"by,omitempty"`
	Decision string `json:"decision,omitempty"`
	// Reason is why, when the broker ended the request itself: "nobody
	// answered within 5m".
	Reason string `json:"reason,omitempty"`
}

// resolve tells the receiver what became of a request it was sent. It is
// best effort and bounded: ctx may have ended already.
func (w *Webhook) resolve(ctx context.Context, p Prompt, ans Answer, err error) {
	msg := webhookResolved{Event: "resolved", ID: p.ID, Digest: p.Digest}
	var o *Outcome
	switch {
	case err == nil && p.IsQuestion():
		msg.Text = "answered here: " + actionWords(ans.Action)
		msg.By, msg.Decision = w.ChannelName, ans.Action
	case err == nil:
		opt, _ := p.Choose(ans.OptionID, "")
		msg.Text = "answered here: " + optionKindWords(opt.Kind)
		msg.By, msg.Decision = w.ChannelName, "deny"
		if strings.HasPrefix(opt.Kind, "allow") {
			msg.Decision = "allow"
		}
	case ctx.Err() != nil:
		cause := context.Cause(ctx)
		msg.Text = retractionText(cause)
		if errors.As(cause, &o) {
			msg.By, msg.Decision, msg.Reason = o.By, o.Decision, outcomeReason(o)
		} else if errors.Is(cause, context.DeadlineExceeded) {
			msg.By = "timeout"
		}
	case errors.Is(err, errPastDeadline):
		msg.Text, msg.By = "timed out", "timeout"
	default:
		msg.Text = "can no longer be answered here"
	}
	body, jerr := json.Marshal(msg)
	if jerr != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), channelRetractTimeout)
	defer cancel()
	_ = w.post(ctx, body)
}

// post sends a signed body to URL and wants a 2xx back.
func (w *Webhook) post(ctx context.Context, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, webhookPostTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoAnswer, redactURL(err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "acp-broker")
	req.Header.Set("X-Acp-Broker-Signature", webhookSignature(w.Secret, body))
	client := w.HTTPClient
	if client == nil {
		client = httpChannelClient()
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoAnswer, redactURL(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%w: the receiver answered %s", ErrNoAnswer, httpStatusText(resp.StatusCode))
	}
	return nil
}

// webhookSignature is the X-Acp-Broker-Signature header value for a body
// signed with secret: "sha256=" and the hex HMAC-SHA256 of the body.
func webhookSignature(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}
