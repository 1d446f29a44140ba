package rules

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzObjectMembers checks that the one-pass reading of a checked tool call
// (objectMembers) gives exactly the members encoding/json gives, names and
// raw values alike, on any input checkStrict passes.
func FuzzObjectMembers(f *testing.F) {
	for _, s := range append(typicalRequests("/work/repo"),
		`{}`, `null`, `[1]`, `"x"`, ` {"a" : 1 , "b":[{"c":"\""}]} `, `{"\u006bind":"edit"}`, `{"k\u00e9y":1}`,
		`{"\ud800":1}`, "{\"k\xffy\":1}", `{"a\/b":1,"a/c":2}`, `{"kind":"x","KIND":"y"}`, `{"a":1}x`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		if checkStrict(obj) != nil {
			return
		}
		got, gotErr := objectMembers(obj, true)
		var want map[string]json.RawMessage
		wantErr := json.Unmarshal(obj, &want)
		if (gotErr == nil) != (wantErr == nil) || (got == nil) != (want == nil) || len(got) != len(want) {
			t.Fatalf("%q: members %v (%v), encoding/json %v (%v)", obj, got, gotErr, want, wantErr)
		}
		for name, raw := range want {
			if !bytes.Equal(got[name], raw) {
				t.Fatalf("%q: member %q is %q, encoding/json says %q", obj, name, got[name], raw)
			}
		}
	})
}
