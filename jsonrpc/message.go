package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Kind tells requests, notifications and responses apart.
type Kind uint8

const (
	Request Kind = iota + 1
	Notification
	Response
)

func (k Kind) String() string {
	switch k {
	case Request:
		return "request"
	case Notification:
		return "notification"
	case Response:
		return "response"
	}
	return "invalid"
}

// Message is the envelope of one JSON-RPC 2.0 message. Every field except
// Kind and Method is a slice of Raw, so reading an envelope copies nothing.
type Message struct {
	Raw    []byte
	Kind   Kind
	Method string          // requests and notifications
	ID     json.RawMessage // requests and responses: the id exactly as sent
	Params json.RawMessage // nil when absent
	Result json.RawMessage // responses: nil unless the call succeeded
	Error  json.RawMessage // responses: nil unless the call failed
}

// IDKey returns a comparable form of the message's id, or "" for none.
func (m *Message) IDKey() string { return IDKey(m.ID) }

// IDKey returns a comparable form of a raw id: a response matches a request
// when their keys are equal, however the id's string was escaped, and
// however its number was written. Numbers are compared as the float64 a
// JavaScript peer reads (2, 2.0, 2e0 and 20e-1 are one id; so are two
// integers beyond 2^53 that round alike): such a peer answers a request
// sent as 2e0 with id 2, and the agent takes that for the answer to 2e0.
// String ids and numeric ids never share a key.
func IDKey(id json.RawMessage) string {
	if len(id) == 0 {
		return ""
	}
	if id[0] != '"' {
		if f, err := strconv.ParseFloat(string(id), 64); err == nil || errors.Is(err, strconv.ErrRange) {
			if f == 0 {
				f = 0 // -0 is 0
			}
			return "n:" + strconv.FormatFloat(f, 'g', -1, 64)
		}
		return string(id)
	}
	if bytes.IndexByte(id, '\\') < 0 {
		return "s:" + string(id[1:len(id)-1])
	}
	var s string
	if json.Unmarshal(id, &s) != nil {
		return string(id)
	}
	return "s:" + s
}

// InvalidError describes a frame that is not a JSON-RPC 2.0 message. ID holds
// the frame's id when one could be read, so the sender can still be answered.
type InvalidError struct {
	Reason string
	ID     json.RawMessage
	// HasMethod reports that the frame named a method: it was meant as a
	// request (when ID is set) rather than a response.
	HasMethod bool
	// IsResponse reports that the frame had a result or an error and no
	// method: it was meant as the response to the request with ID.
	IsResponse bool
}

func (e *InvalidError) Error() string { return "not a JSON-RPC 2.0 message: " + e.Reason }

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
const maxDepth = 10000

// envelopeNames are the members of a JSON-RPC 2.0 message.
var envelopeNames = []string{"jsonrpc", "method", "id", "params", "result", "error"}

// byteOrderMark is U+FEFF in UTF-8. JSON text must not begin with it, and
// peers disagree on whether to skip it.
var byteOrderMark = []byte("\xef\xbb\xbf")

