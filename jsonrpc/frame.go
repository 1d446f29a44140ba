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
const retainLimit = 1 << 20

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
	gather  []byte
	pending error // a read error to report after the final unterminated frame
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
	r.gather = r.gather[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		switch {
		case err == nil && len(r.gather) == 0:
			if len(chunk)-1 > r.limit {
				r.gather = append(r.gather, chunk[:min(len(chunk), headSize)]...)
				return nil, r.tooLarge(int64(len(chunk) - 1))
			}
			return chunk[:len(chunk)-1], nil
		case err == nil:
			r.gather = append(r.gather, chunk...)
			if len(r.gather)-1 > r.limit {
				return nil, r.tooLarge(int64(len(r.gather) - 1))
			}
			return r.gather[:len(r.gather)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			r.gather = append(r.gather, chunk...)
			if len(r.gather) > r.limit {
				return nil, r.discard()
			}
		default:
			r.gather = append(r.gather, chunk...)
			if len(r.gather) > r.limit {
				r.pending = err
				return nil, r.tooLarge(int64(len(r.gather)))
			}
			if len(r.gather) == 0 {
				return nil, err
			}
			r.pending = err
			return r.gather, nil
		}
	}
}

// discard consumes the rest of an oversized frame, keeping only its head.
func (r *Reader) discard() error {
	size := int64(len(r.gather))
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
	e := &TooLargeError{Size: size, Limit: r.limit, Head: bytes.Clone(head)}
	r.gather = nil
	return e
}
