// Package notify asks a human outside the editor: it shows a permission
// request on a channel (a command such as notify-send, a phone through ntfy,
// a webhook, another terminal) and brings back the answer.
//
// It owns the channels and the prompt they carry. It decides nothing, never
// picks an answer itself, and never turns a failure or a timeout into one:
// a channel that cannot get an answer returns an error, and the caller goes
// on waiting for the other places the request was sent.
package notify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/acp-broker/acp-broker/elicit"
	"github.com/acp-broker/acp-broker/jsonrpc"
)

// PromptVersion is the version of the Prompt object that channels receive.
const PromptVersion = 1

// Prompt is what a channel shows the human: one permission request.
type Prompt struct {
	Version int `json:"version"`
	// ID names the request among every pending one of this user's brokers.
	ID      string `json:"id"`
	Session string `json:"session,omitempty"`
	Agent   string `json:"agent"`
	Title   string `json:"title,omitempty"`
	Kind    string `json:"kind,omitempty"`
	// Commands, Paths, URLs and MCP say what the request would do.
	Commands []string `json:"commands,omitempty"`
	Paths    []string `json:"paths,omitempty"`
	URLs     []string `json:"urls,omitempty"`
	MCP      string   `json:"mcp,omitempty"`
	// Reason says why the broker asks.
	Reason string `json:"reason,omitempty"`
	// Options are the answers a permission request offers; a question has
	// none.
	Options []Option `json:"options"`
	// Message, Mode, RequestedSchema, URL and ElicitationID are set for a
	// question, an agent's elicitation/create, as the agent sent them:
	// Mode is "form" (RequestedSchema says the fields) or "url" (the human
	// consents to open URL, which is never fetched). Its answer is an
	// Answer's Action and Content.
	Message         string          `json:"message,omitempty"`
	Mode            string          `json:"mode,omitempty"`
	RequestedSchema json.RawMessage `json:"requestedSchema,omitempty"`
	URL             string          `json:"url,omitempty"`
	ElicitationID   string          `json:"elicitationId,omitempty"`
	// Deadline is when the request will be rejected unanswered; zero for
	// none.
	Deadline time.Time `json:"deadline,omitzero"`
	// Digest binds an answer to this request's exact content: a channel's
	// answer must carry it.
	Digest string `json:"digest"`
}

// Option is one of the answers the agent offered.
type Option struct {
	ID   string `json:"id"`
	Kind string `json:"kind"` // allow_once, allow_always, reject_once, reject_always
	Name string `json:"name"`
	// Remembers, for an "always" option, says in the broker's own words
	// what choosing it makes the broker remember (the option's name is the
	// agent's text and may say otherwise).
	Remembers string `json:"remembers,omitempty"`
}

// Digest computes a request's digest from its exact bytes.
func Digest(request []byte) string {
	sum := sha256.Sum256(request)
	return hex.EncodeToString(sum[:])
}

// IsQuestion reports whether the prompt is a question (an elicitation)
// rather than a permission request.
func (p Prompt) IsQuestion() bool { return p.Mode != "" }

// Answer is a human's answer, as a channel brought it back.
type Answer struct {
	// OptionID is the chosen option of a permission request; it is always
	// one of the prompt's.
	OptionID string
	// Action answers a question: "accept", "decline" or "cancel". Content
	// is, for an accepted form, the fields' values as the text of a JSON
	// object (a string keeps Answer comparable), which the channel has
	// checked against the prompt's RequestedSchema (and the broker checks
	// again).
	Action  string
	Content string
	Channel string // which channel answered
	Who     string // who answered, where the channel knows
}

// Channel shows prompts somewhere and brings back answers.
type Channel interface {
	// Name is the channel's name from the config.
	Name() string
	// Ask shows the prompt and waits for the human's answer. When ctx ends
	// first (the request was answered elsewhere, withdrawn, or timed out),
	// Ask retracts the prompt where it can (context.Cause(ctx) says what
	// happened, as an *Outcome when it is known) and returns ctx's error.
	// Any failure to get an answer is an error, never an answer.
	Ask(ctx context.Context, p Prompt) (Answer, error)
}

// Outcome is why a prompt was retracted, for channels that can say so.
type Outcome struct {
	By       string // "editor", a channel's name, "timeout", "cancel"
	Decision string // "allow", "deny", "cancelled"
	// Reason, when the broker answered itself, says why in one line of the
	// broker's own words: "nobody answered within 5m".
	Reason string
}

