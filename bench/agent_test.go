//go:build linux

package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
)

// The fake agent speaks the real protocol over its stdio, one message per
// Write as real agents flush them. It answers initialize, session/new,
// session/set_mode, and session/prompt; what a prompt does is chosen by the
// editor in the prompt's _meta.bench, so one agent serves every benchmark:
//
//	{"stream":{"size":S,"count":N}}  N agent_message_chunk updates whose text
//	                                 is S bytes of JSON string, then the answer
//	{"permission":true}              a tool_call update, a
//	                                 session/request_permission request, a
//	                                 tool_call_update (completed when the
//	                                 answer allowed it once, failed otherwise),
//	                                 then the answer
//	{"sink":{"size":S,"exact":E}}    the answer at once: the prompt's text is
//	                                 S bytes of payload, which the agent
//	                                 compares (its length and ends, every
//	                                 byte when E) instead of decoding it
//
// Sink prompts are recognised by their head, byte for byte the one the
// editor writes (see readSink), so that a large prompt costs the agent a
// comparison, not a JSON decode, and the figures show the relay's cost.
// Messages are built once and written as they are, so the agent costs the
// same, and little, in every configuration.

type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

type benchMeta struct {
	Stream *struct {
		Size  int `json:"size"`
		Count int `json:"count"`
	} `json:"stream"`
	Permission bool `json:"permission"`
}

type fakeAgent struct {
	r      *lineReader
	w      io.Writer
	out    []byte
	nextID int
	// update is the last update line built, reused while the size repeats;
	// sinkWant likewise is what the agent expects after a sink prompt's _meta.
	update   []byte
	sinkWant []byte
}

func runAgent(in io.Reader, out io.Writer) int {
	a := &fakeAgent{r: newLineReader(in), w: out}
	if err := a.serve(); err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintf(os.Stderr, "fake agent: %v\n", err)
		return 1
	}
	return 0
}

func (a *fakeAgent) serve() error {
	for {
		line, err := a.r.line()
		if err != nil {
			return err
		}
		if id, size, exact, rest, ok := readSink(line); ok {
			if err := a.sink(id, size, exact, rest); err != nil {
				return err
			}
			continue
		}
		var m envelope
		if err := json.Unmarshal(line, &m); err != nil {
			return fmt.Errorf("reading %.200q: %w", line, err)
		}
		if m.Method == "" || m.ID == nil {
			continue // notifications and stray responses need no answer
		}
		id := append(json.RawMessage(nil), m.ID...)
		switch m.Method {
		case "initialize":
			err = a.respond(id, `{"protocolVersion":1,"agentCapabilities":{"loadSession":false,"promptCapabilities":{"image":true,"audio":false,"embeddedContext":true}},"authMethods":[],"agentInfo":{"name":"bench-agent","version":"0.0.0"}}`)
		case "session/new":
			err = a.respond(id, `{"sessionId":"s1"}`)
		case "session/set_mode":
			err = a.respond(id, `{}`)
		case "session/prompt":
			err = a.prompt(id, m.Params)
		default:
			err = a.write(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`+"\n", id))
		}
		if err != nil {
			return err
		}
	}
}

func (a *fakeAgent) prompt(id, params json.RawMessage) error {
	var p struct {
		Meta struct {
			Bench benchMeta `json:"bench"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return fmt.Errorf("prompt params: %w", err)
	}
	switch b := p.Meta.Bench; {
	case b.Stream != nil:
		if len(a.update) != updateLen(b.Stream.Size) {
			a.update = updateLine(b.Stream.Size)
		}
		line := a.update
		for range b.Stream.Count {
			if err := a.write(line); err != nil {
				return err
			}
		}
	case b.Permission:
		if err := a.permission(); err != nil {
			return err
		}
	}
	return a.respond(id, `{"stopReason":"end_turn"}`)
}

// sink answers a sink prompt at once, after checking what followed its
// _meta: its length and both ends, or every byte when exact. A prompt that
// differs from what the editor sent is answered with an error.
func (a *fakeAgent) sink(id []byte, size int, exact bool, rest []byte) error {
	if len(a.sinkWant) != sinkRestLen(size) {
		a.sinkWant = sinkRest(size)
	}
	want := a.sinkWant
	ends := min(64, len(want))
	var wrong string
	switch {
	case len(rest) != len(want):
		wrong = fmt.Sprintf("bench: the prompt has %d bytes after _meta, the editor sent %d", len(rest), len(want))
	case exact && !bytes.Equal(rest, want),
		!bytes.Equal(rest[:ends], want[:ends]),
		!bytes.Equal(rest[len(rest)-ends:], want[len(want)-ends:]):
		wrong = "bench: the prompt's bytes differ from what the editor sent"
	}
	if wrong != "" {
		return a.write(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":%q}}`+"\n", id, wrong))
	}
	return a.respond(id, `{"stopReason":"end_turn"}`)
}

// readSink reads a sink prompt by its head, byte for byte the one
// sinkPrompt writes, so that a large prompt costs the agent a comparison
// rather than a JSON decode; ok is false for any other line, which the agent
// decodes whole.
func readSink(line []byte) (id []byte, size int, exact bool, rest []byte, ok bool) {
	rest, ok = bytes.CutPrefix(line, []byte(sinkHead))
	if !ok {
		return nil, 0, false, nil, false
	}
	id, rest = leadingDigits(rest)
	if rest, ok = bytes.CutPrefix(rest, []byte(sinkMethod)); !ok || len(id) == 0 {
		return nil, 0, false, nil, false
	}
	digits, rest := leadingDigits(rest)
	size, err := strconv.Atoi(string(digits))
	if err != nil {
		return nil, 0, false, nil, false
	}
	for i, exact := range []bool{false, true} {
		if rest, ok := bytes.CutPrefix(rest, sinkExacts[i]); ok {
			return id, size, exact, rest, true
		}
	}
	return nil, 0, false, nil, false
}

var sinkExacts = [2][]byte{fmt.Appendf(nil, sinkExact, false), fmt.Appendf(nil, sinkExact, true)}

func leadingDigits(b []byte) (digits, rest []byte) {
	n := 0
	for n < len(b) && '0' <= b[n] && b[n] <= '9' {
		n++
	}
	return b[:n], b[n:]
}

func (a *fakeAgent) permission() error {
	n := a.nextID
	a.nextID++
	call := "call_" + strconv.Itoa(n)
	if err := a.write(fmt.Appendf(nil, toolCallUpdate+"\n", call)); err != nil {
		return err
	}
	if err := a.write(fmt.Appendf(nil, permissionRequest+"\n", n, call)); err != nil {
		return err
	}
	line, err := a.r.line()
	if err != nil {
		return err
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Result *struct {
			Outcome struct {
				Outcome  string `json:"outcome"`
				OptionID string `json:"optionId"`
			} `json:"outcome"`
		} `json:"result"`
	}
	if err := json.Unmarshal(line, &m); err != nil || string(m.ID) != strconv.Itoa(n) {
		return fmt.Errorf("expected the answer to permission request %d, got %q", n, line)
	}
	// As a real agent does: run the tool only when the answer allowed it.
	status := "failed"
	if m.Result != nil && m.Result.Outcome.Outcome == "selected" && m.Result.Outcome.OptionID == "allow-once" {
		status = "completed"
	}
	return a.write(fmt.Appendf(nil, toolCallDone+"\n", call, status))
}

const (
	toolCallUpdate    = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":%q,"title":"git push","kind":"execute","status":"pending","rawInput":{"command":"git push"}}}}`
	permissionRequest = `{"jsonrpc":"2.0","id":%d,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":%q,"title":"git push","kind":"execute","rawInput":{"command":"git push"}},"options":[{"optionId":"allow-once","name":"Allow","kind":"allow_once"},{"optionId":"allow-always","name":"Always allow","kind":"allow_always"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}}`
	toolCallDone      = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":%q,"status":%q}}}`
)

// firstSinkID numbers the sink prompts: seven digits up to 9,999,999, so
// the editor can renumber one prompt in place instead of copying it.
const firstSinkID = 1_000_000

const (
	sinkHead   = `{"jsonrpc":"2.0","id":`
	sinkMethod = `,"method":"session/prompt","params":{"_meta":{"bench":{"sink":{"size":`
	sinkExact  = `,"exact":%t}}}`
	sinkText   = `,"sessionId":"s1","prompt":[{"type":"text","text":"`
	sinkTail   = `"}]}}`
)

// sinkPrompt is a session/prompt request, newline included, whose text is
// size bytes of payload and which the agent answers at once; its id is at
// idAt, for renumber.
func sinkPrompt(size int, exact bool) (line []byte, idAt int) {
	line = append(line, sinkHead...)
	idAt = len(line)
	line = strconv.AppendInt(line, firstSinkID, 10)
	line = append(line, sinkMethod...)
	line = strconv.AppendInt(line, int64(size), 10)
	line = fmt.Appendf(line, sinkExact, exact)
	line = append(line, sinkRest(size)...)
	return append(line, '\n'), idAt
}

// renumber gives a sink prompt the id, which must have seven digits.
func renumber(line []byte, idAt, id int) {
	strconv.AppendInt(line[idAt:idAt], int64(id), 10) // writes in place: the id keeps its length
}

// sinkRest is what follows a sink prompt's _meta, without the newline.
func sinkRest(size int) []byte {
	b := make([]byte, 0, sinkRestLen(size))
	b = append(b, sinkText...)
	b = append(b, payload(size)...)
	return append(b, sinkTail...)
}

func sinkRestLen(size int) int { return len(sinkText) + size + len(sinkTail) }

func (a *fakeAgent) respond(id json.RawMessage, result string) error {
	a.out = append(a.out[:0], `{"jsonrpc":"2.0","id":`...)
	a.out = append(a.out, id...)
	a.out = append(a.out, `,"result":`...)
	a.out = append(a.out, result...)
	a.out = append(a.out, "}\n"...)
	return a.write(a.out)
}

func (a *fakeAgent) write(b []byte) error {
	_, err := a.w.Write(b)
	return err
}

const (
	updateHead = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`
	updateTail = `"}}}}` + "\n"
)

// updateLine is one agent_message_chunk notification, newline included, whose
// text is size bytes of JSON string.
func updateLine(size int) []byte {
	b := make([]byte, 0, updateLen(size))
	b = append(b, updateHead...)
	b = append(b, payload(size)...)
	return append(b, updateTail...)
}

// updateLen is the length of updateLine(size).
func updateLen(size int) int { return len(updateHead) + size + len(updateTail) }

// payload is size bytes of a JSON string's contents that reads like an
// agent's prose and code, escapes included, so the scanner meets quotes and
// backslashes as it would in real traffic.
func payload(size int) []byte {
	const text = `Here is the change: \"func main() { fmt.Println(\\\"hi\\\") }\" keeps the tests green.\n`
	b := make([]byte, 0, size+len(text))
	for len(b) < size {
		b = append(b, text...)
	}
	b = b[:size]
	// Do not end inside an escape: an odd run of trailing backslashes would
	// escape the closing quote.
	n := 0
	for i := len(b) - 1; i >= 0 && b[i] == '\\'; i-- {
		n++
	}
	if n%2 == 1 {
		b[len(b)-1] = ' '
	}
	return b
}

// lineReader reads newline-delimited frames of any size.
type lineReader struct {
	br     *bufio.Reader
	gather []byte
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// line returns the next line without its newline, valid until the next call.
func (r *lineReader) line() ([]byte, error) {
	r.gather = r.gather[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		switch {
		case err == nil && len(r.gather) == 0:
			return chunk[:len(chunk)-1], nil
		case err == nil:
			r.gather = append(r.gather, chunk...)
			return r.gather[:len(r.gather)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			r.gather = append(r.gather, chunk...)
		default:
			if len(r.gather)+len(chunk) > 0 {
				return nil, fmt.Errorf("unterminated line: %w", io.ErrUnexpectedEOF)
			}
			return nil, err
		}
	}
}

// skip consumes the next line without keeping it. It returns the line's
// length without the newline and up to the first 128 bytes of it.
func (r *lineReader) skip() (int, []byte, error) {
	n := 0
	r.gather = r.gather[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		if len(r.gather) < 128 {
			r.gather = append(r.gather, chunk[:min(len(chunk), 128-len(r.gather))]...)
		}
		n += len(chunk)
		switch {
		case err == nil:
			return n - 1, r.gather, nil
		case errors.Is(err, bufio.ErrBufferFull):
		default:
			if n > 0 {
				return 0, nil, fmt.Errorf("unterminated line: %w", io.ErrUnexpectedEOF)
			}
			return 0, nil, err
		}
	}
}

// runRelay is the raw relay: it starts the agent the way the broker does
// (plain pipes, its own process group) and copies bytes both ways with
// io.Copy, understanding nothing. It is the floor for any proxy.
func runRelay() int {
	inR, inW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	cmd := &exec.Cmd{
		Path:        exe,
		Args:        []string{exe},
		Env:         childEnv(roleAgent, ""),
		Stdin:       inR,
		Stdout:      outW,
		Stderr:      errW,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	inR.Close()
	outW.Close()
	errW.Close()
	go func() {
		_, _ = io.Copy(inW, os.Stdin)
		inW.Close()
	}()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { _, _ = io.Copy(os.Stdout, outR); wg.Done() }()
	go func() { _, _ = io.Copy(os.Stderr, errR); wg.Done() }()
	wg.Wait()
	if err := cmd.Wait(); err != nil {
		return fail(err)
	}
	return 0
}

func fail(err error) int {
	fmt.Fprintf(os.Stderr, "raw relay: %v\n", err)
	return 1
}
