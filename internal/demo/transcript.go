package demo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Party is one end of a message: the editor, the broker or the agent.
type Party string

const (
	Editor Party = "editor"
	Broker Party = "broker"
	Agent  Party = "agent"
)

// Entry is one JSON-RPC message in a transcript.
//
// A message the broker relays is recorded as editor → agent or agent →
// editor, although it passes through the broker. A message the broker sends
// on its own, such as the answer to a permission request that a rule decided,
// has From set to Broker, and the request it answers has To set to Broker;
// Note then says why.
type Entry struct {
	From, To Party
	Raw      []byte // the message as it crossed the wire, without its newline
	Note     string // optional: why the sender did this, shown after the summary and " — "
}

// Stats is what a transcript counted, for the summary at the end.
type Stats struct {
	Messages    []Count      // per direction, in order of first appearance
	Permissions []Permission // answered permission requests, in order of their answers
	StopReasons []string     // stop reasons of the session/prompt results, in order
	Errors      int          // error responses
}

// Count is the number of messages sent one way.
type Count struct {
	From, To Party
	N        int
}

// Total returns the number of messages counted in all directions.
func (s Stats) Total() int {
	n := 0
	for _, c := range s.Messages {
		n += c.N
	}
	return n
}

// Permission is one answered session/request_permission.
type Permission struct {
	ToolCallID string
	Title      string
	Kind       string // the tool kind the request gave, or "" if it gave none
	DecidedBy  Party  // who answered: the editor, or the broker on its own
	Outcome    string // "selected", "cancelled" or "error"
	OptionID   string
	OptionKind string // the kind of the selected option, from the request's options
}

// Transcript writes one readable line per message and counts what it saw.
// A response is labelled with the method of the request it answers, so the
// request must be added before its response. A Transcript is not safe for
// concurrent use.
type Transcript struct {
	w        io.Writer
	width    int  // of the terminal the lines are fitted to; 0: nothing is cut
	color    bool // decisions are coloured with ANSI escapes
	abbrev   []string
	replacer *strings.Replacer
	pending  map[pendingKey]*pendingCall
	stats    Stats
}

// pendingKey names a request by who asked it and its id.
type pendingKey struct {
	asker Party
	id    string
}

type pendingCall struct {
	method   string
	toolCall toolCallView
	options  []permissionOption
	// answered is set once a permission request's answer was counted: the
	// editor's, when the broker answers the agent in its place.
	answered bool
}

// Column widths of a transcript line, and the cuts made on a terminal.
const (
	directionWidth = 15 // runes in "broker → editor"
	labelWidth     = 28
	summaryColumn  = directionWidth + 2 + labelWidth + 2
	textLimit      = 60 // runes of quoted text inside a summary, on a terminal
	// minSummary is the fewest runes the summary column may hold: on a
	// terminal narrower than summaryColumn+minSummary, summaries go on
	// lines of their own.
	minSummary = 40
)

// NewTranscript returns a Transcript that writes its lines to w.
func NewTranscript(w io.Writer) *Transcript {
	return &Transcript{w: w, pending: make(map[pendingKey]*pendingCall)}
}

// FitTo makes every later line fit a terminal width columns wide: long
// quoted texts and summaries are cut with "…", and a note that does not fit
// after its summary is wrapped onto lines of its own, under the summary.
// Zero, the default, cuts and wraps nothing, for output that is not a
// terminal.
func (t *Transcript) FitTo(width int) { t.width = max(width, 0) }

// Colour makes every later line colour the decisions (an answer's option,
// a note's verb) with ANSI escapes: green allows, red rejects, yellow asks.
func (t *Transcript) Colour(on bool) { t.color = on }

// Abbreviate makes every later line show short in place of long, for
// instance a temporary directory's path.
func (t *Transcript) Abbreviate(long, short string) {
	if long == "" {
		return
	}
	t.abbrev = append(t.abbrev, long, short)
	t.replacer = strings.NewReplacer(t.abbrev...)
}

// Add writes the line for e.
func (t *Transcript) Add(e Entry) error {
	_, err := io.WriteString(t.w, t.Line(e)+"\n")
	return err
}

