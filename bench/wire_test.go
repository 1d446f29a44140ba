//go:build linux

package bench

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"testing"

	"github.com/acp-broker/acp-broker/jsonrpc"
)

// BenchmarkWire takes apart, in-process, what the broker does to every
// session/update it relays, to explain the end-to-end figures: splitting the
// stream into frames (Read), reading the envelope (Parse), the tracker's look
// at the update's type (Track: the same jsonrpc call session's tracker
// makes), and writing the frame to a pipe one write per frame, as the broker
// does (Write), or coalesced through a 64 KiB buffer (WriteBuffered).
// bench/run.sh does not run it: go test -run '^$' -bench Wire ./bench/
func BenchmarkWire(b *testing.B) {
	for _, size := range []int{1 << 10, 1 << 20, 20 << 20} {
		line := updateLine(size)
		frame := line[:len(line)-1]
		name := sizeName(size)
		b.Run("Read/"+name, func(b *testing.B) {
			r := jsonrpc.NewReader(&cycle{data: repeatTo(line, 256<<10)}, 64<<20)
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Next(); err != nil {
					b.Fatal(err)
				}
			}
		})
		if size > 1<<20 {
			continue
		}
		b.Run("Parse/"+name, func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := jsonrpc.Parse(frame); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("Track/"+name, func(b *testing.B) {
			m, err := jsonrpc.Parse(frame)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			for b.Loop() {
				if kind, _ := jsonrpc.String(m.Params, "update", "sessionUpdate"); kind != "agent_message_chunk" {
					b.Fatalf("sessionUpdate %q", kind)
				}
			}
		})
		b.Run("Write/"+name, func(b *testing.B) {
			w := drainedPipe(b)
			jw := jsonrpc.NewWriter(w)
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				if err := jw.WriteFrame(frame); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("WriteBuffered/"+name, func(b *testing.B) {
			w := drainedPipe(b)
			bw := bufio.NewWriterSize(w, 64<<10)
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				if _, err := bw.Write(line); err != nil {
					b.Fatal(err)
				}
			}
			if err := bw.Flush(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

func sizeName(size int) string {
	if size >= 1<<20 {
		return strconv.Itoa(size>>20) + "MiB"
	}
	return strconv.Itoa(size>>10) + "KiB"
}

// cycle reads data over and over.
type cycle struct {
	data []byte
	off  int
}

func (c *cycle) Read(p []byte) (int, error) {
	n := copy(p, c.data[c.off:])
	c.off = (c.off + n) % len(c.data)
	return n, nil
}

// repeatTo repeats line until there are at least n bytes.
func repeatTo(line []byte, n int) []byte {
	b := append([]byte(nil), line...)
	for len(b) < n {
		b = append(b, line...)
	}
	return b
}

// drainedPipe returns the write end of a pipe whose other end a goroutine
// reads and discards, as a fast editor would.
func drainedPipe(b *testing.B) *os.File {
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, r)
		close(done)
	}()
	b.Cleanup(func() {
		w.Close()
		<-done
		r.Close()
	})
	return w
}