func (o *Outcome) Error() string {
	s := "answered by " + o.By
	if o.Decision != "" {
		s = fmt.Sprintf("answered %s by %s", o.Decision, o.By)
	}
	if o.Reason != "" {
		s += ": " + o.Reason
	}
	return s
}

// ErrNoAnswer is what a channel returns when it got no usable answer.
var ErrNoAnswer = errors.New("no answer")

// Choose maps what a human sent back, an option id or a decision kind
// ("allow_once", "allow_always", "reject_once", "reject_always"), to one of
// the prompt's options. Anything else is no answer: an answer can only choose
// among the options the agent offered.
func (p Prompt) Choose(optionID, kind string) (Option, error) {
	switch {
	case optionID != "" && kind != "":
		return Option{}, fmt.Errorf("%w: both an option and a decision", ErrNoAnswer)
	case optionID != "":
		i := slices.IndexFunc(p.Options, func(o Option) bool { return o.ID == optionID })
		switch {
		case i < 0:
			return Option{}, fmt.Errorf("%w: option %q was not offered", ErrNoAnswer, optionID)
		case slices.ContainsFunc(p.Options[i+1:], func(o Option) bool { return o.ID == optionID }):
			// Two choices share the id: which one was meant is unknown.
			return Option{}, fmt.Errorf("%w: option %q was offered twice", ErrNoAnswer, optionID)
		}
		return p.Options[i], nil
	case kind != "":
		if i := slices.IndexFunc(p.Options, func(o Option) bool { return o.Kind == kind }); i >= 0 {
			return p.Options[i], nil
		}
		return Option{}, fmt.Errorf("%w: no %s option was offered", ErrNoAnswer, kind)
	}
	return Option{}, fmt.Errorf("%w: the answer names no option", ErrNoAnswer)
}

// Summary is a short text of what the prompt asks, for notification bodies:
// the commands, paths, URLs or tool the human is approving, one a line, cut
// safely to at most limit bytes of whole characters. Each part is the
// agent's text made one line (OneLine), so that it cannot fake a line of its
// own ("acp-broker: verified") nor drive a terminal; and when they do not
// all fit, each is cut to its share and the count of those left out is
// said, so that a long first command cannot push the next out of sight.
//
// A question's summary is its message made one line and, in URL mode, the
// URL on a line of its own, never cut: when it does not fit, the summary says
// so and where to see it whole (QuestionPointer).
func (p Prompt) Summary(limit int) string {
	if p.IsQuestion() {
		return p.questionSummary(limit)
	}
	var parts []string
	parts = append(parts, p.Commands...)
	parts = append(parts, p.Paths...)
	parts = append(parts, p.URLs...)
	if p.MCP != "" {
		parts = append(parts, "MCP "+p.MCP)
	}
	if len(parts) == 0 {
		parts = append(parts, p.Title)
	}
	for i := range parts {
		parts[i] = OneLine(parts[i])
	}
	if all := strings.Join(parts, "\n"); len(all) <= limit {
		return all
	}
	const reserve = len("\n(+99999 more not shown)")
	share := max((limit-reserve)/len(parts)-1, 24)
	var b strings.Builder
	shown := 0
	for _, part := range parts {
		part = Truncate(part, share)
		if shown > 0 && b.Len()+1+len(part) > limit-reserve {
			break
		}
		if shown > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(part)
		shown++
	}
	if rest := len(parts) - shown; rest > 0 {
		fmt.Fprintf(&b, "\n(+%d more not shown)", rest)
	}
	return Truncate(b.String(), limit)
}

