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
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// readBufferSize is the reader's window. Lines longer than this are gathered
// into a separate buffer, so small messages cost no extra copy.
const readBufferSize = 64 << 10

// retainLimit is the largest gathering buffer kept for reuse between frames;
// a larger one is released so one big message does not pin its memory.
const retainLimit = 8 << 20

// blockSize is the size of the blocks a frame that outgrows the gathering
// buffer is collected in: a growing frame is never copied into ever larger
// buffers, only once, whole, at its end.
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

// Reader splits a byte stream into newline-delimited frames.
type Reader struct {
	br      *bufio.Reader
	limit   int
	gather  []byte   // the frame being gathered, while it fits
	blocks  [][]byte // the rest of a frame that outgrew gather
	size    int      // bytes gathered so far, in gather and blocks
	pending error    // a read error to report after the final unterminated frame
}

// NewReader returns a Reader that refuses frames longer than limit bytes.
func NewReader(r io.Reader, limit int) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, readBufferSize), limit: limit}
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
		if len(bytes.TrimLeft(frame, " \t\r")) > 0 {
			return frame, nil
		}
	}
}

func (r *Reader) next() ([]byte, error) {
	if r.pending != nil {
		return nil, r.pending
	}
	if cap(r.gather) > retainLimit {
		r.gather = nil
	}
	r.gather, r.blocks, r.size = r.gather[:0], r.blocks[:0], 0
	for {
		chunk, err := r.br.ReadSlice('\n')
		switch {
		case err == nil && r.size == 0:
			if len(chunk)-1 > r.limit {
				r.add(chunk[:min(len(chunk), headSize)])
				return nil, r.tooLarge(int64(len(chunk) - 1))
			}
			return chunk[:len(chunk)-1], nil
		case err == nil:
			r.add(chunk)
			if r.size-1 > r.limit {
				return nil, r.tooLarge(int64(r.size - 1))
			}
			frame := r.whole()
			return frame[:len(frame)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			r.add(chunk)
			if r.size > r.limit {
				return nil, r.discard()
			}
		default:
			r.add(chunk)
			r.pending = err
			if r.size > r.limit {
				return nil, r.tooLarge(int64(r.size))
			}
			if r.size == 0 {
				return nil, err
			}
			return r.whole(), nil
		}
	}
}

// add appends chunk to the frame being gathered: into the gathering buffer
// while it has room, then into blocks.
func (r *Reader) add(chunk []byte) {
	r.size += len(chunk)
	if len(r.blocks) == 0 && len(r.gather)+len(chunk) <= max(cap(r.gather), readBufferSize) {
		r.gather = append(r.gather, chunk...)
		return
	}
	for len(chunk) > 0 {
		if n := len(r.blocks); n == 0 || len(r.blocks[n-1]) == cap(r.blocks[n-1]) {
			r.blocks = append(r.blocks, make([]byte, 0, blockSize))
		}
		last := &r.blocks[len(r.blocks)-1]
		k := min(len(chunk), cap(*last)-len(*last))
		*last = append(*last, chunk[:k]...)
		chunk = chunk[k:]
	}
}

// whole returns the gathered frame in one buffer, copying it once if it was
// collected in blocks; that buffer becomes the gathering buffer, so frames
// of about the same size need no new memory.
func (r *Reader) whole() []byte {
	if len(r.blocks) == 0 {
		return r.gather
	}
	buf := make([]byte, 0, r.size)
	buf = append(buf, r.gather...)
	for i, b := range r.blocks {
		buf = append(buf, b...)
		r.blocks[i] = nil
	}
	r.blocks = r.blocks[:0]
	r.gather = buf
	return buf
}

// HasFrame reports whether a whole frame is already buffered, so that the
// next call to Next will not wait for input.
func (r *Reader) HasFrame() bool {
	buf, _ := r.br.Peek(r.br.Buffered())
	return bytes.IndexByte(buf, '\n') >= 0
}

// Release drops the gathering buffer, so a large frame's memory can be
// reclaimed before the next frame arrives.
func (r *Reader) Release() { r.gather = nil }

// discard consumes the rest of an oversized frame, keeping only its head.
func (r *Reader) discard() error {
	size := int64(r.size)
	for {
		chunk, err := r.br.ReadSlice('\n')
		size += int64(len(chunk))
		if err == nil {
			return r.tooLarge(size - 1)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			r.pending = err
			return r.tooLarge(size)
		}
	}
}

func (r *Reader) tooLarge(size int64) error {
	head := r.gather
	if len(head) > headSize {
		head = head[:headSize]
	}
	// The head is in gather: it is at least one read window long, more than
	// headSize, before any block is used.
	e := &TooLargeError{Size: size, Limit: r.limit, Head: bytes.Clone(head)}
	r.gather, r.blocks, r.size = nil, nil, 0
	return e
}
