package session

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// tracer writes the --trace file: one JSON object per line with the time,
// the direction, and either the message exactly as it passed ("message") or,
// for a line that is not JSON-RPC, its text ("text"). "note" says what the
// broker did with a message it did not simply relay.
type tracer struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

func newTracer(w io.Writer) *tracer {
	if w == nil {
		return nil
	}
	return &tracer{w: w}
}

// record traces a message. The message is embedded as it is, not
// re-encoded, so the trace shows the exact bytes.
func (t *tracer) record(dir string, msg []byte, note string) {
	if t == nil {
		return
	}
	t.write(dir, "message", msg, note)
}

// recordText traces a line that is not a JSON-RPC message.
func (t *tracer) recordText(dir string, text []byte, note string) {
	if t == nil {
		return
	}
	quoted, _ := json.Marshal(string(text))
	t.write(dir, "text", quoted, note)
}

func (t *tracer) write(dir, field string, value []byte, note string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := append(t.buf[:0], `{"time":`...)
	b, _ = appendJSON(b, time.Now().UTC().Format(time.RFC3339Nano))
	b = append(b, `,"dir":`...)
	b, _ = appendJSON(b, dir)
	if note != "" {
		b = append(b, `,"note":`...)
		b, _ = appendJSON(b, note)
	}
	b = append(b, `,"`...)
	b = append(b, field...)
	b = append(b, `":`...)
	b = append(b, value...)
	b = append(b, "}\n"...)
	_, _ = t.w.Write(b) // a trace that cannot be written must not stop the relay
	if cap(b) <= 1<<20 {
		t.buf = b
	}
}

func appendJSON(b []byte, s string) ([]byte, error) {
	q, err := json.Marshal(s)
	return append(b, q...), err
}