// Parse reads the envelope of one frame. It checks the frame's whole syntax
// without decoding values it does not need, and refuses anything a JSON-RPC
// peer could read differently: a duplicated envelope key, an envelope key in
// another letter case ("Params", "ID": Go's encoding/json takes them for
// "params" and "id"), a method that is not a string, both a result and an
// error, a byte order mark before the message.
func Parse(frame []byte) (*Message, error) {
	m := &Message{Raw: frame}
	inv := &InvalidError{}
	idAmbiguous := false
	fail := func(reason string, args ...any) (*Message, error) {
		inv.Reason = fmt.Sprintf(reason, args...)
		// The id may come after the member that was refused.
		h := ParseHead(frame)
		if inv.ID == nil && !idAmbiguous {
			inv.ID = h.ID
		}
		inv.HasMethod = inv.HasMethod || h.HasMethod
		inv.IsResponse = h.IsResponse && !inv.HasMethod
		return nil, inv
	}
	s := scanner{data: frame}
	s.skipSpace()
	if bytes.HasPrefix(frame[s.pos:], byteOrderMark) {
		return nil, afterByteOrderMark(frame[s.pos+len(byteOrderMark):])
	}
	if s.pos >= len(frame) || frame[s.pos] != '{' {
		if s.pos < len(frame) && frame[s.pos] == '[' {
			return fail("batches are not supported")
		}
		return fail("not a JSON object")
	}
	s.pos++
	var seenVersion, seenMethod, seenID bool
	first := true
	for {
		s.skipSpace()
		if s.pos < len(frame) && frame[s.pos] == '}' && first {
			s.pos++
			break
		}
		key, err := s.key()
		if err != nil {
			return fail("%v", err)
		}
		start := s.pos
		if err := s.skipValue(1); err != nil {
			return fail("%v", err)
		}
		val := frame[start:s.pos]
		dup := func() (*Message, error) { return fail("duplicate %q", key) }
		switch key {
		case "jsonrpc":
			if seenVersion {
				return dup()
			}
			seenVersion = true
			if string(val) != `"2.0"` {
				return fail(`"jsonrpc" must be "2.0"`)
			}
		case "method":
			if seenMethod {
				return dup()
			}
			seenMethod = true
			inv.HasMethod = true
			method, ok := unquote(val)
			if !ok {
				return fail(`"method" must be a string`)
			}
			m.Method = method
		case "id":
			if seenID {
				inv.ID, idAmbiguous = nil, true
				return dup()
			}
			seenID = true
			switch val[0] {
			case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'n':
				m.ID = val
				inv.ID = val
			default:
				return fail(`"id" must be a string, a number or null`)
			}
		case "params":
			if m.Params != nil {
				return dup()
			}
			if val[0] != '{' && val[0] != '[' {
				return fail(`"params" must be an object or an array`)
			}
			m.Params = val
		case "result":
			if m.Result != nil {
				return dup()
			}
			m.Result = val
		case "error":
			if m.Error != nil {
				return dup()
			}
			if val[0] != '{' {
				return fail(`"error" must be an object`)
			}
			m.Error = val
		default:
			if name, ok := caseVariant(key, envelopeNames); ok {
				switch name {
				case "id":
					inv.ID, idAmbiguous = nil, true
				case "method":
					// A peer that folds case takes it for a request.
					inv.HasMethod = true
				}
				return fail("%q differs only in case from %q", key, name)
			}
		}
		first = false
		s.skipSpace()
		if s.pos >= len(frame) {
			return fail("unexpected end of message")
		}
		if frame[s.pos] == ',' {
			s.pos++
			continue
		}
		if frame[s.pos] == '}' {
			s.pos++
			break
		}
		return fail("expected ',' or '}' at byte %d", s.pos)
	}
	s.skipSpace()
	if s.pos != len(frame) {
		return fail("unexpected data after the message at byte %d", s.pos)
	}
	if !seenVersion {
		return fail(`missing "jsonrpc": "2.0"`)
	}
	isResponse := m.Result != nil || m.Error != nil
	switch {
	case seenMethod && isResponse:
		return fail("a message cannot have both a method and a result or error")
	case seenMethod && seenID:
		m.Kind = Request
	case seenMethod:
		m.Kind = Notification
	case isResponse && m.Result != nil && m.Error != nil:
		return fail("a response cannot have both a result and an error")
	case isResponse && seenID:
		m.Kind = Response
	case isResponse:
		return fail(`a response needs an "id"`)
	default:
		return fail(`neither "method" nor "result" or "error"`)
	}
	return m, nil
}

// afterByteOrderMark refuses a frame that begins with a byte order mark,
// with what can be read of the message after it, so that a request is still
// answered.
func afterByteOrderMark(rest []byte) error {
	const reason = "a byte order mark (U+FEFF) precedes the message"
	inv := &InvalidError{Reason: reason}
	m, err := Parse(rest)
	switch e := err.(type) {
	case nil:
		inv.ID, inv.HasMethod, inv.IsResponse = m.ID, m.Kind != Response, m.Kind == Response
	case *InvalidError:
		inv.ID, inv.HasMethod, inv.IsResponse = e.ID, e.HasMethod, e.IsResponse
		inv.Reason = reason + ", and " + e.Reason
	}
	return inv
}

// Head is what could be read of the start of a frame that was too large to
// keep: its id and whether it was a request or a response.
type Head struct {
	ID         json.RawMessage
	HasMethod  bool
	IsResponse bool
}

