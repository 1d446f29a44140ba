package jsonrpc

import (
	"bytes"
	"encoding/base64"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// benchFrames are the shapes the relay reads most: a small request, agent
// message chunks whose text is prose and code (escapes every few bytes, as
// in bench/), an update made of many small members, and an image chunk
// (base64: no escapes).
func benchFrames() []benchFrame {
	update := func(size int) []byte {
		const text = `Here is the change: \"func main() { fmt.Println(\\\"hi\\\") }\" keeps the tests green.\n`
		b := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`)
		for n := 0; n < size; n += len(text) {
			b = append(b, text...)
		}
		return append(b, `"}}}}`...)
	}
	many := func() []byte {
		many := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"t1","rawOutput":{`)
		for i := range 2000 {
			if i > 0 {
				many = append(many, ',')
			}
			many = strconv.AppendInt(append(many, `"k`...), int64(i), 10)
			many = append(many, `":[1,-2.5e3,true,null,"v"]`...)
		}
		return append(many, `}}}}`...)
	}
	return []benchFrame{
		{"request-200B", func() []byte {
			return []byte(`{"jsonrpc":"2.0","id":42,"method":"session/prompt","params":{"sessionId":"sess_01J9Z7","prompt":[{"type":"text","text":"Please run the tests and fix what fails in ./pkg/..."}]}}`)
		}},
		{"update-1KiB", func() []byte { return update(1 << 10) }},
		{"update-1MiB", func() []byte { return update(1 << 20) }},
		{"update-20MiB", func() []byte { return update(20 << 20) }},
		{"update-2000-members", many},
		{"image-1MiB", func() []byte {
			b := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"image","mimeType":"image/png","data":"`)
			b = append(b, base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("an image, in base64, has no escapes "), 1<<20/48))...)
			return append(b, `"}}}}`...)
		}},
	}
}

// benchFrame makes its frame only when its benchmark runs.
type benchFrame struct {
	name  string
	frame func() []byte
}

// BenchmarkParse measures reading the envelope of each frame shape, and
// the sessionUpdate kind the tracker reads of every update. cpu-ns/op is the
// process's CPU time per frame, which a busy machine disturbs less than the
// wall clock.
func BenchmarkParse(b *testing.B) {
	for _, f := range benchFrames() {
		b.Run(f.name, func(b *testing.B) {
			frame := f.frame()
			if _, err := Parse(frame); err != nil {
				b.Fatal(err)
			}
			runtime.GC() // not to count the collection of what came before
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			start := cpuTime()
			for b.Loop() {
				m, err := Parse(frame)
				if err != nil {
					b.Fatal(err)
				}
				if m.Method == "session/update" {
					if _, ok := String(m.Params, "update", "sessionUpdate"); !ok {
						b.Fatal("no sessionUpdate")
					}
				}
			}
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
