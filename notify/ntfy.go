package notify

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acp-broker/acp-broker/elicit"
)

// Ntfy asks on a phone through an ntfy server (https://ntfy.sh or a
// self-hosted one), with no port open on this machine.
//
// Ask publishes the prompt to Topic as a notification with up to three
// buttons: "Allow once", "Always" (only when the agent offered it) and
// "Reject". Each button is an ntfy "http" action that publishes a signed
// answer token to ReplyTopic, which Ask reads as a subscriber. A token names
// the request, its digest, one option, a nonce of this one Ask and an expiry,
// and is signed with Secret (HMAC-SHA256): a message on ReplyTopic that is not
// such a token for this Ask, with a valid signature and not expired, is
// ignored, whoever published it. The notification carries the tokens, so
// whoever can read Topic can answer; the signature stops anyone from making
// up an answer, or replaying one, for a request they were not shown.
//
// When the request ends (answered here or elsewhere, withdrawn, timed out),
// Ask replaces the notification, buttons and all, with one line saying what
// happened ("answered in the editor: allowed") and, when the broker ended it
// itself, why ("timed out: rejected (nobody answered within 5m)"; at the
// prompt's deadline Ask waits a moment for ctx to say so), by publishing
// again with the same sequence ID (ntfy 2.16 and later; an older server
// shows it as a second notification).
//
// A question (an agent's elicitation) is shown as its message. A form that
// asks one thing among at most three choices (one string field with
// choices; any other field optional), each labelled in plain printable
// ASCII so that no lookalike letter can pass for the broker's own words,
// gets a numbered button per choice ("1. Staging"), each a signed token
// that accepts with that choice and nothing else, bound to the request as
// an option's is; with one or two choices the last button is the broker's
// "Decline", with three the text says where the question can be declined
// (QuestionPointer). Every other question gets "Decline" alone. A URL-mode
// question shows the URL's host and the whole URL, which nothing here ever
// opens or fetches, and no button to accept: a phone may show a
// notification cut short, so tapping "accept" would not mean the human saw
// where it leads. A question without choice buttons says where it can be
// answered.
//
// The phone publishes to ReplyTopic without Token: the reply topic must let
// the phone's ntfy app write to it (anonymous write, or the app's own
// credentials for that server), and Token must let the broker read it.
type Ntfy struct {
	// ChannelName is the channel's name from the config.
	ChannelName string
	// Server is the ntfy server's base URL, e.g. "https://ntfy.sh".
	Server string
	// Topic is where prompts are published.
	Topic string
	// ReplyTopic is where the phone's buttons publish answers; Ask
	// subscribes to it. It must differ from Topic.
	ReplyTopic string
	// Token, if not empty, is sent as "Authorization: Bearer <Token>" on
	// every request to Server. It never appears in errors.
	Token string
	// Secret is the HMAC-SHA256 key that signs the answer each button
	// carries: at least 16 bytes. It never appears in errors.
	Secret []byte
	// HTTPClient makes the requests; nil means a client with connect,
	// TLS and response-header timeouts that follows no redirects.
	HTTPClient *http.Client
}

// Name is the channel's name.
func (n *Ntfy) Name() string { return n.ChannelName }

const (
	// ntfyMessageLimit keeps a notification's body under the 4096 bytes
	// past which ntfy turns a message into an attachment.
	ntfyMessageLimit = 3800
	ntfyTitleLimit   = 200
	// ntfyTokenTTL is how long an answer token is valid when the prompt
	// has no deadline.
	ntfyTokenTTL = 24 * time.Hour
	// ntfyOpenTimeout bounds how long a subscription may take to start.
	ntfyOpenTimeout = 20 * time.Second
	// ntfyIdleTimeout ends a subscription that has sent nothing, not even
	// a keepalive (ntfy sends one every 45 s by default), for this long.
	ntfyIdleTimeout = 2 * time.Minute
	// ntfyRedials is how many times in a row Ask tries to subscribe again
	// after the subscription broke before it gives up.
	ntfyRedials = 6
	// ntfyMaxLine bounds one line of the subscription stream.
	ntfyMaxLine = 1 << 20
	// ntfyTokenLimit bounds the size of a message that may be a token.
	ntfyTokenLimit = 2048
	// ntfyTokenDomain separates answer-token signatures from anything else
	// the same key might sign.
	ntfyTokenDomain = "acp-broker/ntfy-answer/v1."
)

