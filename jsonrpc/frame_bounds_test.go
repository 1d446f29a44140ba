package jsonrpc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"
)

// chunkReader hands out its input in reads of the sizes in steps, in turn,
// so that frames end at every kind of place in a read.
type chunkReader struct {
	in    []byte
	steps []int
	i     int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.in) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.in), c.steps[c.i%len(c.steps)])
	c.i++
	copy(p, c.in[:n])
	c.in = c.in[n:]
	return n, nil
}

// frameOf is a frame of n bytes that says which it is, so that a frame
// returned with bytes of another, or shifted, does not compare equal.
func frameOf(tag, n int) string {
	head := fmt.Sprintf("{%d:", tag)
	if n <= len(head) {
		return strings.Repeat("x", n)
	}
	return head + strings.Repeat(string(rune('a'+tag%26)), n-len(head))
}

// splitLines is what Next must return for in: every line that is not
// blank, without its newline, or "too large N" for a line over limit.
func splitLines(in string, limit int) []string {
	lines := strings.Split(in, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var want []string
	for _, l := range lines {
		switch {
		case len(l) > limit:
			want = append(want, fmt.Sprintf("too large %d", len(l)))
		case strings.TrimLeft(l, " \t\r") != "":
			want = append(want, l)
		}
	}
	return want
}

func readLines(t *testing.T, r *Reader, in string) []string {
	t.Helper()
	var got []string
	for {
		f, err := r.Next()
		var tl *TooLargeError
		switch {
		case errors.Is(err, io.EOF):
			return got
		case errors.As(err, &tl):
			got = append(got, fmt.Sprintf("too large %d", tl.Size))
			// The head is the frame's first bytes, wherever they were read.
			if !strings.Contains(in, "\n"+string(tl.Head)) && !strings.HasPrefix(in, string(tl.Head)) || len(tl.Head) != min(int(tl.Size), headSize) {
				t.Fatalf("head of a too large frame: %.40q (%d bytes)", tl.Head, len(tl.Head))
			}
		case err != nil:
			t.Fatalf("Next: %v", err)
		default:
			got = append(got, string(f))
		}
	}
}

// TestReaderFramesAroundItsBuffers relays frames that end one byte before,
// at and after the window, the blocks and the limit, read in pieces of many
// sizes, after shorter frames that shift where they start, with CRLF and
// blank lines, and with and without a final newline.
func TestReaderFramesAroundItsBuffers(t *testing.T) {
	const limit = blockSize + 3*readBufferSize
	var sizes []int
	for _, edge := range []int{readBufferSize, 2 * readBufferSize, blockSize, blockSize + readBufferSize, limit} {
		for d := -2; d <= 2; d++ {
			sizes = append(sizes, edge+d)
		}
	}
	stepSets := [][]int{
		{1 << 30},
		{1, 7, 4096, readBufferSize - 1, readBufferSize, readBufferSize + 1, 3},
		{blockSize + 1, 13, 2 * readBufferSize},
	}
	for _, shift := range []int{0, 1, 100, readBufferSize - 1} {
		var b strings.Builder
		b.WriteString(frameOf(0, shift) + "\n")
		for i, n := range sizes {
			b.WriteString(frameOf(i+1, n))
			switch i % 4 {
			case 0:
				b.WriteString("\n")
			case 1:
				b.WriteString("\r\n")
			case 2:
				b.WriteString("\n\n \t\r\n")
			case 3:
				b.WriteString("\nsmall\n")
			}
		}
		for _, final := range []string{"", "\n", "\r\n"} {
			in := b.String() + frameOf(99, readBufferSize+1) + final
			want := splitLines(in, limit)
			for _, steps := range stepSets {
				r := NewReader(&chunkReader{in: []byte(in), steps: steps}, limit)
				got := readLines(t, r, in)
				if len(got) != len(want) {
					t.Fatalf("shift %d, final %q, steps %v: %d frames, want %d", shift, final, steps, len(got), len(want))
				}
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("shift %d, final %q, steps %v: frame %d is %d bytes %.30q, want %d bytes %.30q",
							shift, final, steps, i, len(got[i]), got[i], len(want[i]), want[i])
					}
				}
			}
		}
	}
}

// frameSource streams count copies of a frame, each followed by a small
// one if there is one, without allocating, in reads of at most a pipe's
// capacity.
type frameSource struct {
	frame, small []byte
	count, at    int
}

func (s *frameSource) Read(p []byte) (int, error) {
	if s.count == 0 {
		return 0, io.EOF
	}
	p = p[:min(len(p), 64<<10)]
	whole := len(s.frame) + len(s.small)
	n := 0
	for n < len(p) && s.count > 0 {
		var k int
		if s.at < len(s.frame) {
			k = copy(p[n:], s.frame[s.at:])
		} else {
			k = copy(p[n:], s.small[s.at-len(s.frame):])
		}
		n += k
		if s.at += k; s.at == whole {
			s.at, s.count = 0, s.count-1
		}
	}
	return n, nil
}

// TestReaderMemoryIsBoundedByItsLargestFrame reads many large frames, back
// to back or each followed by a small one, and checks that after the first
// two the reader allocates nothing: what it holds does not grow with the
// number of frames, and no frame costs a fresh buffer to fault in and to
// collect.
func TestReaderMemoryIsBoundedByItsLargestFrame(t *testing.T) {
	defer func(d time.Duration) { idleRelease = d }(idleRelease)
	idleRelease = time.Hour // the set-aside buffer must be there to reuse
	for _, size := range []int{3 * readBufferSize, 2 * blockSize, retainLimit / 2, 2 * retainLimit} {
		for _, small := range []string{"", `{"small":1}`} {
			const count = 12
			frame := bytes.Repeat([]byte("z"), size)
			frame[size-1] = '\n'
			src := &frameSource{frame: frame, count: count}
			if small != "" {
				src.small, src.count = []byte(small+"\n"), count/2
			}
			r := NewReader(src, 4*retainLimit)
			next := func() {
				if f, err := r.Next(); err != nil || len(f) != size-1 {
					t.Fatalf("large frame: %d bytes, %v", len(f), err)
				}
				if f, err := r.Next(); small != "" && (err != nil || string(f) != small) {
					t.Fatalf("small frame: %.20q, %v", f, err)
				} else if small == "" && (err != nil || len(f) != size-1) {
					t.Fatalf("large frame: %d bytes, %v", len(f), err)
				}
			}
			next()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range count/2 - 1 {
				next()
			}
			runtime.ReadMemStats(&after)
			if grew := after.TotalAlloc - before.TotalAlloc; grew > uint64(size)/4 {
				t.Errorf("%d-byte frames, small %q: reading on after the first two frames allocated %d bytes", size, small, grew)
			}
			if _, err := r.Next(); err != io.EOF {
				t.Fatalf("at the end: %v", err)
			}
		}
	}
}

// TestHasFrameSkipsBlankLines: a relay that flushes when no frame is
// buffered must not wait for input with a frame queued because a blank
// line followed it.
func TestHasFrameSkipsBlankLines(t *testing.T) {
	pr, pw := io.Pipe()
	go func() { _, _ = io.WriteString(pw, "{\"a\":1}\n \r\n\n") }()
	r := NewReader(pr, 1<<20)
	if f, err := r.Next(); err != nil || string(f) != `{"a":1}` {
		t.Fatalf("Next = %q, %v", f, err)
	}
	if r.HasFrame() {
		t.Fatal("HasFrame with only blank lines buffered")
	}
	go func() { _, _ = io.WriteString(pw, "{\"b\":2}\n{\"c\":3}\n"); pw.Close() }()
	if f, err := r.Next(); err != nil || string(f) != `{"b":2}` {
		t.Fatalf("Next = %q, %v", f, err)
	}
	if !r.HasFrame() {
		t.Fatal("no HasFrame with a frame buffered")
	}
}

// BenchmarkReader reads frames of 1 KiB, 1 MiB and 20 MiB back to back, in
// reads of a pipe's capacity: the reader's own cost per frame, its copies
// and allocations, without the pipe's.
func BenchmarkReader(b *testing.B) {
	for _, size := range []int{1 << 10, 1 << 20, 20 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			frame := bytes.Repeat([]byte("z"), size)
			frame[size-1] = '\n'
			r := NewReader(&frameSource{frame: frame, count: b.N}, 64<<20)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for range b.N {
				if f, err := r.Next(); err != nil || len(f) != size-1 {
					b.Fatalf("frame: %d bytes, %v", len(f), err)
				}
			}
		})
	}
}
