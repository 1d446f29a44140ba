package jsonrpc

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name   string
		frame  string
		kind   Kind
		method string
		id     string
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`, Request, "initialize", "1"},
		{"string id", `{"jsonrpc":"2.0","id":"a\"b","method":"x"}`, Request, "x", `"a\"b"`},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"x"}`, Request, "x", "null"},
		{"negative fractional id", `{"jsonrpc":"2.0","id":-1.5e3,"method":"x"}`, Request, "x", "-1.5e3"},
		{"notification", `{"jsonrpc":"2.0","method":"session/update","params":{"a":[1,2,{"b":null}]}}`, Notification, "session/update", ""},
		{"result", `{"jsonrpc":"2.0","id":7,"result":null}`, Response, "", "7"},
		{"error", `{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"no"}}`, Response, "", "7"},
		{"key order and spaces", " {\t\"method\" : \"m\" ,\"params\":[] , \"id\":2,\"jsonrpc\":\"2.0\"}\r", Request, "m", "2"},
		{"unknown members", `{"jsonrpc":"2.0","method":"m","_meta":{"x":1},"future":[true,false]}`, Notification, "m", ""},
		{"escaped method", `{"jsonrpc":"2.0","method":"session\/update"}`, Notification, "session/update", ""},
		{"escaped key", `{"jsonrpc":"2.0","\u006dethod":"m"}`, Notification, "m", ""},
		{"backslashes before quote", `{"jsonrpc":"2.0","method":"m","params":{"s":"a\\\\"}}`, Notification, "m", ""},
		{"unicode", `{"jsonrpc":"2.0","method":"m","params":{"s":"héllo ✓ \ud83d\ude00"}}`, Notification, "m", ""},
		{"surrogate pair method", `{"jsonrpc":"2.0","method":"\ud83d\ude00 \u00e9","id":"\ud83d\ude00"}`, Request, "😀 é", `"\ud83d\ude00"`},
		{"escapes and numbers", `{"jsonrpc":"2.0","method":"m","params":["\"\\\/\b\f\n\r\t\u0000\uFFFF",-0.0e-0,2E+3,0,1.5,-12e05]}`, Notification, "m", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse([]byte(tt.frame))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if m.Kind != tt.kind || m.Method != tt.method || string(m.ID) != tt.id {
				t.Fatalf("got kind %v method %q id %s", m.Kind, m.Method, m.ID)
			}
			if string(m.Raw) != tt.frame {
				t.Fatal("Raw is not the frame")
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	tests := []struct {
		name, frame string
		id          string // the id the sender can still be answered with
	}{
		{"banner", `Starting agent v1.2...`, ""},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"x"}]`, ""},
		{"no version", `{"id":1,"method":"x"}`, "1"},
		{"old version", `{"jsonrpc":"1.0","id":1,"method":"x"}`, "1"},
		{"duplicate method", `{"jsonrpc":"2.0","method":"session/update","method":"session/request_permission","id":1}`, "1"},
		{"duplicate id", `{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}`, "none"},
		{"escaped duplicate", `{"jsonrpc":"2.0","method":"a","\u006dethod":"b"}`, ""},
		{"method not string", `{"jsonrpc":"2.0","id":1,"method":5}`, "1"},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"x"}`, ""},
		{"bool id", `{"jsonrpc":"2.0","id":true,"method":"x"}`, ""},
		{"result and error", `{"jsonrpc":"2.0","id":1,"result":1,"error":{}}`, "1"},
		{"method and result", `{"jsonrpc":"2.0","id":1,"method":"x","result":1}`, "1"},
		{"response without id", `{"jsonrpc":"2.0","result":1}`, ""},
		{"nothing", `{"jsonrpc":"2.0"}`, ""},
		{"string params", `{"jsonrpc":"2.0","method":"x","params":"s"}`, ""},
		{"trailing data", `{"jsonrpc":"2.0","method":"x"} {}`, ""},
		{"truncated", `{"jsonrpc":"2.0","method":"x","params":{"a":"b`, ""},
		{"unterminated string", `{"jsonrpc":"2.0","method":"x\"}`, ""},
		{"bad literal", `{"jsonrpc":"2.0","method":"x","params":[tru]}`, ""},
		{"bad number", `{"jsonrpc":"2.0","method":"x","params":[1-2]}`, ""},
		{"missing comma", `{"jsonrpc":"2.0" "method":"x"}`, ""},
		{"case variant is not the method", `{"jsonrpc":"2.0","Method":"x","id":1}`, ""},
		{"method not UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/prompt\xff\"}", "1"},
		{"method a lone surrogate", `{"jsonrpc":"2.0","id":1,"method":"session/prompt\ud800"}`, "1"},
		{"method a lone low surrogate", `{"jsonrpc":"2.0","id":1,"method":"\udc00\ud800"}`, "1"},
		{"id not UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":\"r\xfe\",\"method\":\"m\"}", "none"},
		{"id a lone surrogate", `{"jsonrpc":"2.0","method":"m","id":"r\ud800\u0041"}`, "none"},
		{"id a lone surrogate, refused before it", `{"jsonrpc":"1.0","method":"m","id":"\udfff"}`, "none"},
		{"control character in a string", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"s\":\"a\tb\"}}", "1"},
		{"bad escape", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"s":"\q"}}`, "1"},
		{"short unicode escape", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"s":"\u12"}}`, "1"},
		{"leading zero", `{"jsonrpc":"2.0","id":1,"method":"m","params":[01]}`, "1"},
		{"bare fraction", `{"jsonrpc":"2.0","id":1,"method":"m","params":[1.]}`, "1"},
		{"bare exponent", `{"jsonrpc":"2.0","id":1,"method":"m","params":[1e+]}`, "1"},
		{"lone minus", `{"jsonrpc":"2.0","id":1,"method":"m","params":[-]}`, "1"},
		{"deep nesting", `{"jsonrpc":"2.0","method":"x","params":` + strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1) + `}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.frame))
			inv, ok := err.(*InvalidError)
			if !ok {
				t.Fatalf("Parse accepted it (err %v)", err)
			}
			if tt.id == "none" && inv.ID != nil {
				t.Fatalf("answerable with id %s, though the id is ambiguous", inv.ID)
			}
			if tt.id != "" && tt.id != "none" && string(inv.ID) != tt.id {
				t.Fatalf("id = %s, want %s", inv.ID, tt.id)
			}
		})
	}
}

func TestParseHead(t *testing.T) {
	h := ParseHead([]byte(`{"jsonrpc":"2.0","id":"r1","method":"session/prompt","params":{"prompt":[{"type":"text","text":"aaaa`))
	if string(h.ID) != `"r1"` || !h.HasMethod || h.IsResponse {
		t.Fatalf("request head = %+v", h)
	}
	h = ParseHead([]byte(`{"id":9,"jsonrpc":"2.0","result":{"content":"aaaa`))
	if string(h.ID) != "9" || h.HasMethod || !h.IsResponse {
		t.Fatalf("response head = %+v", h)
	}
	h = ParseHead([]byte(`{"jsonrpc":"2.0","params":{"x":"aaaa`))
	if h.ID != nil {
		t.Fatalf("id read from a head that was cut before it: %+v", h)
	}
}

func TestFieldAndString(t *testing.T) {
	obj := json.RawMessage(`{"sessionId":"s1","update":{"content":{"text":"x,\"y\"}"},"sessionUpdate":"agent_message_chunk"}}`)
	upd, ok := Field(obj, "update")
	if !ok {
		t.Fatal("update not found")
	}
	if s, ok := String(upd, "sessionUpdate"); !ok || s != "agent_message_chunk" {
		t.Fatalf("sessionUpdate = %q %v", s, ok)
	}
	if _, ok := Field(obj, "missing"); ok {
		t.Fatal("found a missing key")
	}
	if _, ok := String(obj, "update"); ok {
		t.Fatal("an object read as a string")
	}
	if _, ok := Field(json.RawMessage(`[1]`), "a"); ok {
		t.Fatal("found a key in an array")
	}
	if s, ok := String(obj, "update", "sessionUpdate"); !ok || s != "agent_message_chunk" {
		t.Fatalf("path lookup = %q %v", s, ok)
	}
	if s, ok := String(obj, "update", "content", "text"); !ok || s != `x,"y"}` {
		t.Fatalf("escaped string at a path = %q %v", s, ok)
	}
	if _, ok := Field(obj, "sessionId", "x"); ok {
		t.Fatal("descended into a string")
	}
	// The path stops at its member: what follows is not read, even if broken.
	if s, ok := String(json.RawMessage(`{"u":{"k":"v", BROKEN`), "u", "k"); !ok || s != "v" {
		t.Fatalf("lookup read past its member: %q %v", s, ok)
	}
}

func TestMembers(t *testing.T) {
	m, err := Members(json.RawMessage(`{"a":1,"b":{"c":[2]},"A_":null}`))
	if err != nil || len(m) != 3 || string(m["b"]) != `{"c":[2]}` {
		t.Fatalf("Members = %v, %v", m, err)
	}
	for _, bad := range []string{`{"kind":"read","kind":"execute"}`, `{"kind":"read","Kind":"execute"}`, `{"a":1}x`, `[]`, `{"a":}`} {
		if _, err := Members(json.RawMessage(bad)); err == nil {
			t.Errorf("Members(%s) accepted it", bad)
		}
	}
}

func TestIDKey(t *testing.T) {
	if IDKey(json.RawMessage(`"a\u0062"`)) != IDKey(json.RawMessage(`"ab"`)) {
		t.Error("escaped and plain string ids differ")
	}
	if IDKey(json.RawMessage(`"1"`)) == IDKey(json.RawMessage(`1`)) {
		t.Error("string and number ids collide")
	}
	// A JavaScript peer reads numbers as float64: ids equal there are one.
	for _, same := range [][]string{
		{"2", "2.0", "2e0", "20e-1", "0.2E1", "2.000000000000000001"},
		{"0", "-0", "0.0", "0e5"},
		{"9007199254740993", "9007199254740992"},
		{"1e400", "1e999"},
	} {
		for _, id := range same[1:] {
			if IDKey(json.RawMessage(id)) != IDKey(json.RawMessage(same[0])) {
				t.Errorf("ids %s and %s differ", id, same[0])
			}
		}
	}
	for _, other := range [][2]string{{"1", "2"}, {"1", "1.0000001"}, {"1e400", "-1e400"}, {`"2"`, "2.0"}, {"null", `"null"`}} {
		if IDKey(json.RawMessage(other[0])) == IDKey(json.RawMessage(other[1])) {
			t.Errorf("ids %s and %s collide", other[0], other[1])
		}
	}
}

func TestStrictLooksAtEveryDepth(t *testing.T) {
	for _, ok := range []string{`{"a":{"b":1,"c":[{"d":2},{"d":3}]}}`, `[1,{"x":"y"}]`, `"s"`, `{}`} {
		if err := Strict(json.RawMessage(ok)); err != nil {
			t.Errorf("Strict(%s) = %v", ok, err)
		}
	}
	for _, bad := range []string{`{"a":{"b":1,"b":2}}`, `[{"k":1,"K":2}]`, `{"a":[{"x":{"y":1,"Y":1}}]}`, `{"a":1} x`, `{"a":`} {
		if err := Strict(json.RawMessage(bad)); err == nil {
			t.Errorf("Strict(%s) accepted it", bad)
		}
	}
}

// TestParseRefusesCaseVariants: every envelope member in another letter case,
// alone or next to the exact one, in any order, escaped or with the Unicode
// letters Go folds onto ASCII ones, is refused; a request stays answerable
// unless its id is the ambiguous member.
func TestParseRefusesCaseVariants(t *testing.T) {
	variants := map[string][]string{
		"jsonrpc": {"JSONRPC", "Jsonrpc", "jsonRPC", "jſonrpc"},
		"method":  {"Method", "METHOD", "mEthod", "\\u004dethod"},
		"id":      {"ID", "Id", "iD"},
		"params":  {"Params", "PARAMS", "paramS", "paramſ", "\\u0050arams", "\\u0070aram\\u017f"},
		"result":  {"Result", "RESULT", "reſult"},
		"error":   {"Error", "ERROR", "errOr"},
	}
	value := map[string]string{"jsonrpc": `"2.0"`, "method": `"tools/call"`, "id": `2`, "params": `{"name":"drop"}`, "result": `{}`, "error": `{"code":1,"message":"x"}`}
	base := map[string]string{
		"request":  `"jsonrpc":"2.0","id":1,"method":"ping","params":{}`,
		"response": `"jsonrpc":"2.0","id":1,"result":{}`,
	}
	for kind, members := range base {
		for name, vs := range variants {
			for _, v := range vs {
				for _, frame := range []string{
					`{` + members + `,"` + v + `":` + value[name] + `}`,
					`{"` + v + `":` + value[name] + `,` + members + `}`,
				} {
					_, err := Parse([]byte(frame))
					inv, ok := err.(*InvalidError)
					if !ok {
						t.Errorf("%s: Parse accepted %s", kind, frame)
						continue
					}
					switch {
					case name == "id" && inv.ID != nil:
						t.Errorf("answerable with id %s, though the id is ambiguous: %s", inv.ID, frame)
					case name != "id" && string(inv.ID) != "1":
						t.Errorf("id = %s, want 1: %s", inv.ID, frame)
					case name != "id" && kind == "request" && !inv.HasMethod:
						t.Errorf("a request not marked as one: %s", frame)
					case name != "id" && name != "method" && kind == "response" && !inv.IsResponse:
						t.Errorf("a response not marked as one: %s", frame)
					}
				}
			}
		}
	}
	// A lone "Method" is a request to a peer that folds case: answerable.
	if _, err := Parse([]byte(`{"jsonrpc":"2.0","id":3,"Method":"tools/call"}`)); err == nil || !err.(*InvalidError).HasMethod || string(err.(*InvalidError).ID) != "3" {
		t.Errorf(`a lone "Method" is not answerable as a request: %v`, err)
	}
	// Inside params nothing is an envelope member; Strict looks there.
	for _, ok := range []string{`{"jsonrpc":"2.0","id":1,"method":"m","params":{"Params":1,"ID":2}}`, `{"jsonrpc":"2.0","method":"m","_meta":{},"methods":1}`} {
		if _, err := Parse([]byte(ok)); err != nil {
			t.Errorf("Parse(%s) = %v", ok, err)
		}
	}
}

func TestParseRefusesAByteOrderMarkButKeepsTheID(t *testing.T) {
	const bom = "\ufeff"
	tests := []struct {
		frame            string
		id               string
		method, response bool
	}{
		{bom + `{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{}}`, "7", true, false},
		{" " + bom + `{"jsonrpc":"2.0","id":"r","method":"m"}`, `"r"`, true, false},
		{bom + bom + `{"jsonrpc":"2.0","id":7,"method":"m"}`, "7", true, false},
		{bom + `{"jsonrpc":"2.0","id":8,"result":{}}`, "8", false, true},
		{bom + `{"jsonrpc":"2.0","id":9,"method":"m","Params":{}}`, "9", true, false},
		{bom + `{"jsonrpc":"2.0","id":9,"ID":10,"method":"m"}`, "", true, false},
		{bom + `{"jsonrpc":"2.0","method":"m"}`, "", true, false},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.frame))
		inv, ok := err.(*InvalidError)
		if !ok {
			t.Errorf("Parse accepted %q", tt.frame)
			continue
		}
		if string(inv.ID) != tt.id || inv.HasMethod != tt.method || inv.IsResponse != tt.response {
			t.Errorf("%q: id %s method %v response %v, want %s %v %v", tt.frame, inv.ID, inv.HasMethod, inv.IsResponse, tt.id, tt.method, tt.response)
		}
		if !strings.Contains(inv.Reason, "byte order mark") {
			t.Errorf("%q: reason %q does not name the byte order mark", tt.frame, inv.Reason)
		}
	}
	if h := ParseHead([]byte(bom + `{"jsonrpc":"2.0","id":3,"method":"m","params":{"x":"aaa`)); string(h.ID) != "3" || !h.HasMethod {
		t.Errorf("head past a byte order mark = %+v", h)
	}
	if h := ParseHead([]byte(`{"jsonrpc":"2.0","id":3,"Id":4,"method":"m","params":{"x":"aaa`)); h.ID != nil {
		t.Errorf("head with an ambiguous id has id %s", h.ID)
	}
}

// TestStrictFoldsAsGoDoes: Strict and ExactMembers treat names as equal
// exactly when encoding/json would match one for the other.
func TestStrictFoldsAsGoDoes(t *testing.T) {
	for _, pair := range [][2]string{{"path", "PATH"}, {"args", "argſ"}, {"kind", "\u212aind"}, {"a\xff", "a\xfe"}} {
		obj := `{"` + pair[0] + `":1,"x":{"` + pair[0] + `":1,"` + pair[1] + `":2}}`
		if err := Strict(json.RawMessage(obj)); err == nil {
			t.Errorf("Strict accepted %q", obj)
		}
	}
	if _, err := ExactMembers(json.RawMessage(`{"Path":"/etc/passwd","content":""}`), "path", "content"); err == nil {
		t.Error(`ExactMembers took "Path" alone`)
	}
	if _, err := ExactMembers(json.RawMessage(`{"paTh":"x"}`), "path"); err == nil {
		t.Error(`ExactMembers took "paTh"`)
	}
	if m, err := ExactMembers(json.RawMessage(`{"path":"x","Other":1,"_meta":{}}`), "path", "_meta"); err != nil || string(m["path"]) != `"x"` {
		t.Errorf("ExactMembers = %v, %v", m, err)
	}
	// What encoding/json itself matches, for the pairs above.
	for _, name := range []string{"PATH", "paTh"} {
		var v struct {
			Path string `json:"path"`
		}
		if json.Unmarshal([]byte(`{"`+name+`":"x"}`), &v); v.Path != "x" {
			t.Fatalf("encoding/json no longer folds %q onto \"path\": the test's premise is gone", name)
		}
	}
	var v struct {
		Args int `json:"args"`
	}
	if json.Unmarshal([]byte(`{"argſ":1}`), &v); v.Args != 1 {
		t.Fatal(`encoding/json no longer folds "argſ" onto "args": the test's premise is gone`)
	}
}

// TestFoldNameMatchesEqualFold: two names fold alike exactly when
// strings.EqualFold says they are equal.
func TestFoldNameMatchesEqualFold(t *testing.T) {
	names := []string{"path", "Path", "PATH", "pat\u0127", "kind", "\u212aind", "KIND", "args", "argſ", "ARGS", "ſ", "s", "S", "\u00df", "ss", "a\xff", "a\xfe", "a\ufffd", "", "_meta", "_Meta", "ǅ", "ǆ", "Ǆ", "ι", "\u0345", "Ι"}
	for _, a := range names {
		for _, b := range names {
			if (foldName(a) == foldName(b)) != strings.EqualFold(a, b) {
				t.Errorf("foldName(%q)=%q, foldName(%q)=%q, EqualFold %v", a, foldName(a), b, foldName(b), strings.EqualFold(a, b))
			}
		}
	}
}

func TestNamesakes(t *testing.T) {
	got := Namesakes(json.RawMessage(`{"id":1,"Id":2,"i\u0064":3,"x":{"id":4},"ıd":5,"params":{}}`), "id", "params", "method")
	if len(got) != 3 || len(got[0]) != 3 || got[0][1].Name != "Id" || string(got[0][2].Value) != "3" || len(got[1]) != 1 || len(got[2]) != 0 {
		t.Fatalf("Namesakes = %+v", got)
	}
	if _, ok := Only(got[0], "id"); ok {
		t.Error("three namesakes taken for one member")
	}
	if v, ok := Only(got[1], "params"); !ok || string(v) != "{}" {
		t.Errorf("Only(params) = %s, %v", v, ok)
	}
	if _, ok := Only(Namesakes(json.RawMessage(`{"ID":1}`), "id")[0], "id"); ok {
		t.Error("a case variant alone taken for the member")
	}
	if Namesakes(json.RawMessage(`[1]`), "id") != nil || Namesakes(json.RawMessage(`{"id":`), "id") != nil {
		t.Error("not an object, yet namesakes")
	}
}

// TestStringsAreCheckedAsJSONValidChecksThem: a string holding any byte at
// any place among any neighbours is accepted exactly when encoding/json
// accepts it, so the scans eight and thirty-two bytes at a time (after a
// long plain run) miss no quote, backslash or control character and take no
// other byte for one.
func TestStringsAreCheckedAsJSONValidChecksThem(t *testing.T) {
	for _, filler := range []byte{'a', ' ', '!', '#', '[', ']', '\\' + 1, 0x7f, 0x80, 0xa2, 0xdc, 0xff} {
		for b := range 256 {
			for at := range 80 {
				text := bytes.Repeat([]byte{filler}, 80)
				text[at] = byte(b)
				str := append(append([]byte{'"'}, text...), '"')
				if got, want := Strict(str) == nil, json.Valid(str); got != want {
					t.Fatalf("Strict(%q) accepts it: %v, json.Valid: %v", str, got, want)
				}
				if b == '\\' && at < 79 {
					// An escape there: try each character after it.
					for e := range 256 {
						text[at+1] = byte(e)
						str := append(append([]byte{'"'}, text...), '"')
						if got, want := Strict(str) == nil, json.Valid(str); got != want {
							t.Fatalf("Strict(%q) accepts it: %v, json.Valid: %v", str, got, want)
						}
					}
				}
			}
		}
	}
}