// OneLine makes the agent's text one line that shows what it holds: control
// characters (newlines, escape sequences), format characters (bidirectional
// overrides, zero-width ones) and line separators are written as escapes
// (\n, \x1b, \u202e), and invalid UTF-8 as \ufffd.
func OneLine(s string) string {
	if !strings.ContainsFunc(s, Hidden) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if Hidden(r) {
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Collapse is OneLine for text that may hold runs of spaces: each run of
// white space (tabs, newlines, U+3000 and the other wide ones) becomes one
// space, so that the agent's text cannot lay out a line of its own with
// them either.
func Collapse(s string) string { return OneLine(strings.Join(strings.Fields(s), " ")) }

// Hidden reports whether a character would not show as itself on a
// terminal or in a notification: control, format (a bidirectional override
// reorders what follows) and line or paragraph separators, and U+FFFD.
func Hidden(r rune) bool {
	return r == utf8.RuneError || unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}

// Truncate cuts s to at most limit bytes without splitting a character, and
// marks the cut.
func Truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	const mark = "…"
	if limit < len(mark) {
		return ""
	}
	cut := limit - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// The actions that answer a question.
const (
	ActionAccept  = "accept"
	ActionDecline = "decline"
	ActionCancel  = "cancel"
)

// Form reads a form-mode question's RequestedSchema. Its error means the
// broker cannot check answers to it exactly, so no channel may answer it:
// only the editor can.
func (p Prompt) Form() (*elicit.Form, error) {
	if p.Mode != "form" {
		return nil, fmt.Errorf("not a form question (mode %q)", p.Mode)
	}
	form, err := elicit.ParseSchema(p.RequestedSchema)
	if err != nil {
		return nil, fmt.Errorf("%w: this question can be answered only in the editor: %w", ErrNoAnswer, err)
	}
	return form, nil
}

// CheckQuestion says whether a channel can answer the question at all: a
// form whose schema the broker can check, or a URL to consent to that is
// an absolute http or https URL whose host can be shown as it is
// (URLHost). The form is nil in URL mode.
func (p Prompt) CheckQuestion() (*elicit.Form, error) {
	switch p.Mode {
	case "form":
		return p.Form()
	case "url":
		if _, err := urlHost(p.URL); err != nil {
			return nil, fmt.Errorf("%w: this question can be answered only in the editor: %w", ErrNoAnswer, err)
		}
		return nil, nil
	}
	return nil, fmt.Errorf("%w: a question of mode %q can be answered only in the editor", ErrNoAnswer, p.Mode)
}

// URLHost is the host a URL question's URL leads to, in ASCII (a lookalike
// name shows as its punycode, xn--...): channels show it beside the whole
// URL, whose user part or path may read as another host. It is "" when the
// URL is not one CheckQuestion accepts.
func (p Prompt) URLHost() string {
	host, _ := urlHost(p.URL)
	return host
}

// urlHost reads the host of a URL a question asks the human to open. It
// refuses what a browser would not read as this host: a URL that is not an
// absolute RFC 3986 one (spaces, non-ASCII, a backslash), not http or https,
// without "//" and a host ("https:evil.example" is evil.example to a
// browser), or with a percent escape in its host (a browser decodes it to a
// name that need not be ASCII).
func urlHost(raw string) (string, error) {
	if raw == "" {
		return "", errors.New("a URL question without a URL")
	}
	shown := OneLine(Truncate(raw, 80))
	if !elicit.IsAbsoluteURI(raw) {
		return "", fmt.Errorf("the URL %q is not an absolute URI", shown)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("the URL %q: %w", shown, err)
	}
	scheme := strings.ToLower(u.Scheme)
	rest, slashes := strings.CutPrefix(raw[len(u.Scheme)+1:], "//")
	// The host as written: u.Host has its escapes decoded.
	authority, _, _ := strings.Cut(rest, "/")
	authority, _, _ = strings.Cut(authority, "?")
	authority, _, _ = strings.Cut(authority, "#")
	written := authority[strings.LastIndexByte(authority, '@')+1:]
	switch {
	case scheme != "http" && scheme != "https":
		return "", fmt.Errorf("the URL %q is not http or https", shown)
	case !slashes || u.Hostname() == "":
		return "", fmt.Errorf("the URL %q names no host", shown)
	case strings.Contains(written, "%"):
		return "", fmt.Errorf("the URL %q escapes its host", shown)
	case len(u.Hostname()) > 253:
		return "", fmt.Errorf("the URL's host is %d bytes, longer than a host name can be", len(u.Hostname()))
	}
	return strings.ToLower(u.Hostname()), nil
}

// onWire is p as a channel sends it as JSON: a question's options are [],
// not null, as the README says.
func onWire(p Prompt) Prompt {
	if p.Options == nil {
		p.Options = []Option{}
	}
	return p
}

// Reply makes an answer to the question from what a human sent back: an
// action and, to accept a form, its content (a JSON object; absent or null
// for none, which is {}). Content that does not satisfy the form is no
// answer: the error says which field is wrong and why. URL mode's accept
// (consent to open the URL) carries no content.
func (p Prompt) Reply(action string, content json.RawMessage) (Answer, error) {
	if !p.IsQuestion() {
		return Answer{}, fmt.Errorf("%w: not a question", ErrNoAnswer)
	}
	form, err := p.CheckQuestion()
	if err != nil {
		return Answer{}, err
	}
	return p.ReplyTo(form, action, content)
}

// ReplyTo is Reply with the form CheckQuestion returned, so that a channel
// reads the question's schema once per Ask, not once per answer it is sent.
func (p Prompt) ReplyTo(form *elicit.Form, action string, content json.RawMessage) (Answer, error) {
	switch {
	case !p.IsQuestion():
		return Answer{}, fmt.Errorf("%w: not a question", ErrNoAnswer)
	case p.Mode == "form" && form == nil:
		return Answer{}, fmt.Errorf("%w: a form question answered without its form", ErrNoAnswer)
	case p.Mode != "form" && form != nil:
		return Answer{}, fmt.Errorf("%w: a %s question answered as a form", ErrNoAnswer, OneLine(Truncate(p.Mode, 40)))
	case p.Mode != "form" && p.Mode != "url":
		return Answer{}, fmt.Errorf("%w: a question of mode %q can be answered only in the editor", ErrNoAnswer, OneLine(Truncate(p.Mode, 40)))
	}
	content = bytes.TrimSpace(content)
	absent := len(content) == 0 || string(content) == "null"
	switch action {
	case ActionDecline, ActionCancel:
		if !absent {
			return Answer{}, fmt.Errorf("%w: a %s carries no content", ErrNoAnswer, action)
		}
		return Answer{Action: action}, nil
	case ActionAccept:
	case "":
		return Answer{}, fmt.Errorf("%w: the answer names no action (accept, decline or cancel)", ErrNoAnswer)
	default:
		return Answer{}, fmt.Errorf("%w: action %q is not accept, decline or cancel", ErrNoAnswer, OneLine(Truncate(action, 40)))
	}
	if form == nil {
		if !absent {
			return Answer{}, fmt.Errorf("%w: consent to open a URL carries no content", ErrNoAnswer)
		}
		return Answer{Action: ActionAccept}, nil
	}
	if absent {
		content = json.RawMessage("{}")
	}
	if err := form.Validate(content); err != nil {
		return Answer{}, fmt.Errorf("%w: %w", ErrNoAnswer, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, content); err != nil {
		return Answer{}, fmt.Errorf("%w: %w", ErrNoAnswer, err)
	}
	return Answer{Action: ActionAccept, Content: compact.String()}, nil
}

// parseQuestionReply reads a human's answer to a question as a channel
// brought it back: exactly one strict JSON object (no member repeated or
// differing from another only in case, at any depth) with an "action"
// string and, optionally, "content"; other members are ignored.
func parseQuestionReply(data []byte) (action string, content json.RawMessage, err error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return "", nil, errors.New("nothing")
	}
	if err := jsonrpc.Strict(data); err != nil {
		return "", nil, err
	}
	members, err := jsonrpc.ExactMembers(data, "action", "content")
	if err != nil {
		return "", nil, err
	}
	raw, ok := members["action"]
	if !ok {
		return "", nil, errors.New(`no "action"`)
	}
	if err := json.Unmarshal(raw, &action); err != nil {
		return "", nil, errors.New(`"action" is not a string`)
	}
	return action, members["content"], nil
}

// QuestionPointer says where a question can be answered when a channel
// cannot take the whole answer.
func (p Prompt) QuestionPointer() string {
	return "answer it in the editor or with: acp-broker answer " + OneLine(p.ID)
}

// questionSummary is Summary for a question.
func (p Prompt) questionSummary(limit int) string {
	msg := Collapse(p.Message)
	if msg == "" {
		msg = "(no message)"
	}
	if p.Mode != "url" {
		return Truncate(msg, limit)
	}
	host := p.URLHost()
	if host == "" {
		host = "none the broker can read"
	}
	url := "URL (host " + OneLine(host) + "): " + OneLine(p.URL)
	if len(url) > limit-len("…") {
		url = fmt.Sprintf("URL (host %s): %d bytes, too long to show here: %s", OneLine(host), len(p.URL), p.QuestionPointer())
	}
	if len(url) > limit {
		return Truncate(url, limit)
	}
	if room := limit - len(url) - 1; room >= len("…") {
		return Truncate(msg, room) + "\n" + url
	}
	return url
}