// ntfyTopicName is what ntfy accepts as a topic name.
var ntfyTopicName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[-_A-Za-z0-9]{1,64}$`) })

// Ask publishes p and waits for the phone's answer; see Ntfy.
func (n *Ntfy) Ask(ctx context.Context, p Prompt) (Answer, error) {
	if err := n.check(); err != nil {
		return Answer{}, err
	}
	if err := ctx.Err(); err != nil {
		return Answer{}, err
	}
	if !p.Deadline.IsZero() && !time.Now().Before(p.Deadline) {
		return Answer{}, n.errorf("%w: %w", errPastDeadline, ErrNoAnswer)
	}
	exp := time.Now().Add(ntfyTokenTTL)
	if !p.Deadline.IsZero() {
		exp = p.Deadline
	}
	a := ntfyAsk{nonce: secureRandomToken(16), exp: exp.Unix()}
	if p.IsQuestion() {
		form, err := p.CheckQuestion()
		if err != nil {
			return Answer{}, n.errorf("%w", err)
		}
		a.form = form
	}
	msg, err := n.promptMessage(p, &a)
	if err != nil {
		return Answer{}, err
	}
	client := n.client()

	// Subscribe before publishing: the first answer can only be published
	// after the notification, so none is missed.
	stream, err := n.subscribe(ctx, client, "")
	if err != nil {
		if ctx.Err() != nil {
			return Answer{}, ctx.Err()
		}
		return Answer{}, err
	}
	defer func() { stream.close() }()
	published := time.Now()
	if err := n.publish(ctx, client, msg); err != nil {
		if ctx.Err() != nil {
			// The server may have published it before ctx ended.
			n.retract(ctx, client, p, msg, ntfyRetraction(ctx, p, Answer{}, ctx.Err()))
			return Answer{}, ctx.Err()
		}
		return Answer{}, n.errorf("publish the prompt: %w", err)
	}

	ans, err := n.wait(ctx, client, &stream, p, &a, published)
	if errors.Is(err, errPastDeadline) {
		awaitOutcome(ctx)
	}
	n.retract(ctx, client, p, msg, ntfyRetraction(ctx, p, ans, err))
	return ans, err
}

// ntfyAsk is what one Ask's tokens share.
type ntfyAsk struct {
	nonce string
	exp   int64 // unix seconds
	// form is a form question's, read once.
	form *elicit.Form
}

// check validates the configuration; its errors name no secret.
func (n *Ntfy) check() error {
	u, err := url.Parse(n.Server)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return n.errorf("the server must be an http or https URL")
	case !ntfyTopicName().MatchString(n.Topic):
		return n.errorf("the topic must be 1 to 64 letters, digits, '-' or '_'")
	case !ntfyTopicName().MatchString(n.ReplyTopic):
		return n.errorf("the reply topic must be 1 to 64 letters, digits, '-' or '_'")
	case n.Topic == n.ReplyTopic:
		return n.errorf("the reply topic must differ from the topic")
	case len(n.Secret) < 16:
		return n.errorf("the answer secret must be at least 16 bytes")
	case strings.ContainsAny(n.Token, "\r\n"):
		return n.errorf("the token must be one line")
	}
	return nil
}

func (n *Ntfy) errorf(format string, args ...any) error {
	return fmt.Errorf("ntfy %s: "+format, append([]any{n.ChannelName}, args...)...)
}

func (n *Ntfy) client() *http.Client {
	if n.HTTPClient != nil {
		return n.HTTPClient
	}
	return httpChannelClient()
}

func (n *Ntfy) base() string { return strings.TrimRight(n.Server, "/") }

func (n *Ntfy) authorize(req *http.Request) {
	if n.Token != "" {
		req.Header.Set("Authorization", "Bearer "+n.Token)
	}
}

// ntfyPublish is ntfy's JSON publishing format.
type ntfyPublish struct {
	Topic      string       `json:"topic"`
	SequenceID string       `json:"sequence_id,omitempty"`
	Title      string       `json:"title,omitempty"`
	Message    string       `json:"message"`
	Priority   int          `json:"priority,omitempty"`
	Tags       []string     `json:"tags,omitempty"`
	Actions    []ntfyAction `json:"actions,omitempty"`
}

// ntfyAction is an ntfy action button; only "http" ones are made here.
type ntfyAction struct {
	Action string `json:"action"`
	Label  string `json:"label"`
	URL    string `json:"url"`
	Method string `json:"method,omitempty"`
	Body   string `json:"body,omitempty"`
	Clear  bool   `json:"clear,omitempty"`
}

// promptMessage is the notification for p, its buttons carrying signed
// answers.
func (n *Ntfy) promptMessage(p Prompt, a *ntfyAsk) (ntfyPublish, error) {
	if p.IsQuestion() {
		return n.questionMessage(p, a)
	}
	buttons := []struct {
		label string
		kinds []string
	}{
		{"Allow once", []string{"allow_once"}},
		{"Always", []string{"allow_always"}},
		{"Reject", []string{"reject_once", "reject_always"}},
	}
	msg := ntfyPublish{
		Topic:      n.Topic,
		SequenceID: "acpb" + hex.EncodeToString(secureRandom(12)),
		Title:      ntfyTitle(p),
		Message:    ntfyBody(p),
		Priority:   4,
		Tags:       []string{"lock"},
	}
	for _, b := range buttons {
		for _, kind := range b.kinds {
			opt, err := p.Choose("", kind)
			if err != nil {
				continue
			}
			token := ntfySign(n.Secret, ntfyClaims{
				V: 1, ID: p.ID, Digest: p.Digest, OptionID: opt.ID, Exp: a.exp, Nonce: a.nonce,
			})
			msg.Actions = append(msg.Actions, ntfyAction{
				Action: "http",
				Label:  b.label,
				URL:    n.base() + "/" + n.ReplyTopic,
				Method: http.MethodPost,
				Body:   token,
				Clear:  true,
			})
			break
		}
	}
	if len(msg.Actions) == 0 {
		return ntfyPublish{}, n.errorf("the request offers no option a button can answer: %w", ErrNoAnswer)
	}
	return msg, nil
}

// ntfyMaxButtons is how many actions ntfy allows a notification.
const ntfyMaxButtons = 3

// questionMessage is the notification for a question; see Ntfy.
func (n *Ntfy) questionMessage(p Prompt, a *ntfyAsk) (ntfyPublish, error) {
	form := a.form
	msg := ntfyPublish{
		Topic:      n.Topic,
		SequenceID: "acpb" + hex.EncodeToString(secureRandom(12)),
		Title:      ntfyTitle(p),
		Priority:   4,
		Tags:       []string{"question"},
	}
	button := func(label, action, content string) ntfyAction {
		token := ntfySign(n.Secret, ntfyClaims{
			V: 1, ID: p.ID, Digest: p.Digest, Action: action, Content: content, Exp: a.exp, Nonce: a.nonce,
		})
		return ntfyAction{Action: "http", Label: label, URL: n.base() + "/" + n.ReplyTopic, Method: http.MethodPost, Body: token, Clear: true}
	}
	var b strings.Builder
	b.WriteString(Truncate(Collapse(p.Message), 1500))
	// A button per choice, as many as ntfy allows; the broker's Decline
	// takes a slot left over.
	msg.Actions = choiceButtons(form, button)
	choices := len(msg.Actions) > 0
	declines := len(msg.Actions) < ntfyMaxButtons
	if declines {
		msg.Actions = append(msg.Actions, button("Decline", ActionDecline, ""))
	}
	switch {
	case p.Mode == "url":
		// CheckQuestion let through only a URL of printable ASCII.
		b.WriteString("\n\nIt asks you to open a URL at the host " + p.URLHost())
		if len(p.URL) <= ntfyMessageLimit-b.Len()-600 {
			b.WriteString(" (nothing opens it for you):\n" + p.URL)
		} else {
			fmt.Fprintf(&b, ", of %d bytes, too long to show here.", len(p.URL))
		}
	case !choices:
		b.WriteString("\n\n" + ntfyFields(form))
	}
	switch {
	case choices && declines:
		b.WriteString("\n\nTap a choice or Decline, or " + p.QuestionPointer())
	case choices:
		// Every slot is a choice: where to decline is said instead.
		b.WriteString("\n\nTap a choice. To decline, " + p.QuestionPointer())
	default:
		pointer := p.QuestionPointer()
		b.WriteString("\n\n" + strings.ToUpper(pointer[:1]) + pointer[1:])
	}
	msg.Message = Truncate(b.String(), ntfyMessageLimit)
	return msg, nil
}

// choiceButtons are the numbered buttons of a form that asks one thing
// among a few choices (singleChoice), each a signed token that accepts with
// that choice and nothing else; none when any choice cannot have one.
func choiceButtons(form *elicit.Form, button func(label, action, content string) ntfyAction) []ntfyAction {
	field := singleChoice(form)
	if field == nil {
		return nil
	}
	// "decline" is the broker's word whether or not its button is shown.
	labels := []string{"decline"}
	var buttons []ntfyAction
	for i, c := range field.Choices {
		label := Truncate(Collapse(c.Label()), 40)
		content, err := form.Content(map[string][]string{field.Name: {c.Value}})
		if err != nil || !plainLabel(c.Label()) || slices.Contains(labels, strings.ToLower(label)) {
			// A label that is empty or not plain ASCII (a Cyrillic
			// "Dеcline" reads as the broker's own), or two that read
			// alike: which button is which would be a guess.
			return nil
		}
		labels = append(labels, strings.ToLower(label))
		act := button(fmt.Sprintf("%d. %s", i+1, label), ActionAccept, string(content))
		if len(act.Body) > ntfyTokenLimit {
			// A choice too long for a token: no buttons rather than
			// some choices without one.
			return nil
		}
		buttons = append(buttons, act)
	}
	return buttons
}

// singleChoice is the field a form asks for when it asks one thing among a
// few choices a button each can answer: the one field with choices, a
// string's, at most as many as ntfy has buttons, every other field
// optional (a button leaves them out). Nil for any other form.
func singleChoice(form *elicit.Form) *elicit.Field {
	if form == nil {
		return nil
	}
	var choice *elicit.Field
	for i := range form.Fields {
		f := &form.Fields[i]
		switch {
		case f.Type == "string" && f.Choices != nil:
			if choice != nil {
				return nil
			}
			choice = f
		case f.Required:
			return nil
		}
	}
	if choice == nil || len(choice.Choices) > ntfyMaxButtons {
		return nil
	}
	return choice
}

// ntfyFields says, one line each, what a form asks for.
func ntfyFields(form *elicit.Form) string {
	var b strings.Builder
	b.WriteString("It asks for:")
	for _, f := range form.Fields {
		label := f.Title
		if label == "" {
			label = f.Name
		}
		kind := f.Type
		if f.Choices != nil {
			var labels []string
			for _, c := range f.Choices {
				labels = append(labels, c.Label())
			}
			kind = "one of " + strings.Join(labels, ", ")
			if f.Type == "array" {
				kind = "any of " + strings.Join(labels, ", ")
			}
		}
		if !f.Required {
			kind += ", optional"
		}
		b.WriteString("\n- " + ntfyOneLine(label) + " (" + Truncate(OneLine(kind), 200) + ")")
		if b.Len() > 1500 {
			b.WriteString("\n…")
			break
		}
	}
	return b.String()
}

func ntfyTitle(p Prompt) string {
	agent := p.Agent
	if agent == "" {
		agent = "the agent"
	}
	return Truncate("acp-broker: "+ntfyOneLine(agent)+" asks", ntfyTitleLimit)
}

func ntfyBody(p Prompt) string {
	var b strings.Builder
	b.WriteString(p.Summary(ntfyMessageLimit - 1000))
	if p.Kind != "" {
		b.WriteString("\n\nkind: " + ntfyOneLine(p.Kind))
	}
	if p.Reason != "" {
		b.WriteString("\nwhy: " + ntfyOneLine(p.Reason))
	}
	if opt, err := p.Choose("", "allow_always"); err == nil && opt.Remembers != "" {
		// The button says "Always": say what it makes the broker remember.
		b.WriteString("\nAlways remembers: " + Truncate(OneLine(opt.Remembers), 500))
	}
	return Truncate(b.String(), ntfyMessageLimit)
}

func ntfyOneLine(s string) string { return Truncate(Collapse(s), 300) }

// plainLabel reports whether a choice's label can be a button's: not empty,
// and printable ASCII only, so that no letter of another script can pass
// for one of the broker's own words.
func plainLabel(s string) bool {
	return strings.TrimSpace(s) != "" && !strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r > '~' })
}

// publish posts msg as JSON to the server.
func (n *Ntfy) publish(ctx context.Context, client *http.Client, msg ntfyPublish) error {
	body, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.base()+"/", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoAnswer, redactURL(err))
	}
	req.Header.Set("Content-Type", "application/json")
	n.authorize(req)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoAnswer, redactURL(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%w: the server answered %s", ErrNoAnswer, httpStatusText(resp.StatusCode))
	}
	return nil
}

// ntfyStream is one subscription to the reply topic. A reader goroutine
// sends its lines to lines, and closes lines when the stream ends.
type ntfyStream struct {
	cancel context.CancelFunc
	lines  chan []byte
	done   chan struct{}
}

// close ends the subscription and waits for its reader. A nil stream is
// closed already.
func (s *ntfyStream) close() {
	if s == nil {
		return
	}
	s.cancel()
	<-s.done
}

// subscribe opens the reply topic's JSON stream, since the given time (a
// unix time, or "" for only new messages), and returns once ntfy has said
// it is open.
func (n *Ntfy) subscribe(ctx context.Context, client *http.Client, since string) (*ntfyStream, error) {
	u := n.base() + "/" + n.ReplyTopic + "/json"
	if since != "" {
		u += "?since=" + url.QueryEscape(since)
	}
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		cancel()
		return nil, n.errorf("subscribe to the reply topic: %w: %w", ErrNoAnswer, redactURL(err))
	}
	n.authorize(req)
	opening := time.AfterFunc(ntfyOpenTimeout, cancel)
	resp, err := client.Do(req)
	if err != nil {
		opening.Stop()
		cancel()
		return nil, n.errorf("subscribe to the reply topic: %w: %w", ErrNoAnswer, redactURL(err))
	}
	if resp.StatusCode != http.StatusOK {
		opening.Stop()
		cancel()
		resp.Body.Close()
		return nil, n.errorf("subscribe to the reply topic: %w: the server answered %s", ErrNoAnswer, httpStatusText(resp.StatusCode))
	}
	s := &ntfyStream{cancel: cancel, lines: make(chan []byte), done: make(chan struct{})}
	go s.read(ctx, resp.Body)

	// ntfy's first line on a stream is an "open" event.
	line, ok := <-s.lines
	stopped := opening.Stop()
	var ev struct {
		Event string `json:"event"`
	}
	switch {
	case !ok || !stopped:
		s.close()
		return nil, n.errorf("subscribe to the reply topic: %w: the stream did not open", ErrNoAnswer)
	case json.Unmarshal(line, &ev) != nil || ev.Event != "open":
		s.close()
		return nil, n.errorf("subscribe to the reply topic: %w: the stream did not start with an open event", ErrNoAnswer)
	}
	return s, nil
}

func (s *ntfyStream) read(ctx context.Context, body io.ReadCloser) {
	defer close(s.done)
	defer body.Close()
	defer close(s.lines)
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 4096), ntfyMaxLine)
	for sc.Scan() {
		line := bytes.Clone(sc.Bytes())
		select {
		case s.lines <- line:
		case <-ctx.Done():
			return
		}
	}
}

// wait reads the reply topic until a valid answer for this Ask arrives, ctx
// ends, the deadline passes, or the subscription is lost for good. It
// subscribes again when the stream breaks or goes quiet, asking for every
// message since the prompt was published.
func (n *Ntfy) wait(ctx context.Context, client *http.Client, stream **ntfyStream, p Prompt, a *ntfyAsk, published time.Time) (Answer, error) {
	var deadline <-chan time.Time
	if !p.Deadline.IsZero() {
		t := time.NewTimer(time.Until(p.Deadline))
		defer t.Stop()
		deadline = t.C
	}
	idle := time.NewTimer(ntfyIdleTimeout)
	defer idle.Stop()
	since := strconv.FormatInt(published.Unix(), 10)
	for {
		var broken bool
		select {
		case line, ok := <-(*stream).lines:
			if !ok {
				broken = true
				break
			}
			idle.Reset(ntfyIdleTimeout)
			if ans, ok := n.answerIn(line, p, a); ok {
				ans.Channel, ans.Who = n.ChannelName, "ntfy"
				return ans, nil
			}
		case <-idle.C:
			broken = true
		case <-deadline:
			return Answer{}, n.errorf("%w: %w", errPastDeadline, ErrNoAnswer)
		case <-ctx.Done():
			return Answer{}, ctx.Err()
		}
		if !broken {
			continue
		}
		(*stream).close()
		*stream = nil
		s, err := n.resubscribe(ctx, client, since, deadline)
		if err != nil {
			return Answer{}, err
		}
		*stream = s
		idle.Reset(ntfyIdleTimeout)
	}
}

// resubscribe tries to subscribe again, first at once and then after
// growing pauses, and gives up after ntfyRedials attempts.
func (n *Ntfy) resubscribe(ctx context.Context, client *http.Client, since string, deadline <-chan time.Time) (*ntfyStream, error) {
	var last error
	pause := time.Duration(0)
	for range ntfyRedials {
		if pause > 0 {
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-deadline:
				t.Stop()
				return nil, n.errorf("%w: %w", errPastDeadline, ErrNoAnswer)
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			}
		}
		s, err := n.subscribe(ctx, client, since)
		if err == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		last = err
		pause = max(time.Second, 2*pause)
	}
	return nil, fmt.Errorf("%w (the subscription broke; %d attempts to resume failed)", last, ntfyRedials)
}

// answerIn reports whether a line of the reply stream is a valid answer
// to this Ask, and which option it chose (or, for a question, its action
// and content). Anything else is ignored.
func (n *Ntfy) answerIn(line []byte, p Prompt, a *ntfyAsk) (Answer, bool) {
	var m struct {
		Event   string `json:"event"`
		Message string `json:"message"`
	}
	if json.Unmarshal(line, &m) != nil || m.Event != "message" {
		return Answer{}, false
	}
	c, ok := ntfyVerify(n.Secret, m.Message)
	if !ok || c.V != 1 || c.Nonce != a.nonce || c.ID != p.ID || c.Digest != p.Digest || !time.Now().Before(time.Unix(c.Exp, 0)) {
		return Answer{}, false
	}
	if p.IsQuestion() {
		if c.OptionID != "" {
			return Answer{}, false
		}
		// The token was made from the form; it is checked again all
		// the same, as every answer is.
		ans, err := p.ReplyTo(a.form, c.Action, json.RawMessage(c.Content))
		return ans, err == nil
	}
	if c.Action != "" || c.Content != "" {
		return Answer{}, false
	}
	opt, err := p.Choose(c.OptionID, "")
	if err != nil {
		return Answer{}, false
	}
	return Answer{OptionID: opt.ID}, true
}

// ntfyClaims is what an answer token says.
type ntfyClaims struct {
	V        int    `json:"v"`
	ID       string `json:"id"`
	Digest   string `json:"digest"`
	OptionID string `json:"optionId"`
	// Action and Content answer a question: a button accepts with one
	// choice, or declines.
	Action  string `json:"action,omitempty"`
	Content string `json:"content,omitempty"`
	Exp     int64  `json:"exp"`
	Nonce   string `json:"nonce"`
}

// tokenEncoding is strict base64url: one encoding per value.
var tokenEncoding = base64.RawURLEncoding.Strict()

// ntfySign makes an answer token: base64url(JSON claims) "." base64url(HMAC).
func ntfySign(secret []byte, c ntfyClaims) string {
	payload, err := json.Marshal(c)
	if err != nil {
		panic(err) // strings and ints always marshal
	}
	p := tokenEncoding.EncodeToString(payload)
	return p + "." + tokenEncoding.EncodeToString(ntfyMAC(secret, p))
}

func ntfyMAC(secret []byte, payload string) []byte {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ntfyTokenDomain))
	mac.Write([]byte(payload))
	return mac.Sum(nil)
}

// ntfyVerify checks a token's signature in constant time and returns its
// claims.
func ntfyVerify(secret []byte, token string) (ntfyClaims, bool) {
	token = strings.TrimSpace(token)
	if len(token) > ntfyTokenLimit {
		return ntfyClaims{}, false
	}
	payload, sig, ok := strings.Cut(token, ".")
	if !ok || payload == "" {
		return ntfyClaims{}, false
	}
	got, err := tokenEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, ntfyMAC(secret, payload)) {
		return ntfyClaims{}, false
	}
	raw, err := tokenEncoding.DecodeString(payload)
	if err != nil {
		return ntfyClaims{}, false
	}
	var c ntfyClaims
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if dec.Decode(&c) != nil {
		return ntfyClaims{}, false
	}
	return c, true
}

// ntfyRetraction says what became of the request, for the notification
// that replaces the prompt.
func ntfyRetraction(ctx context.Context, p Prompt, ans Answer, err error) string {
	switch {
	case err == nil && ans.Action != "":
		return "answered on the phone: " + actionWords(ans.Action)
	case err == nil:
		opt, _ := p.Choose(ans.OptionID, "") // answerIn chose it
		return "answered on the phone: " + optionKindWords(opt.Kind)
	case ctx.Err() != nil:
		return retractionText(context.Cause(ctx))
	case errors.Is(err, errPastDeadline):
		return "timed out"
	}
	return "can no longer be answered here"
}

// retract replaces the prompt's notification, buttons and all, with text,
// by publishing again with its sequence ID. It is best effort and bounded:
// ctx may have ended already.
func (n *Ntfy) retract(ctx context.Context, client *http.Client, p Prompt, prompt ntfyPublish, text string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), channelRetractTimeout)
	defer cancel()
	_ = n.publish(ctx, client, ntfyPublish{
		Topic:      n.Topic,
		SequenceID: prompt.SequenceID,
		Title:      prompt.Title,
		Message:    Truncate(text+"\n\n"+p.Summary(1000), ntfyMessageLimit),
		Priority:   2, // quiet: the human need not look again
		Tags:       []string{"white_check_mark"},
	})
}

// errPastDeadline is why a channel stops waiting at the prompt's deadline.
var errPastDeadline = errors.New("the request's deadline passed")

// outcomeGrace bounds how long a channel whose prompt's deadline passed
// waits for the asker to end its ctx with what became of the request (the
// broker answers it at that very deadline), so that the text replacing the
// prompt says how and why, not only "timed out". A var so that tests can
// lengthen it.
var outcomeGrace = 2 * time.Second

// awaitOutcome waits for ctx to end, for at most outcomeGrace.
func awaitOutcome(ctx context.Context) {
	t := time.NewTimer(outcomeGrace)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// channelRetractTimeout bounds how long a channel spends retracting a
// prompt after its request ended.
const channelRetractTimeout = 5 * time.Second

// retractionText says in one line why a prompt was withdrawn, from
// context.Cause: "answered in the editor: allowed", "timed out: rejected
// (nobody answered within 5m)", "withdrawn".
func retractionText(cause error) string {
	var o *Outcome
	if errors.As(cause, &o) {
		decision := map[string]string{
			"allow": "allowed", "deny": "rejected", "cancelled": "cancelled",
		}[o.Decision]
		if decision == "" {
			decision = actionWords(o.Decision) // a question's, or as it is
		}
		var text string
		switch o.By {
		case "editor":
			text = "answered in the editor"
		case "timeout":
			text = "timed out"
		case "cancel":
			text, decision = "withdrawn: the turn was cancelled", ""
		case "agent":
			text = "withdrawn by the agent"
		case "broker":
			text = "answered by the broker"
		case "":
			text = "answered elsewhere"
		default:
			text = "answered on " + OneLine(o.By)
		}
		if decision != "" {
			text += ": " + decision
		}
		if why := outcomeReason(o); why != "" {
			text += " (" + why + ")"
		}
		return text
	}
	if errors.Is(cause, context.DeadlineExceeded) {
		return "timed out"
	}
	if cause != nil && !errors.Is(cause, context.Canceled) {
		return cause.Error() // the asker's own words, e.g. a cancelled turn
	}
	return "withdrawn"
}

// outcomeReason is an Outcome's Reason as the channels show it: one line
// of plain text, cut short.
func outcomeReason(o *Outcome) string { return Truncate(Collapse(o.Reason), 300) }

// actionWords says what a question's answer did.
func actionWords(action string) string {
	switch action {
	case ActionAccept:
		return "accepted"
	case ActionDecline:
		return "declined"
	case ActionCancel:
		return "cancelled"
	}
	return action
}

// optionKindWords says what an option of this kind does.
func optionKindWords(kind string) string {
	switch kind {
	case "allow_once":
		return "allowed once"
	case "allow_always":
		return "always allowed"
	case "reject_once":
		return "rejected"
	case "reject_always":
		return "always rejected"
	}
	return kind
}

// httpChannelClient is the client the HTTP channels use when they are given
// none: bounded connects, TLS handshakes and waits for response headers, no
// overall timeout (a subscription is a long stream), and no redirects (a
// signed body or a token is sent only where it was configured to go).
var httpChannelClient = sync.OnceValue(func() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:     true,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: 20 * time.Second,
			IdleConnTimeout:       90 * time.Second,
			MaxIdleConnsPerHost:   4,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
})

// redactURL drops the URL from a request error: URLs may hold topics, paths
// or user info that are secrets of their own.
func redactURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Errorf("%s: timed out", strings.ToLower(ue.Op))
		}
		return fmt.Errorf("%s: %w", strings.ToLower(ue.Op), ue.Err)
	}
	return err
}

func httpStatusText(code int) string {
	return strconv.Itoa(code) + " " + http.StatusText(code)
}

func secureRandom(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return b
}

// secureRandomToken is n random bytes, base64url.
func secureRandomToken(n int) string { return tokenEncoding.EncodeToString(secureRandom(n)) }