// Line returns the line for e, without a newline, and counts e. It writes
// nothing.
//
// When the transcript is fitted to a terminal, the "line" may be several:
// the summary is cut to fit, and a note that does not fit after it follows
// on lines of its own, indented to the summary's column.
func (t *Transcript) Line(e Entry) string {
	t.count(e)
	label, summary, tone := t.describe(e)
	if t.replacer != nil {
		summary = t.replacer.Replace(summary)
	}
	head := fmt.Sprintf("%-*s  %-*s  ", directionWidth, string(e.From)+" → "+string(e.To), labelWidth, label)
	if t.width == 0 {
		line := head + t.paint(tone, summary)
		if e.Note != "" {
			line += " " + t.paintVerb("— "+e.Note)
		}
		return strings.TrimRight(line, " ")
	}
	// On a terminal too narrow for a readable summary column, the summary
	// goes under the direction and label instead.
	indent := strings.Repeat(" ", summaryColumn)
	if t.width-summaryColumn < minSummary {
		head = strings.TrimRight(head, " ") + "\n    "
		indent = "    "
	}
	room := max(t.width-len(indent), minSummary/2)
	summary = t.paint(tone, truncate(summary, room))
	if e.Note == "" {
		return strings.TrimRight(head+summary, " ")
	}
	note := "— " + e.Note
	if n := utf8.RuneCountInString(stripANSI(summary)); n+1+utf8.RuneCountInString(note) <= room {
		return head + summary + " " + t.paintVerb(note)
	}
	lines := wrap(note, room)
	lines[0] = t.paintVerb(lines[0])
	return strings.TrimRight(head+summary, " ") + "\n" + indent + strings.Join(lines, "\n"+indent)
}

// tone is what a decision says, for its colour.
type tone int

const (
	plainTone tone = iota
	allowTone
	rejectTone
	askTone
)

// toneOf returns the tone of an option kind or of a note's first word.
func toneOf(word string) tone {
	switch {
	case strings.HasPrefix(word, "allow"):
		return allowTone
	case strings.HasPrefix(word, "reject"), strings.HasPrefix(word, "denied"), word == "cancelled":
		return rejectTone
	case strings.HasPrefix(word, "asked"):
		return askTone
	}
	return plainTone
}

