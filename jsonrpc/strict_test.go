package jsonrpc

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// objectOf is an object with the given member names, each valued 1.
func objectOf(names []string) json.RawMessage {
	members := make([]string, len(names))
	for i, n := range names {
		members[i] = fmt.Sprintf("%q:1", n)
	}
	return json.RawMessage("{" + strings.Join(members, ",") + "}")
}

// A repeated member, or two alike but for case, is refused wherever the two
// stand among an object's members, however many there are.
func TestStrictFindsTwinsAtAnyPosition(t *testing.T) {
	const size = 20
	for i := range size {
		for j := i + 1; j < size; j++ {
			for _, twin := range []string{"sessionId", "SESSIONID", "ſessionId"} {
				names := make([]string, size)
				for k := range names {
					names[k] = fmt.Sprintf("m%d", k)
				}
				names[i], names[j] = "sessionId", twin
				if err := Strict(objectOf(names)); err == nil {
					t.Fatalf("Strict accepted members %d and %d: %s", i, j, objectOf(names))
				}
			}
		}
	}
	names := make([]string, size)
	for k := range names {
		names[k] = fmt.Sprintf("m%d", k)
	}
	if err := Strict(objectOf(names)); err != nil {
		t.Fatalf("Strict refused distinct members: %v", err)
	}
}

// Checking a small object allocates no more than its member names.
func TestStrictOfASmallObjectAllocatesOnlyItsNames(t *testing.T) {
	params := json.RawMessage(`{"sessionId":"s1","modeId":"acceptEdits","_meta":{"client":"bench-editor","traceParent":"00-4bf9"}}`)
	if n := testing.AllocsPerRun(100, func() { _ = Strict(params) }); n > 5 {
		t.Fatalf("Strict allocated %v times for 5 member names", n)
	}
}

// StrictText refuses a string or member name at any depth that peers read
// differently, and takes every exact one, escaped or not.
func TestStrictTextRefusesInexactUnicodeAtAnyDepth(t *testing.T) {
	for _, v := range []string{
		`"\ud800"`,
		`["ok", "\udc00"]`,
		`{"a": {"b": ["x", "\ud83dx"]}}`,
		`{"a": {"\ud800": 1}}`,
		`{"\ud83d\ud83d": 1}`,
		"{\"a\": \"\xff\"}",
		"{\"\xed\xa0\x80\": 1}",
		// After a string that ends in an escaped quote or backslash.
		`["\"", "\ud800"]`,
		`["\\", "\ud800"]`,
		`{"a\"b\\": "\udc00"}`,
	} {
		if err := Strict(json.RawMessage(v)); err != nil {
			t.Fatalf("Strict(%q) = %v: it checks structure only", v, err)
		}
		if err := StrictText(json.RawMessage(v)); err == nil || !strings.Contains(err.Error(), "not valid Unicode") {
			t.Errorf("StrictText(%q) = %v, want it refused", v, err)
		}
	}
	for _, v := range []string{`"\ud83d\ude00"`, `{"\ufffd": ["é", "\u00e9", "\\ud800"]}`, `[1, true, null, {}]`, `["\\\"", "\"\\ud800\""]`, `{"\\": "\\udc00"}`} {
		if err := StrictText(json.RawMessage(v)); err != nil {
			t.Errorf("StrictText(%q) = %v", v, err)
		}
	}
	if err := StrictText(json.RawMessage(`{"a": 1, "A": 2}`)); err == nil {
		t.Error("StrictText took a case-variant member: it is Strict too")
	}
}
