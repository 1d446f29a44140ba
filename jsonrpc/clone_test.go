package jsonrpc

import (
	"bytes"
	"encoding/json"
	"testing"
)

// Clone keeps every value of a parsed message, in a copy of its frame that
// outlives the buffer it was read from.
func TestCloneSharesNothingWithTheReadBuffer(t *testing.T) {
	for _, frame := range []string{
		`{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"t1"}}}`,
		`  {"params": ["x"], "method": "m", "id": "a\"b", "jsonrpc": "2.0"}  `,
		`{"jsonrpc":"2.0","id":null,"result":{"ok":true}}`,
		`{"jsonrpc":"2.0","id":"e","error":{"code":1,"message":"no"}}`,
		`{"jsonrpc":"2.0","method":"n"}`,
	} {
		// The frame sits inside a larger buffer, as the reader's are.
		buf := []byte("xx" + frame + "\nyy")
		read, err := Parse(buf[2 : 2+len(frame)])
		if err != nil {
			t.Fatalf("Parse(%s): %v", frame, err)
		}
		want, _ := Parse([]byte(frame))
		c := read.Clone()
		for i := range buf {
			buf[i] = '#' // the reader reuses its buffer
		}
		if string(c.Raw) != frame || c.Method != want.Method || c.Kind != want.Kind || c.IDKey() != want.IDKey() {
			t.Errorf("Clone of %s = raw %s, method %q, kind %v, id key %q", frame, c.Raw, c.Method, c.Kind, c.IDKey())
		}
		for _, v := range []struct {
			name      string
			got, want json.RawMessage
		}{{"id", c.ID, want.ID}, {"params", c.Params, want.Params}, {"result", c.Result, want.Result}, {"error", c.Error, want.Error}} {
			if !bytes.Equal(v.got, v.want) || (v.got == nil) != (v.want == nil) {
				t.Errorf("Clone of %s: %s = %s, want %s", frame, v.name, v.got, v.want)
			}
			if len(v.got) > 0 && !within(c.Raw, v.got) {
				t.Errorf("Clone of %s: %s is a copy of its own, not part of the clone's Raw", frame, v.name)
			}
		}
	}
}

// within reports whether v's bytes are some of raw's.
func within(raw, v []byte) bool {
	for i := range raw {
		if &raw[i] == &v[0] {
			return true
		}
	}
	return false
}

// A message not made by Parse, whose values are not slices of its Raw, is
// cloned value by value.
func TestCloneCopiesValuesOutsideRaw(t *testing.T) {
	params := json.RawMessage(`{"a":1}`)
	m := &Message{Raw: []byte(`{"jsonrpc":"2.0","method":"m","params":{"b":2}}`), Kind: Notification, Method: "m", Params: params}
	c := m.Clone()
	params[2] = 'z'
	if string(c.Params) != `{"a":1}` {
		t.Errorf("Clone's params = %s, want {\"a\":1}", c.Params)
	}
}