// ParseHead reads envelope members from the start of a truncated frame, in
// order, until the first member whose value was cut off. A head whose id is
// repeated or also given in another letter case has no id.
func ParseHead(head []byte) Head {
	var h Head
	s := scanner{data: head}
	s.skipSpace()
	for bytes.HasPrefix(head[s.pos:], byteOrderMark) {
		s.pos += len(byteOrderMark)
		s.skipSpace()
	}
	if s.pos >= len(head) || head[s.pos] != '{' {
		return h
	}
	s.pos++
	idAmbiguous := false
	for {
		key, err := s.key()
		if err != nil {
			return h
		}
		// What a member is tells as much as its value, which may be cut off.
		switch key {
		case "method":
			h.HasMethod = true
		case "result", "error":
			h.IsResponse = true
		default:
			if key != "id" && strings.EqualFold(key, "id") {
				idAmbiguous = true
			}
		}
		start := s.pos
		if err := s.skipValue(1); err != nil {
			return h
		}
		if key == "id" {
			if h.ID != nil {
				idAmbiguous = true
			}
			h.ID = head[start:s.pos]
		}
		if idAmbiguous {
			h.ID = nil
		}
		if done, err := s.endOfMember('}'); done || err != nil {
			return h
		}
	}
}

// Field returns the value at a path of member names in a JSON object,
// without decoding the other members: Field(params, "update",
// "sessionUpdate") descends into "update" and stops at "sessionUpdate",
// whatever follows. It reports false when a step is not an object or lacks
// the member.
func Field(obj json.RawMessage, path ...string) (json.RawMessage, bool) {
	sp, ok := FieldSpan(obj, path...)
	if !ok {
		return nil, false
	}
	return obj[sp.Start:sp.End], true
}

// Span is where a value lies in the bytes it was found in: data[Start:End].
type Span struct{ Start, End int }

// FieldSpan is Field, returning where the value lies instead of the value,
// so that a caller can replace it and leave every other byte as it was.
func FieldSpan(obj json.RawMessage, path ...string) (Span, bool) {
	s := scanner{data: obj}
	for depth, key := range path {
		if !s.findMember(key) {
			return Span{}, false
		}
		if depth == len(path)-1 {
			start := s.pos
			if err := s.skipValue(1); err != nil {
				return Span{}, false
			}
			return Span{start, s.pos}, true
		}
	}
	return Span{}, false
}

// Elements returns where each element of a JSON array lies in arr.
func Elements(arr json.RawMessage) ([]Span, error) {
	s := scanner{data: arr}
	s.skipSpace()
	if s.pos >= len(arr) || arr[s.pos] != '[' {
		return nil, errors.New("not a JSON array")
	}
	s.pos++
	s.skipSpace()
	var out []Span
	if s.pos < len(arr) && arr[s.pos] == ']' {
		s.pos++
		return out, s.atEnd()
	}
	for {
		s.skipSpace()
		start := s.pos
		if err := s.skipValue(1); err != nil {
			return nil, err
		}
		out = append(out, Span{start, s.pos})
		done, err := s.endOfMember(']')
		if err != nil {
			return nil, err
		}
		if done {
			return out, s.atEnd()
		}
	}
}

// Splice returns a copy of data with each span replaced by its value.
// Spans must not overlap; every byte outside them is kept.
func Splice(data []byte, edits map[Span][]byte) []byte {
	spans := make([]Span, 0, len(edits))
	size := len(data)
	for sp, v := range edits {
		spans = append(spans, sp)
		size += len(v) - (sp.End - sp.Start)
	}
	slices.SortFunc(spans, func(a, b Span) int { return a.Start - b.Start })
	out := make([]byte, 0, size)
	at := 0
	for _, sp := range spans {
		out = append(out, data[at:sp.Start]...)
		out = append(out, edits[sp]...)
		at = sp.End
	}
	return append(out, data[at:]...)
}

// findMember moves past the name of the member key in the object that starts
// at the scanner's position, to the start of its value.
func (s *scanner) findMember(key string) bool {
	s.skipSpace()
	if s.pos >= len(s.data) || s.data[s.pos] != '{' {
		return false
	}
	s.pos++
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		return false
	}
	for {
		raw, err := s.rawKey()
		if err != nil {
			return false
		}
		if keyEquals(raw, key) {
			s.skipSpace()
			return true
		}
		if err := s.skipValue(1); err != nil {
			return false
		}
		s.skipSpace()
		if s.pos >= len(s.data) || s.data[s.pos] != ',' {
			return false
		}
		s.pos++
	}
}

// keyEquals compares a raw member name, quotes included, with a name.
func keyEquals(raw []byte, key string) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1:len(raw)-1]) == key
	}
	name, ok := unquote(raw)
	return ok && name == key
}

// String returns the value at path in obj when it is a JSON string.
func String(obj json.RawMessage, path ...string) (string, bool) {
	v, ok := Field(obj, path...)
	if !ok {
		return "", false
	}
	return unquote(v)
}

