package jsonrpc

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func readAll(t *testing.T, r *Reader) (frames []string, errs []error) {
	t.Helper()
	for {
		f, err := r.Next()
		if errors.Is(err, io.EOF) {
			return frames, errs
		}
		if err != nil {
			errs = append(errs, err)
			frames = append(frames, "<error>")
			continue
		}
		frames = append(frames, string(f))
	}
}

func TestReaderSplitsLinesAndSkipsBlankOnes(t *testing.T) {
	in := "a\n\n  \t\r\nb\r\n" + strings.Repeat("c", 3*readBufferSize) + "\nlast"
	frames, errs := readAll(t, NewReader(strings.NewReader(in), 1<<20))
	want := []string{"a", "b\r", strings.Repeat("c", 3*readBufferSize), "last"}
	if len(errs) != 0 || len(frames) != len(want) {
		t.Fatalf("frames %d, errs %v", len(frames), errs)
	}
	for i := range want {
		if frames[i] != want[i] {
			t.Errorf("frame %d = %.20q…, want %.20q…", i, frames[i], want[i])
		}
	}
}

func TestReaderRefusesOversizedFramesAndGoesOn(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":3,"method":"m","params":"` + strings.Repeat("x", 300<<10) + `"}`
	in := "first\n" + big + "\nafter\n" + big // the last one ends at EOF
	frames, errs := readAll(t, NewReader(strings.NewReader(in), 100<<10))
	if strings.Join(frames, ",") != "first,<error>,after,<error>" {
		t.Fatalf("frames = %v", frames)
	}
	for _, err := range errs {
		var tl *TooLargeError
		if !errors.As(err, &tl) {
			t.Fatalf("error %v is not a TooLargeError", err)
		}
		if tl.Size != int64(len(big)) || tl.Limit != 100<<10 || len(tl.Head) != headSize {
			t.Fatalf("size %d limit %d head %d", tl.Size, tl.Limit, len(tl.Head))
		}
		if h := ParseHead(tl.Head); string(h.ID) != "3" || !h.HasMethod {
			t.Fatalf("head = %+v", h)
		}
	}
}

func TestReaderRefusesFramesJustOverTheLimit(t *testing.T) {
	// Frames that end inside the read buffer are held to the limit too.
	in := strings.Repeat("a", 100) + "\n" + strings.Repeat("b", 101) + "\n" + strings.Repeat("c", 100+readBufferSize) + "\nok\n"
	frames, errs := readAll(t, NewReader(strings.NewReader(in), 100))
	if strings.Join(frames, ",") != strings.Repeat("a", 100)+",<error>,<error>,ok" || len(errs) != 2 {
		t.Fatalf("frames = %.40q…, errs %v", frames, errs)
	}
	if tl := errs[0].(*TooLargeError); tl.Size != 101 {
		t.Fatalf("size = %d", tl.Size)
	}
}

func TestReaderDoesNotKeepAHugeBuffer(t *testing.T) {
	defer func(d time.Duration) { idleRelease = d }(idleRelease)
	idleRelease = time.Millisecond
	in := strings.Repeat("y", 4*retainLimit) + "\nsmall\n"
	r := NewReader(strings.NewReader(in), 8*retainLimit)
	if f, err := r.Next(); err != nil || len(f) != 4*retainLimit {
		t.Fatalf("big frame: %d %v", len(f), err)
	}
	if f, err := r.Next(); err != nil || string(f) != "small" {
		t.Fatalf("small frame: %q %v", f, err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the frames: %v", err)
	}
	if len(r.buf) > retainLimit {
		t.Fatalf("waits for input with a %d-byte buffer", len(r.buf))
	}
	// The large buffer set aside for the next large frame is dropped when
	// none comes.
	for deadline := time.Now().Add(10 * time.Second); r.spare.Load() != nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the large buffer was never dropped")
		}
	}
}

func TestWriterKeepsFramesWhole(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	small, large := []byte(`{"a":1}`), bytes.Repeat([]byte("z"), smallFrame+1)
	if err := w.WriteFrame(small); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFrame(large); err != nil {
		t.Fatal(err)
	}
	want := string(small) + "\n" + string(large) + "\n"
	if buf.String() != want {
		t.Fatal("frames were not written with their newlines")
	}
}

type failingWriter struct{ n int }

func (f *failingWriter) Write(p []byte) (int, error) {
	f.n++
	return 0, errors.New("broken pipe")
}

func TestWriterStopsAfterTheFirstFailure(t *testing.T) {
	fw := &failingWriter{}
	w := NewWriter(fw)
	if w.WriteFrame([]byte("a")) == nil || w.WriteFrame([]byte("b")) == nil || w.Err() == nil {
		t.Fatal("a failed write was not reported")
	}
	if fw.n != 1 {
		t.Fatalf("wrote %d times after failing", fw.n)
	}
}

func TestBuiltMessagesParse(t *testing.T) {
	res, err := NewResult([]byte(`-1.5`), map[string]int{"a": 1})
	if err != nil || string(res) != `{"jsonrpc":"2.0","id":-1.5,"result":{"a":1}}` {
		t.Fatalf("NewResult = %s, %v", res, err)
	}
	if e := NewError(nil, CodeInvalidRequest, "bad"); string(e) != `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"bad"}}` {
		t.Fatalf("NewError = %s", e)
	}
	req, err := NewRequest("acp-broker-1", "m", []int{1})
	if err != nil {
		t.Fatal(err)
	}
	n, err := NewNotification("$/cancel_request", map[string]int{"requestId": 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{res, req, n} {
		if _, err := Parse(b); err != nil {
			t.Errorf("%s does not parse: %v", b, err)
		}
	}
}
