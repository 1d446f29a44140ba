package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// FuzzParse compares Parse's reading of each input with strictReading's,
// made with encoding/json alone: Parse accepts exactly what the strict
// reading accepts, and reads the same kind, method, id, params, result and
// error, each a slice of the frame. So whatever Parse accepts is valid JSON,
// and a frame that decoders could read differently is refused, never read
// one way. A refused frame is answered with its id only when that id is
// beyond doubt.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"tool_call"}}}`,
		`{"jsonrpc":"2.0","id":"x","result":{"outcome":{"outcome":"cancelled"}}}`,
		`{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"no"}}`,
		`{"jsonrpc":"2.0","method":"a","method":"b"}`,
		`{"jsonrpc":"2.0","\u006dethod":"m","id":null}`,
		`[1,2]`, `banner`, `{"a":"\\"}`, `{}`, `"s"`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call"}`,
		`{"jsonrpc":"2.0","method":"m","params":{},"paramſ":{}}`,
		"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}",
		"{\"jsonrpc\":\"2.0\",\"method\":\"m\xff\"}",
		`{"jsonrpc":"2.0","method":"\ud800","id":"\ud83d\ude00"}`,
		`{"jsonrpc":"2.0","id":"\udc00x","method":"m"}`,
		"{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"t\":\"a\tb\"}}",
		`{"jsonrpc":"2.0","method":"m","params":{"t":"\q"}}`,
		`{"jsonrpc":"2.0","method":"m","params":[01, 1., -, 1e, .5, 2E+3, -0.0e-0]}`,
		` {"jsonrpc" : "2.0" , "method" : "m" , "params" : [ true , false , null ] } `,
		`{"jsonrpc":"2.0","id":1,"result":{"text":"\"}\\\"\u0041"}}`,
		`{"jsonrpc":"2\u002e0","method":"m"}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"m"}`,
		`{"jsonrpc":"2.0","id":1,"id":1,"method":"m"}`,
		`{"jsonrpc":"2.0","ID":1,"method":"m"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want := strictReading(data)
		m, err := Parse(data)
		_ = ParseHead(data)
		if err != nil {
			var inv *InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("Parse(%q) failed with %T %v", data, err, err)
			}
			if want.refusal == "" {
				t.Fatalf("Parse(%q) refused what a strict decoder reads as a %v: %v", data, want.kind, err)
			}
			if inv.ID != nil && (want.idInDoubt || (want.id != nil && !bytes.Equal(inv.ID, want.id))) {
				t.Fatalf("Parse(%q) would answer with id %s; the strict reading has %s (in doubt: %v)", data, inv.ID, want.id, want.idInDoubt)
			}
			return
		}
		if want.refusal != "" {
			t.Fatalf("Parse(%q) accepted a %v that a strict decoder refuses: %s", data, m.Kind, want.refusal)
		}
		if !json.Valid(data) {
			t.Fatalf("Parse(%q) accepted invalid JSON", data)
		}
		if m.Kind != want.kind || m.Method != want.method {
			t.Fatalf("Parse(%q): %v %q, the strict reading: %v %q", data, m.Kind, m.Method, want.kind, want.method)
		}
		for _, field := range []struct {
			name      string
			got, want []byte
		}{{"id", m.ID, want.id}, {"params", m.Params, want.params}, {"result", m.Result, want.result}, {"error", m.Error, want.error}} {
			if !bytes.Equal(field.got, field.want) || (field.got == nil) != (field.want == nil) {
				t.Fatalf("Parse(%q): %s %q, the strict reading: %q", data, field.name, field.got, field.want)
			}
			if field.got != nil && !sliceOf(field.got, data) {
				t.Fatalf("Parse(%q): %s is not a slice of the frame", data, field.name)
			}
		}
		if !sliceOf(m.Raw, data) || len(m.Raw) != len(data) {
			t.Fatalf("Parse(%q): Raw is not the frame", data)
		}
	})
}

// reading is a message as strictReading reads it.
type reading struct {
	refusal string // why the message is refused, or ""
	// idInDoubt reports an id that decoders may read differently, which a
	// refusal must not be answered with.
	idInDoubt                 bool
	kind                      Kind
	method                    string
	id, params, result, error []byte
}

// strictReading reads a JSON-RPC 2.0 envelope with encoding/json's
// tokenizer, refusing what JSON-RPC peers could read differently: invalid
// JSON, a member of the envelope given twice or in another letter case,
// and a method or string id whose text is not valid Unicode. It also holds
// the envelope to the forms the broker accepts: "jsonrpc" exactly "2.0", a
// string method, an id that is a string, a number or null, params that are
// an object or an array, an error that is an object.
func strictReading(data []byte) (r reading) {
	if !json.Valid(data) {
		return reading{refusal: "not valid JSON"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, _ := dec.Token(); tok != json.Delim('{') {
		return reading{refusal: "not an object"}
	}
	members := map[string][]byte{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			panic(err) // json.Valid accepted it
		}
		name := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			panic(err)
		}
		for _, n := range []string{"jsonrpc", "method", "id", "params", "result", "error"} {
			_, seen := members[n]
			switch {
			case name == n && !seen:
				members[n] = value
			case name == n || strings.EqualFold(name, n):
				r.refusal = "two members read as " + n
				r.idInDoubt = r.idInDoubt || n == "id"
			}
		}
	}
	r.id = members["id"]
	if r.id != nil && r.id[0] == '"' && !unicodeText(r.id) {
		r.refusal, r.idInDoubt = "the id is not valid Unicode", true
	}
	if r.refusal != "" {
		return r
	}
	r.params, r.result, r.error = members["params"], members["result"], members["error"]
	method, hasMethod := members["method"]
	switch {
	case string(members["jsonrpc"]) != `"2.0"`:
		r.refusal = "not 2.0"
	case hasMethod && (method[0] != '"' || !unicodeText(method)):
		r.refusal = "the method is not a string of valid Unicode"
	case r.id != nil && !bytes.ContainsAny(r.id[:1], `"-0123456789n`):
		r.refusal = "the id is not a string, a number or null"
	case r.params != nil && r.params[0] != '{' && r.params[0] != '[':
		r.refusal = "params are neither an object nor an array"
	case r.error != nil && r.error[0] != '{':
		r.refusal = "the error is not an object"
	case hasMethod && (r.result != nil || r.error != nil):
		r.refusal = "a method and a result or error"
	case hasMethod && r.id != nil:
		r.kind = Request
	case hasMethod:
		r.kind = Notification
	case r.result != nil && r.error != nil:
		r.refusal = "a result and an error"
	case (r.result != nil || r.error != nil) && r.id != nil:
		r.kind = Response
	default:
		r.refusal = "no method, or a response without an id"
	}
	if hasMethod && r.refusal == "" {
		if err := json.Unmarshal(method, &r.method); err != nil {
			panic(err)
		}
	}
	return r
}