// unquote decodes a JSON string value, without reflection when it has no
// escapes.
func unquote(v json.RawMessage) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// scanner walks JSON syntax. It finds where each value ends and checks the
// structure; string contents and number forms are left to the peers, which
// decode them in full.
type scanner struct {
	data []byte
	pos  int
	// strict refuses objects that repeat a member name (see Strict).
	strict bool
}

var errEnd = errors.New("unexpected end of message")

func (s *scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\r', '\n':
			s.pos++
		default:
			return
		}
	}
}

// key reads an object member's name and the colon after it.
func (s *scanner) key() (string, error) {
	start := s.pos
	raw, err := s.rawKey()
	if err != nil {
		return "", err
	}
	name, ok := unquote(raw)
	if !ok {
		return "", fmt.Errorf("bad member name at byte %d", start)
	}
	return name, nil
}

// rawKey reads an object member's name, quotes included and undecoded, and
// the colon after it: for members whose name does not matter, no string is
// made.
func (s *scanner) rawKey() ([]byte, error) {
	s.skipSpace()
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		return nil, fmt.Errorf("expected a member name at byte %d", s.pos)
	}
	start := s.pos
	if err := s.skipString(); err != nil {
		return nil, err
	}
	raw := s.data[start:s.pos]
	s.skipSpace()
	if s.pos >= len(s.data) || s.data[s.pos] != ':' {
		return nil, fmt.Errorf("expected ':' at byte %d", s.pos)
	}
	s.pos++
	s.skipSpace()
	return raw, nil
}

func (s *scanner) skipString() error {
	s.pos++ // opening quote
	for {
		i := bytes.IndexByte(s.data[s.pos:], '"')
		if i < 0 {
			return errEnd
		}
		end := s.pos + i
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for j := end - 1; j >= s.pos && s.data[j] == '\\'; j-- {
			n++
		}
		s.pos = end + 1
		if n%2 == 0 {
			return nil
		}
	}
}

func (s *scanner) skipValue(depth int) error {
	if depth > maxDepth {
		return errors.New("nested too deeply")
	}
	s.skipSpace()
	if s.pos >= len(s.data) {
		return errEnd
	}
	switch c := s.data[s.pos]; {
	case c == '"':
		return s.skipString()
	case c == '{':
		s.pos++
		s.skipSpace()
		if s.pos < len(s.data) && s.data[s.pos] == '}' {
			s.pos++
			return nil
		}
		var names uniqueNames
		for {
			if !s.strict {
				if _, err := s.rawKey(); err != nil {
					return err
				}
			} else if name, err := s.key(); err != nil {
				return err
			} else if err := names.add(name); err != nil {
				return err
			}
			if err := s.skipValue(depth + 1); err != nil {
				return err
			}
			if done, err := s.endOfMember('}'); done || err != nil {
				return err
			}
		}
	case c == '[':
		s.pos++
		s.skipSpace()
		if s.pos < len(s.data) && s.data[s.pos] == ']' {
			s.pos++
			return nil
		}
		for {
			if err := s.skipValue(depth + 1); err != nil {
				return err
			}
			if done, err := s.endOfMember(']'); done || err != nil {
				return err
			}
		}
	case c == '-' || (c >= '0' && c <= '9'):
		start := s.pos
		for s.pos < len(s.data) && isNumberByte(s.data[s.pos]) {
			s.pos++
		}
		if !json.Valid(s.data[start:s.pos]) {
			return fmt.Errorf("bad number at byte %d", start)
		}
		return nil
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if bytes.HasPrefix(s.data[s.pos:], []byte(lit)) {
				s.pos += len(lit)
				return nil
			}
		}
		return fmt.Errorf("unexpected %q at byte %d", c, s.pos)
	}
}

// endOfMember consumes the ',' or the closing byte after a member, and
// reports whether it was the closing one.
func (s *scanner) endOfMember(closing byte) (done bool, err error) {
	s.skipSpace()
	if s.pos >= len(s.data) {
		return false, errEnd
	}
	switch s.data[s.pos] {
	case ',':
		s.pos++
		return false, nil
	case closing:
		s.pos++
		return true, nil
	}
	return false, fmt.Errorf("expected ',' or %q at byte %d", closing, s.pos)
}

func isNumberByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// IsNull reports whether a raw JSON value is null, which ACP peers send for
// "unset" in places where the member may also be left out.
func IsNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }
