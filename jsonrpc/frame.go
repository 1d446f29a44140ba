// Package jsonrpc owns the wire: newline-delimited JSON-RPC 2.0 frames, a
// cheap reading of each message's envelope (kind, method, id), and writers
// that keep every frame whole.
//
// It knows nothing of ACP or of any method's meaning, and it never re-encodes
// a message it did not create: what it reads is forwarded as the exact bytes
// that arrived. Message types for what the broker writes on its own come from
// github.com/sourcegraph/jsonrpc2.
package jsonrpc

import (
	"bytes"
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// readBufferSize is the reader's window: the buffer small frames are read
// into and returned from.
const readBufferSize = 64 << 10

// retainLimit is the largest frame buffer the reader keeps while it waits for
// input. A larger one is set aside while the stream is quiet or carries small
// frames, for the next large frame to reuse, and dropped after idleRelease:
// a reader idle that long holds the window and at most one buffer of
// retainLimit, whatever its largest frame was.
const retainLimit = 8 << 20

// idleRelease is how long a set-aside large buffer waits for a large frame
// (a variable for the tests).
var idleRelease = 2 * time.Second

// blockSize is the size of the blocks the rest of a frame is read into once
// it outgrows every buffer the reader has: a growing frame is never copied
// into ever larger buffers, only once, whole, at its end.
const blockSize = 1 << 20

// headSize is how much of an oversized frame is kept, enough to read its
// envelope keys (jsonrpc, id, method) when the sender puts them first.
const headSize = 4 << 10

// TooLargeError reports a frame longer than the reader's limit. The frame has
// been consumed and discarded; Head holds its first bytes.
type TooLargeError struct {
	Size  int64 // bytes in the frame, without the newline
	Limit int
	Head  []byte
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("message of %d bytes exceeds the limit of %d bytes", e.Size, e.Limit)
}

// Reader splits a byte stream into newline-delimited frames. It reads
// straight into the buffer a frame is returned from, and looks at each byte
// once to find the newline.
type Reader struct {
	src   io.Reader
	limit int
	// buf[start:end] has been read and not returned; buf[start:scanned]
	// holds no newline.
	buf                 []byte
	start, scanned, end int
	window              []byte                 // the buffer of readBufferSize, kept for good
	spare               atomic.Pointer[[]byte] // a large buffer set aside, see retainLimit
	release             *time.Timer            // drops spare
	pending             error                  // a read error to report once the buffered frames are out
}

// NewReader returns a Reader that refuses frames longer than limit bytes.
func NewReader(r io.Reader, limit int) *Reader {
	window := make([]byte, readBufferSize)
	return &Reader{src: r, limit: limit, buf: window, window: window}
}

// Next returns the next frame that is not blank, without its line ending.
// The slice is valid only until the next call. A frame over the limit is
// skipped whole and reported as *TooLargeError; reading can go on after it.
// At the end of the stream Next returns io.EOF.
func (r *Reader) Next() ([]byte, error) {
	for {
		frame, err := r.next()
		if err != nil {
			return nil, err
		}
		if !blank(frame) {
			return frame, nil
		}
	}
}

func blank(line []byte) bool { return len(bytes.TrimLeft(line, " \t\r")) == 0 }

// HasFrame reports whether a whole frame that is not blank is already
// buffered, so that the next call to Next will not wait for input.
func (r *Reader) HasFrame() bool {
	for {
		i := bytes.IndexByte(r.buf[r.scanned:r.end], '\n')
		if i < 0 {
			r.scanned = r.end
			return false
		}
		nl := r.scanned + i
		if !blank(r.buf[r.start:nl]) {
			r.scanned = nl
			return true
		}
		r.start, r.scanned = nl+1, nl+1 // Next would skip it
	}
}

func (r *Reader) next() ([]byte, error) {
	for {
		if i := bytes.IndexByte(r.buf[r.scanned:r.end], '\n'); i >= 0 {
			nl := r.scanned + i
			frame := r.buf[r.start:nl]
			r.start, r.scanned = nl+1, nl+1
			if len(frame) > r.limit {
				return nil, r.tooLarge(frame, int64(len(frame)))
			}
			return frame, nil
		}
		r.scanned = r.end
		if r.end-r.start > r.limit {
			return nil, r.discard()
		}
		if r.pending != nil {
			frame := r.buf[r.start:r.end]
			r.start = r.end
			if len(frame) == 0 {
				return nil, r.pending
			}
			return frame, nil // unterminated, at the end of the stream
		}
		if r.start > 0 {
			r.compact()
			continue
		}
		if r.end == len(r.buf) && !r.grow() {
			return r.gather()
		}
		r.fill()
	}
}

// fill reads once into the free end of buf.
func (r *Reader) fill() {
	n, err := r.src.Read(r.buf[r.end:])
	r.end += n
	if err != nil {
		r.pending = err
	}
}

// compact moves the unreturned bytes, the start of the next frame, to the
// front of buf. A buffer over retainLimit is set aside for the next large
// frame instead when they fit in the window, so that a reader waiting for
// input holds no large buffer but the one set aside.
func (r *Reader) compact() {
	rest := r.buf[r.start:r.end]
	if len(r.buf) > retainLimit && len(rest) <= len(r.window) {
		r.setAside(r.buf)
		r.keep(rest)
		r.scanned = r.end
		return
	}
	n := copy(r.buf, rest)
	r.start, r.scanned, r.end = 0, n, n
}

// keep makes rest, bytes read after the end of a frame, the start of a
// buffer of at most retainLimit: the window when they fit.
func (r *Reader) keep(rest []byte) {
	buf := r.window
	if len(rest) > len(buf) {
		buf = make([]byte, len(rest)+readBufferSize)
	}
	n := copy(buf, rest)
	r.buf, r.start, r.scanned, r.end = buf, 0, 0, n
}

// grow moves the frame, which fills buf from its start, into the set-aside
// buffer when that is larger, and reports whether it did.
func (r *Reader) grow() bool {
	spare := r.spare.Swap(nil)
	if spare == nil {
		return false
	}
	if len(*spare) <= len(r.buf) {
		handBack(*spare)
		return false
	}
	copy(*spare, r.buf[:r.end])
	r.buf = *spare
	return true
}

func (r *Reader) setAside(buf []byte) {
	r.spare.Store(&buf)
	if r.release == nil {
		r.release = time.AfterFunc(idleRelease, r.dropSpare)
	} else {
		r.release.Reset(idleRelease)
	}
}

func (r *Reader) dropSpare() {
	if spare := r.spare.Swap(nil); spare != nil {
		handBack(*spare)
	}
}

// gather reads the rest of a frame that fills buf into blocks, then copies
// it once, whole, into a new buffer that becomes buf, so that a frame of
// about the same size next time is read straight into place.
func (r *Reader) gather() ([]byte, error) {
	var blocks [][]byte
	size := r.end // bytes of the frame read so far, buf[:end] and blocks
	for {
		if n := len(blocks); n == 0 || len(blocks[n-1]) == cap(blocks[n-1]) {
			blocks = append(blocks, make([]byte, 0, blockSize))
		}
		last := &blocks[len(blocks)-1]
		n, err := r.src.Read((*last)[len(*last):cap(*last)])
		chunk := (*last)[len(*last) : len(*last)+n]
		*last = (*last)[:len(*last)+n]
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 && err == nil && size+n <= r.limit {
			size += n
			continue
		}
		if err != nil {
			r.pending = err
		}
		var rest []byte
		if i >= 0 {
			rest = chunk[i+1:]
			*last = (*last)[:len(*last)-len(rest)-1]
			size += i
		} else {
			size += n
		}
		if size > r.limit {
			frame := r.buf[:r.end]
			if i < 0 && r.pending == nil {
				return nil, r.discardFrom(frame, int64(size))
			}
			err := r.tooLarge(frame, int64(size))
			r.keep(rest)
			return nil, err
		}
		// The frame, its newline, what came after it, and room for a
		// frame somewhat larger.
		whole := make([]byte, size+1+len(rest)+size/8+readBufferSize)
		n = copy(whole, r.buf[:r.end])
		for _, b := range blocks {
			n += copy(whole[n:], b)
			if len(b) == cap(b) { // the last one holds what follows
				handBack(b)
			}
		}
		r.buf, r.start, r.scanned, r.end = whole, n, n, n // unterminated, at the end of the stream
		if i >= 0 {
			whole[n] = '\n'
			end := n + 1 + copy(whole[n+1:], rest)
			r.buf, r.start, r.scanned, r.end = whole, n+1, n+1, end
		}
		return whole[:size], nil
	}
}

// discard consumes the rest of an oversized frame, keeping only its head.
func (r *Reader) discard() error {
	return r.discardFrom(r.buf[r.start:r.end], int64(r.end-r.start))
}

// discardFrom consumes the rest of an oversized frame whose first size bytes
// have been read and whose head is at the start of head, reading into the
// window; what follows the frame's newline stays there.
func (r *Reader) discardFrom(head []byte, size int64) error {
	e := r.tooLarge(head, size)
	r.buf, r.start, r.scanned, r.end = r.window, 0, 0, 0
	for r.pending == nil {
		r.fill()
		if i := bytes.IndexByte(r.buf[:r.end], '\n'); i >= 0 {
			e.Size += int64(i)
			r.start, r.scanned = i+1, i+1
			return e
		}
		e.Size += int64(r.end)
		r.end = 0
	}
	return e
}

func (r *Reader) tooLarge(frame []byte, size int64) *TooLargeError {
	return &TooLargeError{Size: size, Limit: r.limit, Head: bytes.Clone(frame[:min(len(frame), headSize)])}
}