// unicodeText reports whether a JSON string (valid JSON, quotes included)
// is a sequence of UTF-16 code units without a lone surrogate, read from
// valid UTF-8 and from \u escapes alike.
func unicodeText(str []byte) bool {
	var units []uint16
	for s := str[1 : len(str)-1]; len(s) > 0; {
		if s[0] == '\\' {
			if s[1] != 'u' {
				s = s[2:]
				continue
			}
			var u uint16
			for _, c := range s[2:6] {
				u <<= 4
				switch {
				case c <= '9':
					u |= uint16(c - '0')
				case c <= 'F':
					u |= uint16(c - 'A' + 10)
				default:
					u |= uint16(c - 'a' + 10)
				}
			}
			units = append(units, u)
			s = s[6:]
			continue
		}
		r, size := utf8.DecodeRune(s)
		if r == utf8.RuneError && size == 1 {
			return false
		}
		units = utf16.AppendRune(units, r)
		s = s[size:]
	}
	for i := 0; i < len(units); i++ {
		switch {
		case units[i] >= 0xd800 && units[i] < 0xdc00 && i+1 < len(units) && units[i+1] >= 0xdc00 && units[i+1] < 0xe000:
			i++
		case units[i] >= 0xd800 && units[i] < 0xe000:
			return false
		}
	}
	return true
}

// sliceOf reports whether part lies within whole's memory.
func sliceOf(part, whole []byte) bool {
	if len(part) == 0 || len(whole) == 0 {
		return len(part) == 0
	}
	p, w := uintptr(unsafe.Pointer(unsafe.SliceData(part))), uintptr(unsafe.Pointer(unsafe.SliceData(whole)))
	return p >= w && p+uintptr(len(part)) <= w+uintptr(len(whole))
}

// FuzzMembers compares the scanner's other readers with encoding/json on
// each input: Strict accepts exactly the valid JSON in which no object has
// two members whose names are equal or differ only in letter case, Members
// reads the same members as encoding/json, and Field finds each of them.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":{"c":[2,"x"]}}`, `{"a":1,"A":2}`, `{"k":1,"\u212a":2}`, `[{"x":1},{"x":2}]`,
		`{"a":{"b":1,"b":2}}`, `{"s":"\"\\\/\b\f\n\r\t\u0041"}`, "{\"s\":\"\x7f\x80\xff\"}", `{"a":01}`,
		`{"a":"\ud800"}`, `"text"`, `-1.5e-3`, `{"a" : [ ] , "b" : { } }`, `{"a":1}x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		valid := json.Valid(data)
		if got, want := Strict(data) == nil, valid && uniqueNamesEverywhere(data); got != want {
			t.Fatalf("Strict(%q) accepts it: %v; valid JSON without names that fold alike: %v", data, got, want)
		}
		members, err := Members(data)
		if err != nil {
			return
		}
		if !valid {
			t.Fatalf("Members(%q) read invalid JSON", data)
		}
		var want map[string]json.RawMessage
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("Members(%q) read what encoding/json does not take for an object: %v", data, err)
		}
		if len(members) != len(want) {
			t.Fatalf("Members(%q) = %d members, encoding/json %d", data, len(members), len(want))
		}
		for name, v := range want {
			if !bytes.Equal(members[name], v) {
				t.Fatalf("Members(%q)[%q] = %s, encoding/json %s", data, name, members[name], v)
			}
			if got, ok := Field(data, name); !ok || !bytes.Equal(got, v) {
				t.Fatalf("Field(%q, %q) = %s %v, encoding/json %s", data, name, got, ok, v)
			}
		}
	})
}

// uniqueNamesEverywhere reports whether no object in a valid JSON value has
// two member names that strings.EqualFold takes for one, reading it with
// encoding/json's tokenizer.
func uniqueNamesEverywhere(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type container struct {
		object bool
		names  []string
		key    bool // the next token is a member name
	}
	var stack []*container
	for {
		tok, err := dec.Token()
		if err != nil {
			return true // the end: json.Valid accepted it
		}
		top := (*container)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].key = true
			}
			continue
		}
		if top != nil && top.object && top.key {
			name := tok.(string)
			for _, n := range top.names {
				if strings.EqualFold(n, name) {
					return false
				}
			}
			top.names = append(top.names, name)
			top.key = false
			continue
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, &container{object: d == '{', key: d == '{'})
			continue
		}
		if top != nil && top.object {
			top.key = true
		}
	}
}