// paint colours s in tone, if the transcript colours.
func (t *Transcript) paint(tn tone, s string) string {
	code := map[tone]string{allowTone: "32", rejectTone: "31", askTone: "33"}[tn]
	if !t.color || code == "" || s == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// paintVerb colours the verb of a note's first line ("— allowed by …").
func (t *Transcript) paintVerb(line string) string {
	rest, ok := strings.CutPrefix(line, "— ")
	if !ok {
		return line
	}
	end := strings.IndexAny(rest, " :;")
	if end < 0 {
		end = len(rest)
	}
	tn := toneOf(rest[:end])
	if tn == plainTone {
		return line
	}
	return "— " + t.paint(tn, rest[:end]) + rest[end:]
}

// cut returns s cut to n runes on a terminal, and s whole otherwise.
func (t *Transcript) cut(s string, n int) string {
	if t.width == 0 {
		return s
	}
	return truncate(s, n)
}

// wrap breaks s into lines of at most width runes, at spaces, the colour
// escapes paint adds counting none: the one wrapper of the transcript's
// notes and the summary's lines. A word longer than width is cut to it (and
// loses its colour, whose escapes a cut could split).
func wrap(s string, width int) []string {
	width = max(width, 1)
	columns := func(s string) int { return utf8.RuneCountInString(stripANSI(s)) }
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if columns(w) > width {
			w = truncate(stripANSI(w), width)
		}
		switch {
		case line == "":
			line = w
		case columns(line)+1+columns(w) <= width:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	return append(lines, line)
}

// stripANSI removes the colour escapes paint adds.
func stripANSI(s string) string { return ansiRE.ReplaceAllString(s, "") }

var ansiRE = regexp.MustCompile("\x1b\\[[0-9;]*m")

// Stats returns what the transcript has counted so far.
func (t *Transcript) Stats() Stats {
	s := t.stats
	s.Messages = append([]Count(nil), s.Messages...)
	s.Permissions = append([]Permission(nil), s.Permissions...)
	s.StopReasons = append([]string(nil), s.StopReasons...)
	return s
}

func (t *Transcript) count(e Entry) {
	for i := range t.stats.Messages {
		if c := &t.stats.Messages[i]; c.From == e.From && c.To == e.To {
			c.N++
			return
		}
	}
	t.stats.Messages = append(t.stats.Messages, Count{From: e.From, To: e.To, N: 1})
}

// envelope is the part of a JSON-RPC message the transcript reads.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// describe returns the label and the summary of e, with the tone of the
// decision it carries, and keeps track of the requests that await an
// answer.
func (t *Transcript) describe(e Entry) (label, summary string, tn tone) {
	var m envelope
	if err := json.Unmarshal(e.Raw, &m); err != nil {
		return "(not JSON)", strconv.Quote(t.cut(string(e.Raw), textLimit)), plainTone
	}
	id := string(bytes.TrimSpace(m.ID))
	if m.Method != "" {
		call := &pendingCall{method: m.Method}
		summary = t.describeCall(call, m.Params)
		if id != "" {
			t.pending[pendingKey{asker: e.From, id: id}] = call
		}
		return m.Method, summary, plainTone
	}
	key := pendingKey{asker: e.To, id: id}
	call := t.pending[key]
	if call == nil && e.From == Editor && e.To == Broker {
		// The editor's answer to the agent's request, which the broker
		// took and answered the agent in its place (an "always" sent as
		// the once-option): the answer the human gave is this one.
		if c := t.pending[pendingKey{asker: Agent, id: id}]; c != nil && c.method == "session/request_permission" && m.Error == nil {
			summary, tn := t.describeResult(c, e.From, m.Result)
			return "↳ " + c.method, summary, tn
		}
	}
	delete(t.pending, key)
	if call == nil {
		call = &pendingCall{}
		label = "↳ response " + id
	} else {
		label = "↳ " + call.method
	}
	if m.Error != nil {
		t.stats.Errors++
		if call.method == "session/request_permission" {
			t.stats.Permissions = append(t.stats.Permissions, call.permission(e.From, "error", ""))
		}
		return label, fmt.Sprintf("error %d: %s", m.Error.Code, m.Error.Message), plainTone
	}
	summary, tn = t.describeResult(call, e.From, m.Result)
	return label, summary, tn
}

// toolCallView is the part of a tool call (in session/update or in a
// permission request) that the transcript shows.
type toolCallView struct {
	SessionUpdate string          `json:"sessionUpdate"`
	ToolCallID    string          `json:"toolCallId"`
	Title         string          `json:"title"`
	Kind          string          `json:"kind"`
	Status        string          `json:"status"`
	RawInput      json.RawMessage `json:"rawInput"`
}

// format shows the tool call, its title cut by cut.
func (v toolCallView) format(cut func(string, int) string) string {
	parts := []string{v.ToolCallID}
	if v.Kind != "" {
		parts = append(parts, v.Kind)
	}
	if v.Title != "" {
		parts = append(parts, strconv.Quote(cut(v.Title, textLimit)))
	}
	if v.Status != "" {
		parts = append(parts, v.Status)
	}
	if len(v.RawInput) > 0 {
		parts = append(parts, compact(v.RawInput))
	}
	return strings.Join(parts, " ")
}

type permissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
}

type contentBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// format shows the block: a text quoted and cut by cut, else its type.
func (b contentBlock) format(cut func(string, int) string) string {
	if b.Type == "text" {
		return strconv.Quote(cut(b.Text, textLimit))
	}
	return "<" + b.Type + ">"
}

// describeCall summarises the params of a request or notification, and keeps
// in call what its answer's summary needs.
func (t *Transcript) describeCall(call *pendingCall, params json.RawMessage) string {
	switch call.method {
	case "session/update":
		var p struct {
			Update struct {
				toolCallView
				Content json.RawMessage `json:"content"`
			} `json:"update"`
		}
		if json.Unmarshal(params, &p) != nil {
			break
		}
		u := p.Update
		switch {
		case strings.HasSuffix(u.SessionUpdate, "_chunk"):
			var b contentBlock
			if json.Unmarshal(u.Content, &b) == nil {
				return u.SessionUpdate + " " + b.format(t.cut)
			}
		case u.SessionUpdate == "tool_call" || u.SessionUpdate == "tool_call_update":
			return u.SessionUpdate + " " + u.toolCallView.format(t.cut)
		case u.SessionUpdate != "":
			return u.SessionUpdate
		}
	case "session/request_permission":
		var p struct {
			ToolCall toolCallView       `json:"toolCall"`
			Options  []permissionOption `json:"options"`
		}
		if json.Unmarshal(params, &p) != nil {
			break
		}
		call.toolCall, call.options = p.ToolCall, p.Options
		v := p.ToolCall
		v.Status, v.RawInput = "", nil // shown with the tool_call that announced it
		kinds := make([]string, len(p.Options))
		for i, o := range p.Options {
			kinds[i] = o.Kind
		}
		return v.format(t.cut) + "; options " + strings.Join(kinds, ", ")
	case "initialize":
		var p struct {
			ProtocolVersion    json.RawMessage `json:"protocolVersion"`
			ClientCapabilities json.RawMessage `json:"clientCapabilities"`
			ClientInfo         *implementation `json:"clientInfo"`
		}
		if json.Unmarshal(params, &p) == nil {
			return describeInitialize(p.ProtocolVersion, p.ClientInfo, p.ClientCapabilities)
		}
	case "session/prompt":
		var p struct {
			Prompt []contentBlock `json:"prompt"`
		}
		if json.Unmarshal(params, &p) == nil && len(p.Prompt) > 0 {
			return p.Prompt[0].format(t.cut)
		}
	case "session/new":
		var p struct {
			Cwd string `json:"cwd"`
		}
		if json.Unmarshal(params, &p) == nil {
			return "cwd " + strconv.Quote(p.Cwd)
		}
	case "fs/read_text_file":
		var p struct {
			Path string `json:"path"`
		}
		if json.Unmarshal(params, &p) == nil {
			return strconv.Quote(p.Path)
		}
	case "fs/write_text_file":
		var p struct {
			Path    string `json:"path"`
			Content string `json:"content"`
		}
		if json.Unmarshal(params, &p) == nil {
			return strconv.Quote(p.Path) + " ← " + strconv.Quote(t.cut(p.Content, textLimit/2))
		}
	}
	return compact(params)
}

// describeResult summarises a successful answer to call, sent by from,
// with the tone of the decision it carries.
func (t *Transcript) describeResult(call *pendingCall, from Party, result json.RawMessage) (string, tone) {
	switch call.method {
	case "session/request_permission":
		var r struct {
			Outcome struct {
				Outcome  string `json:"outcome"`
				OptionID string `json:"optionId"`
			} `json:"outcome"`
		}
		if json.Unmarshal(result, &r) != nil {
			break
		}
		p := call.permission(from, r.Outcome.Outcome, r.Outcome.OptionID)
		if !call.answered {
			t.stats.Permissions = append(t.stats.Permissions, p)
			call.answered = true
		}
		if r.Outcome.Outcome != "selected" {
			return r.Outcome.Outcome, toneOf(r.Outcome.Outcome)
		}
		s := "selected " + strconv.Quote(p.OptionID)
		if p.OptionKind != "" {
			s += " (" + p.OptionKind + ")"
		}
		return s, toneOf(p.OptionKind)
	case "initialize":
		var r struct {
			ProtocolVersion   json.RawMessage `json:"protocolVersion"`
			AgentCapabilities json.RawMessage `json:"agentCapabilities"`
			AgentInfo         *implementation `json:"agentInfo"`
		}
		if json.Unmarshal(result, &r) == nil {
			return describeInitialize(r.ProtocolVersion, r.AgentInfo, r.AgentCapabilities), plainTone
		}
	case "session/prompt":
		var r struct {
			StopReason string `json:"stopReason"`
		}
		if json.Unmarshal(result, &r) == nil && r.StopReason != "" {
			t.stats.StopReasons = append(t.stats.StopReasons, r.StopReason)
			return "stopReason " + r.StopReason, plainTone
		}
	case "session/new":
		var r struct {
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal(result, &r) == nil && r.SessionID != "" {
			return "sessionId " + strconv.Quote(r.SessionID), plainTone
		}
	case "fs/read_text_file":
		var r struct {
			Content string `json:"content"`
		}
		if json.Unmarshal(result, &r) == nil {
			return strconv.Quote(t.cut(r.Content, textLimit)), plainTone
		}
	}
	return compact(result), plainTone
}

type implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// describeInitialize summarises either side of initialize: the protocol
// version, who is speaking, and the capabilities it turns on.
func describeInitialize(version json.RawMessage, who *implementation, capabilities json.RawMessage) string {
	parts := []string{"protocolVersion " + compact(version)}
	if who != nil {
		parts = append(parts, strings.TrimSpace(who.Name+" "+who.Version))
	}
	var caps any
	if json.Unmarshal(capabilities, &caps) == nil {
		on := enabled("", caps, nil)
		if len(on) == 0 {
			on = []string{"none"}
		}
		parts = append(parts, "capabilities "+strings.Join(on, " "))
	}
	return strings.Join(parts, "; ")
}

// enabled lists the dotted paths of the true booleans in v, in key order.
func enabled(prefix string, v any, out []string) []string {
	switch v := v.(type) {
	case bool:
		if v {
			out = append(out, prefix)
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			out = enabled(p, v[k], out)
		}
	}
	return out
}

// permission returns the record of a permission request's answer.
func (c *pendingCall) permission(by Party, outcome, optionID string) Permission {
	p := Permission{
		ToolCallID: c.toolCall.ToolCallID,
		Title:      c.toolCall.Title,
		Kind:       c.toolCall.Kind,
		DecidedBy:  by,
		Outcome:    outcome,
		OptionID:   optionID,
	}
	for _, o := range c.options {
		if o.OptionID == optionID {
			p.OptionKind = o.Kind
			break
		}
	}
	return p
}

// compact returns raw JSON on one line without insignificant spaces.
func compact(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// truncate cuts s to at most n runes, marking a cut with "…".
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, count := 0, 0
	for i = range s {
		if count == n-1 {
			break
		}
		count++
	}
	return s[:i] + "…"
}
