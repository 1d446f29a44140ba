package jsonrpc

import (
	"encoding/json"
	"io"
	"sync"

	"github.com/sourcegraph/jsonrpc2"
)

// smallFrame is the size up to which a frame and its newline are joined and
// written with one call; larger frames are written in two calls rather than
// copied.
const smallFrame = 64 << 10

// Writer writes whole frames to one peer. It is the single writer token for
// that peer: frames from any goroutine never interleave. After the first
// failed write every later one fails at once with the same error.
type Writer struct {
	mu      sync.Mutex
	w       io.Writer
	scratch []byte
	queued  []byte // frames Queue has taken and not yet written
	err     error
}

// NewWriter returns a Writer for w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Queue takes frame to be written with the frames after it: it is written
// when the queue would outgrow one small frame's worth of bytes, or at the
// next Flush or WriteFrame. A relay that queues each frame it reads and
// flushes before it waits for more input writes bursts in few calls and
// never holds a frame back.
func (w *Writer) Queue(frame []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queued)+len(frame)+1 > smallFrame && w.flushLocked() != nil {
		return w.err
	}
	if w.err != nil {
		return w.err
	}
	if len(frame) > smallFrame {
		return w.writeLocked(frame)
	}
	w.queued = append(append(w.queued, frame...), '\n')
	return nil
}

// Flush writes the queued frames.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushLocked()
}

func (w *Writer) flushLocked() error {
	if w.err == nil && len(w.queued) > 0 {
		_, w.err = w.w.Write(w.queued)
	}
	w.queued = w.queued[:0]
	return w.err
}

// WriteFrame writes the queued frames, then frame, followed by a newline.
func (w *Writer) WriteFrame(frame []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.flushLocked() != nil {
		return w.err
	}
	return w.writeLocked(frame)
}

func (w *Writer) writeLocked(frame []byte) error {
	if len(frame) <= smallFrame {
		w.scratch = append(append(w.scratch[:0], frame...), '\n')
		_, w.err = w.w.Write(w.scratch)
	} else if _, w.err = w.w.Write(frame); w.err == nil {
		_, w.err = w.w.Write([]byte{'\n'})
	}
	return w.err
}

// Err returns the error that stopped the writer, if any.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// response is a JSON-RPC 2.0 response whose id is echoed exactly as the
// request carried it. jsonrpc2.Response cannot carry every id a peer may use
// (negative or fractional numbers, null), so only its Error type is used.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *jsonrpc2.Error `json:"error,omitempty"`
}

// NewResult builds a success response to the request with the given raw id.
func NewResult(id json.RawMessage, result any) ([]byte, error) {
	raw, err := json.Marshal(result)
	if err != nil {
		return nil, err
	}
	return json.Marshal(response{JSONRPC: "2.0", ID: idOrNull(id), Result: raw})
}

// NewError builds an error response to the request with the given raw id;
// a nil id answers with null, as for a request whose id could not be read.
func NewError(id json.RawMessage, code int64, message string) []byte {
	b, err := json.Marshal(response{JSONRPC: "2.0", ID: idOrNull(id), Error: &jsonrpc2.Error{Code: code, Message: message}})
	if err != nil {
		// Only the id could fail to encode, and it came from a parsed frame.
		panic("jsonrpc: encoding an error response: " + err.Error())
	}
	return b
}

func idOrNull(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return json.RawMessage("null")
	}
	return id
}

// NewRequest builds a request with a string id, for messages the broker sends
// on its own behalf.
func NewRequest(id, method string, params any) ([]byte, error) {
	req := jsonrpc2.Request{Method: method, ID: jsonrpc2.ID{Str: id, IsString: true}}
	if err := req.SetParams(params); err != nil {
		return nil, err
	}
	return json.Marshal(req)
}

// NewNotification builds a notification.
func NewNotification(method string, params any) ([]byte, error) {
	req := jsonrpc2.Request{Method: method, Notif: true}
	if err := req.SetParams(params); err != nil {
		return nil, err
	}
	return json.Marshal(req)
}

// Error codes the broker uses beyond the ones jsonrpc2 defines.
const (
	CodeParseError      = jsonrpc2.CodeParseError
	CodeInvalidRequest  = jsonrpc2.CodeInvalidRequest
	CodeMethodNotFound  = jsonrpc2.CodeMethodNotFound
	CodeInvalidParams   = jsonrpc2.CodeInvalidParams
	CodeInternalError   = jsonrpc2.CodeInternalError
	CodeRequestCanceled = -32800 // what ACP answers a request cancelled with $/cancel_request
	// CodeServerError is the JSON-RPC range's generic server error, used when
	// the peer that should answer is gone.
	CodeServerError = -32000
)

// Quote returns s as a raw JSON string, for building ids.
func Quote(s string) json.RawMessage {
	b, _ := json.Marshal(s) // a Go string always encodes
	return b
}
