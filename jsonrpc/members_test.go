package jsonrpc

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestNestedNamesakesReadsAsTwoPasses: the one-pass nested scan finds what
// Namesakes of the object and then of each nested member's value find.
func TestNestedNamesakesReadsAsTwoPasses(t *testing.T) {
	for _, obj := range []string{
		`{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t"}}`,
		`{"update":{"SessionUpdate":"a","sessionUpdate":"b","toolCall\u0049d":1},"sessionId":"s","Update":{"toolCallId":"x"}}`,
		`{"update":"not an object","sessionId":"s"}`,
		`{"update": {"content":{"text":"\"}\\\""},"toolCallId":"t"} , "x":[{"update":{}}]}`,
		`{}`,
	} {
		outer, nested := NestedNamesakes(json.RawMessage(obj), []string{"sessionId", "update"}, 1, "sessionUpdate", "toolCallId")
		want := Namesakes(json.RawMessage(obj), "sessionId", "update")
		if !reflect.DeepEqual(outer, want) {
			t.Errorf("%s: outer %v, want %v", obj, outer, want)
		}
		var wantNested [][][]Namesake
		for _, u := range want[1] {
			if in := Namesakes(u.Value, "sessionUpdate", "toolCallId"); in != nil {
				wantNested = append(wantNested, in)
			}
		}
		if !reflect.DeepEqual(nested, wantNested) {
			t.Errorf("%s: nested %v, want %v", obj, nested, wantNested)
		}
	}
	if outer, _ := NestedNamesakes(json.RawMessage(`{"update":{"a":}`), []string{"update"}, 0, "a"); outer != nil {
		t.Errorf("a broken object was read: %v", outer)
	}
}
