package jsonrpc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
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

	// idKey is IDKey(ID), once IDKey has been asked for it.
	idKey string
}

// IDKey returns a comparable form of the message's id, or "" for none. It
// is worked out once per message, the first time it is asked for: a
// message is read by one goroutine at a time.
func (m *Message) IDKey() string {
	if m.idKey == "" && len(m.ID) > 0 {
		m.idKey = IDKey(m.ID)
	}
	return m.idKey
}

// Clone returns a copy of the message that shares no bytes with it: its Raw
// a copy of m.Raw, and its ID, Params, Result and Error the same values in
// that copy. It is for a message kept after the buffer it was read from is
// reused, without reading the frame a second time.
func (m *Message) Clone() *Message {
	c := *m
	c.Raw = bytes.Clone(m.Raw)
	c.ID, c.Params, c.Result, c.Error = m.inClone(c.Raw, m.ID), m.inClone(c.Raw, m.Params), m.inClone(c.Raw, m.Result), m.inClone(c.Raw, m.Error)
	return &c
}

// inClone returns v, a value Parse sliced out of m.Raw, as the same bytes
// of raw, a copy of m.Raw. A slice of a slice keeps its end's capacity, so
// v starts cap(m.Raw)-cap(v) bytes into m.Raw; a v that is not there (a
// message not made by Parse) is copied on its own.
func (m *Message) inClone(raw []byte, v json.RawMessage) json.RawMessage {
	if v == nil {
		return nil
	}
	start := cap(m.Raw) - cap(v)
	if start < 0 || start+len(v) > len(raw) || !bytes.Equal(raw[start:start+len(v)], v) {
		return bytes.Clone(v)
	}
	return raw[start : start+len(v)]
}

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

// maxDepth bounds nesting so hostile input cannot exhaust the stack: the
// frame's object and the objects and arrays in it may nest this deep, as
// deep as encoding/json allows.
const maxDepth = 10000

// The members of a JSON-RPC 2.0 message, as indexes of envelopeNames.
const (
	memberVersion = iota
	memberMethod
	memberID
	memberParams
	memberResult
	memberError
	notEnvelope
)

// envelopeNames are the members of a JSON-RPC 2.0 message.
var envelopeNames = []string{"jsonrpc", "method", "id", "params", "result", "error"}

// byteOrderMark is U+FEFF in UTF-8. JSON text must not begin with it, and
// peers disagree on whether to skip it.
var byteOrderMark = []byte("\xef\xbb\xbf")

// Parse reads the envelope of one frame. It checks the frame's whole syntax,
// as strictly as encoding/json's Valid, without decoding values it does not
// need, and refuses anything a JSON-RPC peer could read differently: a
// duplicated envelope key, an envelope key in another letter case ("Params",
// "ID": Go's encoding/json takes them for "params" and "id"), a method that
// is not a string, a method or string id that is not valid Unicode (see
// exactUnicode), both a result and an error, a byte order mark before the
// message. An escaped member name is the name it decodes to: "\u006dethod"
// is "method".
func Parse(frame []byte) (*Message, error) {
	s := scanner{data: frame}
	s.skipSpace()
	if bytes.HasPrefix(frame[s.pos:], byteOrderMark) {
		return nil, afterByteOrderMark(frame[s.pos+len(byteOrderMark):])
	}
	e := envelope{msg: Message{Raw: frame}}
	if reason := e.read(&s); reason != "" {
		return nil, e.refuse(frame, reason)
	}
	m := e.msg
	return &m, nil
}

// envelope is a message being read, and what can be told of it if it is
// refused: the id the sender could still be answered with and whether it
// was meant as a request.
type envelope struct {
	msg  Message
	seen [notEnvelope]bool
	// idAmbiguous is set, and the sender not answered, when the id itself
	// is in doubt: repeated, given in another letter case, or not valid
	// Unicode.
	idAmbiguous bool
	hasMethod   bool
}

// read reads the frame's envelope into e.msg, or returns why it is refused.
func (e *envelope) read(s *scanner) string {
	frame := s.data
	if s.pos >= len(frame) || frame[s.pos] != '{' {
		if s.pos < len(frame) && frame[s.pos] == '[' {
			return "batches are not supported"
		}
		return "not a JSON object"
	}
	s.pos++
	s.skipSpace()
	if s.pos < len(frame) && frame[s.pos] == '}' {
		s.pos++
	} else {
		for {
			rawKey, err := s.rawKey()
			if err != nil {
				return err.Error()
			}
			start := s.pos
			if err := s.skipValue(2); err != nil {
				return err.Error()
			}
			if member, variant := envelopeMember(rawKey); variant {
				switch member {
				case memberID:
					e.idAmbiguous = true
				case memberMethod:
					// A peer that folds case takes it for a request.
					e.hasMethod = true
				}
				key, _ := Unquote(rawKey)
				return fmt.Sprintf("%q differs only in case from %q", key, envelopeNames[member])
			} else if member != notEnvelope {
				if reason := e.take(member, frame[start:s.pos]); reason != "" {
					return reason
				}
			}
			s.skipSpace()
			if s.pos >= len(frame) {
				return "unexpected end of message"
			}
			if frame[s.pos] == ',' {
				s.pos++
				continue
			}
			if frame[s.pos] == '}' {
				s.pos++
				break
			}
			return fmt.Sprintf("expected ',' or '}' at byte %d", s.pos)
		}
	}
	s.skipSpace()
	if s.pos != len(frame) {
		return fmt.Sprintf("unexpected data after the message at byte %d", s.pos)
	}
	if !e.seen[memberVersion] {
		return `missing "jsonrpc": "2.0"`
	}
	m, seenMethod, seenID := &e.msg, e.seen[memberMethod], e.seen[memberID]
	isResponse := m.Result != nil || m.Error != nil
	switch {
	case seenMethod && isResponse:
		return "a message cannot have both a method and a result or error"
	case seenMethod && seenID:
		m.Kind = Request
	case seenMethod:
		m.Kind = Notification
	case isResponse && m.Result != nil && m.Error != nil:
		return "a response cannot have both a result and an error"
	case isResponse && seenID:
		m.Kind = Response
	case isResponse:
		return `a response needs an "id"`
	default:
		return `neither "method" nor "result" or "error"`
	}
	return ""
}

// take reads the value of an envelope member, or returns why it is refused.
func (e *envelope) take(member int, val []byte) string {
	if e.seen[member] {
		if member == memberID {
			e.idAmbiguous = true
		}
		return fmt.Sprintf("duplicate %q", envelopeNames[member])
	}
	e.seen[member] = true
	switch member {
	case memberVersion:
		if string(val) != `"2.0"` {
			return `"jsonrpc" must be "2.0"`
		}
	case memberMethod:
		e.hasMethod = true
		if val[0] != '"' {
			return `"method" must be a string`
		}
		if !exactUnicode(val) {
			return `"method" must be valid Unicode: peers read it differently`
		}
		if bytes.IndexByte(val, '\\') < 0 {
			e.msg.Method = string(val[1 : len(val)-1])
		} else {
			e.msg.Method, _ = Unquote(val)
		}
	case memberID:
		switch val[0] {
		case '"':
			if !exactUnicode(val) {
				e.idAmbiguous = true
				return `"id" must be valid Unicode: peers read it differently`
			}
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'n':
		default:
			return `"id" must be a string, a number or null`
		}
		e.msg.ID = val
	case memberParams:
		if val[0] != '{' && val[0] != '[' {
			return `"params" must be an object or an array`
		}
		e.msg.Params = val
	case memberResult:
		e.msg.Result = val
	case memberError:
		if val[0] != '{' {
			return `"error" must be an object`
		}
		e.msg.Error = val
	}
	return ""
}

// refuse describes a refused frame, with its id when it can be read, even
// after the member that was refused.
func (e *envelope) refuse(frame []byte, reason string) *InvalidError {
	inv := &InvalidError{Reason: reason, HasMethod: e.hasMethod}
	h := ParseHead(frame)
	if !e.idAmbiguous {
		inv.ID = e.msg.ID
		if inv.ID == nil {
			inv.ID = h.ID
		}
	}
	inv.HasMethod = inv.HasMethod || h.HasMethod
	inv.IsResponse = h.IsResponse && !inv.HasMethod
	return inv
}

// envelopeMember tells which envelope member a raw member name (quotes
// included, escapes resolved) is, and whether it differs from that member's
// name only in letter case, as strings.EqualFold and encoding/json match
// names.
func envelopeMember(rawKey []byte) (member int, variant bool) {
	name := rawKey[1 : len(rawKey)-1]
	if bytes.IndexByte(name, '\\') >= 0 {
		decoded, ok := Unquote(rawKey)
		if !ok {
			return notEnvelope, false
		}
		name = []byte(decoded)
	}
	switch string(name) {
	case "jsonrpc":
		return memberVersion, false
	case "method":
		return memberMethod, false
	case "id":
		return memberID, false
	case "params":
		return memberParams, false
	case "result":
		return memberResult, false
	case "error":
		return memberError, false
	}
	for i, n := range envelopeNames {
		if bytes.EqualFold(name, []byte(n)) {
			return i, true
		}
	}
	return notEnvelope, false
}

// ExactUnicode reports whether a JSON string literal (quotes included, its
// syntax already checked) decodes to the same text for every peer; see
// exactUnicode.
func ExactUnicode(str []byte) bool { return len(str) >= 2 && exactUnicode(str) }

// exactUnicode reports whether a JSON string (quotes included, syntax
// already checked) decodes to the same text for every peer: its bytes are
// valid UTF-8 and no escape is a lone UTF-16 surrogate. Peers disagree on
// the others: Go's decoders replace them with U+FFFD, so that two different
// ids read as one, JavaScript keeps a lone surrogate, and stricter decoders
// refuse the message.
func exactUnicode(str []byte) bool {
	inner := str[1 : len(str)-1]
	if !utf8.Valid(inner) {
		return false
	}
	for i := bytes.IndexByte(inner, '\\'); i >= 0; {
		if i+1 >= len(inner) {
			return false
		}
		next := i + 2
		if inner[i+1] == 'u' {
			r, ok := hex4(inner[i+2:])
			next = i + 6
			if ok && utf16.IsSurrogate(r) {
				// Only a high surrogate followed by an escaped low one is
				// a character.
				low, okLow := rune(0), false
				if r < 0xdc00 && next+1 < len(inner) && inner[next] == '\\' && inner[next+1] == 'u' {
					low, okLow = hex4(inner[next+2:])
				}
				if !okLow || low < 0xdc00 || low > 0xdfff {
					return false
				}
				next += 6
			}
		}
		j := bytes.IndexByte(inner[next:], '\\')
		if j < 0 {
			break
		}
		i = next + j
	}
	return true
}

// hex4 reads the four hexadecimal digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
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
// repeated, also given in another letter case, or not valid Unicode has no
// id.
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
		if err := s.skipValue(2); err != nil {
			return h
		}
		if key == "id" {
			id := head[start:s.pos]
			if h.ID != nil || (id[0] == '"' && !exactUnicode(id)) {
				idAmbiguous = true
			}
			h.ID = id
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

// keyEquals compares a raw member name, quotes included, with a name, as
// unquote reads the name.
func keyEquals(raw []byte, key string) bool {
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1:len(raw)-1]) == key
	}
	name, ok := Unquote(raw)
	return ok && name == key
}

// String returns the value at path in obj when it is a JSON string.
func String(obj json.RawMessage, path ...string) (string, bool) {
	v, ok := Field(obj, path...)
	if !ok {
		return "", false
	}
	return Unquote(v)
}

// Unquote decodes a JSON string value as encoding/json does (invalid UTF-8
// becomes U+FFFD), without reflection when it has no escapes. It reports
// false for any other value.
func Unquote(v json.RawMessage) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v) {
		return string(v[1 : len(v)-1]), true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// scanner walks JSON text. It finds where each value ends and checks its
// syntax as strictly as encoding/json's Valid, without decoding anything:
// the contents of strings, most of a message's bytes, are passed over eight
// bytes at a time.
type scanner struct {
	data []byte
	pos  int
	// strict refuses objects that repeat a member name (see Strict).
	strict bool
}

var errEnd = errors.New("unexpected end of message")

func (s *scanner) skipSpace() {
	for s.pos < len(s.data) {
		// Most often the next byte is no space, and above them all.
		if c := s.data[s.pos]; c > ' ' || (c != ' ' && c != '\t' && c != '\r' && c != '\n') {
			return
		}
		s.pos++
	}
}

// key reads an object member's name and the colon after it.
func (s *scanner) key() (string, error) {
	start := s.pos
	raw, err := s.rawKey()
	if err != nil {
		return "", err
	}
	name, ok := Unquote(raw)
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

// skipString moves past the string that starts at s.pos. Like any JSON
// decoder it refuses control characters in it and escapes other than \",
// \\, \/, \b, \f, \n, \r, \t and \u with four hexadecimal digits.
func (s *scanner) skipString() error {
	data := s.data
	i := s.pos + 1 // after the opening quote
	for {
		// Eight bytes at a time to the next quote, backslash or control
		// character, then byte by byte near the end of the data.
		for plain := 0; i+8 <= len(data); plain++ {
			if plain == 4 {
				// A long plain run: find its end with the library's
				// vectorised search, and look for control characters in it.
				i = plainRun(data, i)
				break
			}
			m := specials(binary.LittleEndian.Uint64(data[i : i+8]))
			if m != 0 {
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		for i < len(data) && !special[data[i]] {
			i++
		}
		if i >= len(data) {
			return errEnd
		}
		if c := data[i]; c == '\\' {
			n := 2
			if i+1 >= len(data) || !shortEscape[data[i+1]] {
				if n = escapeLen(data[i:]); n == 0 {
					return fmt.Errorf("bad escape in a string at byte %d", i)
				}
			}
			i += n
		} else if c == '"' {
			s.pos = i + 1
			return nil
		} else {
			return fmt.Errorf("control character %#x in a string at byte %d", c, i)
		}
	}
}

// plainRun returns where the text of a string that goes on from i stops
// being plain: at its first quote or backslash, or at the first control
// character before them.
func plainRun(data []byte, i int) int {
	end := len(data)
	if q := bytes.IndexByte(data[i:], '"'); q >= 0 {
		end = i + q
	}
	if b := bytes.IndexByte(data[i:end], '\\'); b >= 0 {
		end = i + b
	}
	// A control character (below 0x20) sets the top bit of its byte in
	// w - 0x20 and has it clear in w. Thirty-two bytes at a time, then
	// eight: where a control character is, the byte-by-byte loop finds it.
	run := data[i:end]
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	j := 0
	for ; j+32 <= len(run); j += 32 {
		w := run[j : j+32]
		w0, w1 := binary.LittleEndian.Uint64(w[0:8]), binary.LittleEndian.Uint64(w[8:16])
		w2, w3 := binary.LittleEndian.Uint64(w[16:24]), binary.LittleEndian.Uint64(w[24:32])
		if ((w0-0x20*ones)&^w0|(w1-0x20*ones)&^w1|(w2-0x20*ones)&^w2|(w3-0x20*ones)&^w3)&tops != 0 {
			return i + j
		}
	}
	for ; j+8 <= len(run); j += 8 {
		if w := binary.LittleEndian.Uint64(run[j : j+8]); (w-0x20*ones)&^w&tops != 0 {
			return i + j
		}
	}
	return i + j
}

// special holds the bytes that interrupt a string's plain text: the quote,
// the backslash and the control characters.
var special = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// shortEscape holds the characters that follow a backslash in a two-byte
// escape.
var shortEscape = func() (t [256]bool) {
	for _, c := range `"\/bfnrt` {
		t[c] = true
	}
	return t
}()

// specials marks the bytes of w (eight bytes of a string, the first in the
// lowest bits) that are a quote, a backslash or a control character, each
// by its top bit. A borrow may carry past a marked byte and mark the bytes
// above it wrongly, so only the lowest mark counts.
func specials(w uint64) uint64 {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	quote := w ^ ('"' * ones)
	backslash := w ^ ('\\' * ones)
	marks := ((quote - ones) &^ quote) | ((backslash - ones) &^ backslash) | ((w - 0x20*ones) &^ w)
	return marks & tops
}

// escapeLen returns the length of the \u escape at the start of b, or 0
// when it is not one: its caller has taken the two-byte escapes
// (shortEscape).
func escapeLen(b []byte) int {
	if len(b) >= 2 && b[1] == 'u' {
		if _, ok := hex4(b[2:]); ok {
			return 6
		}
	}
	return 0
}

// skipValue moves past the value at s.pos (after any space before it).
// depth is how deeply the value would nest, were it an object or an array.
func (s *scanner) skipValue(depth int) error {
	s.skipSpace()
	if s.pos >= len(s.data) {
		return errEnd
	}
	switch c := s.data[s.pos]; {
	case c == '"':
		return s.skipString()
	case c == '{':
		if depth > maxDepth {
			return errors.New("nested too deeply")
		}
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
		if depth > maxDepth {
			return errors.New("nested too deeply")
		}
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
		return s.skipNumber()
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

// skipNumber moves past the number at s.pos, in JSON's grammar: an
// optional minus, an integer without leading zeros, an optional fraction
// and an optional exponent.
func (s *scanner) skipNumber() error {
	d, start := s.data, s.pos
	i := start
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i = digits(d, i+1)
	default:
		return fmt.Errorf("bad number at byte %d", start)
	}
	if i < len(d) && d[i] == '.' {
		end := digits(d, i+1)
		if end == i+1 {
			return fmt.Errorf("bad number at byte %d", start)
		}
		i = end
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		end := digits(d, i)
		if end == i {
			return fmt.Errorf("bad number at byte %d", start)
		}
		i = end
	}
	s.pos = i
	return nil
}

// digits returns the index of the first byte from i on that is not a digit.
func digits(d []byte, i int) int {
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	return i
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

// IsNull reports whether a raw JSON value is null, which ACP peers send for
// "unset" in places where the member may also be left out.
func IsNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }
