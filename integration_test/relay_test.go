//go:build linux

package integration

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestOrderingUnderLoad: the agent answers a request and immediately
// streams thousands of updates, interleaved with responses and with its own
// requests, while the editor answers those requests and keeps talking. Each
// side must receive exactly the other's order.
func TestOrderingUnderLoad(t *testing.T) {
	t.Parallel()
	runBoth(t, scenarioLoad)
}

func scenarioLoad(t *testing.T, s *session) {
	const (
		requests      = 200 // editor → agent requests, answered in the burst
		updatesPerReq = 25  // session/update notifications after each answer
		agentReqEvery = 4   // an agent → editor request after every 4th answer
	)
	var editorLines []string
	for i := 1; i <= requests; i++ {
		editorLines = append(editorLines,
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"request %d"}]}}`, i, i),
			fmt.Sprintf(`{"jsonrpc":"2.0","method":"_vendor/tick","params":{"n":%d}}`, i))
	}
	s.EditorSend(editorLines...)
	for _, l := range editorLines {
		s.AgentExpect(l)
	}

	var burst []string
	for i := 1; i <= requests; i++ {
		burst = append(burst, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"stopReason":"end_turn"}}`, i))
		for j := 0; j < updatesPerReq; j++ {
			burst = append(burst, fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"chunk %d.%d"}}}}`, i, j))
		}
		if i%agentReqEvery == 0 {
			burst = append(burst, fmt.Sprintf(`{"jsonrpc":"2.0","id":"agent-%d","method":"fs/read_text_file","params":{"sessionId":"sess_1","path":"/f%d"}}`, i, i))
		}
	}
	s.AgentSend(burst...)

	// The editor reads the burst and answers each agent request as soon as it
	// sees it, with a notification after it, while the burst is still flowing.
	var answers []string
	for n, want := range burst {
		got := s.EditorRecv()
		if got != want {
			t.Fatalf("editor line %d of the burst:\n got: %s\nwant: %s", n+1, clip(got), clip(want))
		}
		if strings.Contains(want, `"method":"fs/read_text_file"`) {
			id := want[strings.Index(want, `"id":`)+5 : strings.Index(want, `,"method"`)]
			a := []string{
				fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":"contents of %s"}}`, id, strings.Trim(id, `"`)),
				fmt.Sprintf(`{"jsonrpc":"2.0","method":"_vendor/ack","params":{"line":%d}}`, n),
			}
			s.EditorSend(a...)
			answers = append(answers, a...)
		}
	}
	for _, l := range answers {
		s.AgentExpect(l)
	}
}

// byteExactLines are valid JSON-RPC messages that any decode and re-encode
// would change.
var byteExactLines = []struct{ name, line string }{
	{"escapes", `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"caf\u00e9 \ud83d\ude00 \"quoted\" back\\slash \/ \b\f\n\r\t \u0000 \u2028\u2029 <>&\u003c"}]}}`},
	{"whitespace_and_raw_unicode", "  {  \"jsonrpc\" : \"2.0\" ,\t\"method\"\t:\t\"session/update\" , \"params\" : { \"sessionId\" : \"s\" , \"update\" : { \"sessionUpdate\" : \"agent_message_chunk\" , \"content\" : { \"type\" : \"text\" , \"text\" : \"日本語 ✓ 😀 e\u0301 مرحبا \u2028 line sep\" } } }  }\t "},
	{"numbers", `{"jsonrpc":"2.0","method":"_x/numbers","params":{"big":123456789012345678901234567890,"neg":-0,"exp":1.0e2,"E":1E+2,"tiny":5e-324,"huge":1e400,"prec":0.1000000000000000055511151231257827,"int":9007199254740993}}`},
	{"deep_nesting", `{"jsonrpc":"2.0","method":"_x/deep","params":[` + strings.Repeat(`{"a":[`, 100) + strings.Repeat(`]}`, 100) + `]}`},
	{"duplicate_keys", `{"jsonrpc":"2.0","method":"_x/duplicates","params":{"a":1,"a":2,"a":{"a":3}}}`},
	{"escaped_keys", `{"jsonrpc":"2.0","method":"_x/escaped-keys","params":{"\u006bey":"\u0041","ключ":"значение"}}`},
	{"escaped_envelope_keys", `{"jsonrpc":"2.0","\u0069d":7,"\u006dethod":"_x/escaped-envelope","params":{}}`},
	{"positional_params", `{"jsonrpc":"2.0","method":"_x/positional","params":[1,"two",null,true,false,{},[]]}`},
	{"trailing_cr", `{"jsonrpc":"2.0","method":"_x/crlf","params":{}}` + "\r"},
	{"raw_utf8", "{\"jsonrpc\":\"2.0\",\"method\":\"_x/raw-utf8\",\"params\":{\"s\":\"\xf0\x9f\x91\x8d \xe2\x82\xac \xc3\xbc\"}}"},
}

// TestByteExactForwarding sends messages a re-encoder would change, both
// ways, and compares bytes.
func TestByteExactForwarding(t *testing.T) {
	t.Parallel()
	for _, c := range byteExactLines {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runBoth(t, func(t *testing.T, s *session) {
				s.EditorToAgent(c.line)
				s.AgentToEditor(c.line)
				// Leave no request unanswered.
				if m := decode(t, c.line); m.Method != "" && m.ID != nil {
					answer := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":null}`
					s.AgentToEditor(answer)
					s.EditorToAgent(answer)
				}
			})
		})
	}
}

// TestLargeMessages: a 20 MiB message each way, under the default limit,
// passes intact and the conversation goes on. (Only through the broker: the
// bytes are compared with what was sent, so a direct run adds nothing.)
//
// It does not run in parallel, and waits longer than other tests: moving
// 20 MiB through a race-enabled broker is CPU-bound, and slow on a small
// machine.
func TestLargeMessages(t *testing.T) {
	blob := bigText(20 << 20)
	prompt := `{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"image","mimeType":"image/png","data":"` + blob + `"}]}}`
	update := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"c","content":[{"type":"content","content":{"type":"resource","resource":{"uri":"file:///big.b64","blob":"` + blob + `"}}}]}}}`
	s := startFake(t, options{broker: true, wait: 3 * time.Minute})
	s.EditorToAgent(prompt)
	s.AgentToEditor(update, `{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}`)
	s.EditorToAgent(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`)
	s.Finish()
}

// bigText returns n bytes of base64 alphabet in which every 64-byte block
// is numbered, so a lost, repeated or reordered block changes the bytes.
func bigText(n int) string {
	const filler = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	var b strings.Builder
	b.Grow(n + 64)
	for i := 0; b.Len() < n; i++ {
		num := strconv.Itoa(i)
		b.WriteString(num)
		b.WriteString(filler[len(num):])
	}
	return b.String()[:n]
}

// garbageLines are lines that are not JSON-RPC 2.0 messages.
var garbageLines = []string{
	"Starting fake-agent v1.2.3 ...",
	"DEBUG: got initialize",
	`[1,2]`,
	`[{"jsonrpc":"2.0","id":1,"method":"initialize"}]`,
	`{"jsonrpc":"2.0","id":1`,
	`{"id":5,"result":{}}`,
	`{"jsonrpc":"1.0","id":5,"result":{}}`,
	`"just a string"`,
	`42`,
	`null`,
}

// TestGarbageFromAgent: a banner before initialize and debug prints between
// messages never reach the editor; each is reported on stderr with the
// agent's name and "not JSON-RPC".
func TestGarbageFromAgent(t *testing.T) {
	t.Parallel()
	s := startFake(t, options{broker: true})
	s.AgentSend(garbageLines[:2]...) // banner, before anything was asked
	s.EditorToAgent(msgInitialize)
	s.AgentSend(append(append([]string{msgInitialized}, garbageLines[2:]...), msgSessionCreated)...)
	s.EditorExpect(msgInitialized)
	s.EditorExpect(msgSessionCreated)
	s.AgentSend("", "   ", "\t") // blank lines are skipped
	s.AgentToEditor(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"still here"}}}}`)
	s.Finish()

	if got := s.transcript().Editor; len(got) != 3 {
		t.Errorf("editor received %d lines, want 3:\n%s", len(got), strings.Join(got, "\n"))
	}
	warnings := matchingLines(s.stderrText(), "not JSON-RPC", "fakeagent")
	if len(warnings) < len(garbageLines) {
		t.Errorf("stderr has %d warnings naming fakeagent and \"not JSON-RPC\", want one per garbage line (%d):\n%s",
			len(warnings), len(garbageLines), s.stderrText())
	}
	// The banner text itself shows on stderr, so the user can see what the
	// agent printed (lines with quotes may be escaped there).
	for _, g := range garbageLines[:2] {
		if len(matchingLines(s.stderrText(), "not JSON-RPC", g)) == 0 {
			t.Errorf("no warning on stderr shows the agent's line %q:\n%s", g, s.stderrText())
		}
	}
}

// TestGarbageFromEditor: lines from the editor that are not JSON-RPC never
// reach the agent, and are reported on stderr naming the editor.
func TestGarbageFromEditor(t *testing.T) {
	t.Parallel()
	s := startFake(t, options{broker: true, brokerArgs: []string{"--config", noProxyConfig}})
	s.EditorSend(garbageLines...)
	s.EditorSend("", "  ", "\t")
	s.EditorToAgent(msgInitialize)
	s.AgentToEditor(msgInitialized)
	s.EditorSend(garbageLines[2:4]...)
	s.EditorToAgent(msgSessionNew)
	s.Finish()

	if got := s.transcript().Agent; len(got) != 2 {
		t.Errorf("agent received %d lines, want 2:\n%s", len(got), strings.Join(got, "\n"))
	}
	warnings := matchingLines(s.stderrText(), "not JSON-RPC", "editor")
	if len(warnings) < len(garbageLines)+2 {
		t.Errorf("stderr has %d warnings naming the editor and \"not JSON-RPC\", want one per garbage line (%d):\n%s",
			len(warnings), len(garbageLines)+2, s.stderrText())
	}
}

// matchingLines returns the lines of text that contain every one of subs.
func matchingLines(text string, subs ...string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if !slices.ContainsFunc(subs, func(sub string) bool { return !strings.Contains(l, sub) }) {
			out = append(out, l)
		}
	}
	return out
}

// TestMaxMessageSize: with --max-message-size, an oversized message is
// not forwarded; a request gets a -32600 "exceeds" error back to its sender,
// an oversized response turns into an error for the side waiting on it, and
// the connection keeps working after each. A message of exactly the limit
// passes. It runs with messages one byte over the limit and twice the limit,
// and with a limit smaller than a typical read buffer.
func TestMaxMessageSize(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		flag  string
		limit int
		size  int
	}{
		{"twice_the_limit", "1MiB", 1 << 20, 2 << 20},
		{"one_byte_over", "1MiB", 1 << 20, 1<<20 + 1},
		{"small_limit", "1KiB", 1 << 10, 10 << 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testMaxMessageSize(t, c.flag, c.limit, c.size)
		})
	}
}

// sized returns prefix + padding + suffix, exactly n bytes long.
func sized(prefix, suffix string, n int) string {
	return prefix + strings.Repeat("x", n-len(prefix)-len(suffix)) + suffix
}

func testMaxMessageSize(t *testing.T, flag string, limit, size int) {
	s := startFake(t, options{broker: true, brokerArgs: []string{"--max-message-size", flag}})
	s.EditorToAgent(msgInitialize)
	s.AgentToEditor(msgInitialized)

	// After each oversized message its sender also sends a small probe: the
	// probe must be the next thing the other side reads, so a forwarded
	// oversized message fails at once instead of at a timeout.
	editorProbe := `{"jsonrpc":"2.0","method":"_vendor/probe","params":{"from":"editor"}}`
	agentProbe := `{"jsonrpc":"2.0","method":"_vendor/probe","params":{"from":"agent"}}`

	t.Log("an oversized request from the editor")
	s.EditorSend(sized(`{"jsonrpc":"2.0","id":"big-1","method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"`, `"}]}}`, size), editorProbe)
	s.AgentExpect(editorProbe)
	msg := expectError(t, s.EditorRecv(), `"big-1"`, -32600)
	if !strings.Contains(msg, "exceeds") {
		t.Errorf("error message %q does not contain \"exceeds\"", msg)
	}
	t.Log("a request of exactly the limit")
	s.EditorToAgent(sized(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"`, `"}]}}`, limit))
	s.AgentToEditor(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`)

	// The fs/write_text_file requests below name a session the editor opened.
	s.EditorToAgent(`{"jsonrpc":"2.0","id":"new-s","method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":"new-s","result":{"sessionId":"s"}}`)

	t.Log("an oversized request from the agent")
	s.AgentSend(sized(`{"jsonrpc":"2.0","id":77,"method":"fs/write_text_file","params":{"sessionId":"s","path":"/big","content":"`, `"}}`, size), agentProbe)
	s.EditorExpect(agentProbe)
	msg = expectError(t, s.AgentRecv(), `77`, -32600)
	if !strings.Contains(msg, "exceeds") {
		t.Errorf("error message %q does not contain \"exceeds\"", msg)
	}
	// An intercepted request of exactly the limit that the broker forwards.
	s.AgentToEditor(sized(`{"jsonrpc":"2.0","id":78,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"t","title":"`, `"},"options":[]}}`, limit))
	s.EditorToAgent(`{"jsonrpc":"2.0","id":78,"result":{"outcome":{"outcome":"cancelled"}}}`)

	t.Log("an oversized response from the agent")
	s.EditorToAgent(`{"jsonrpc":"2.0","id":3,"method":"fs/whatever","params":{}}`)
	s.AgentSend(sized(`{"jsonrpc":"2.0","id":3,"result":{"content":"`, `"}}`, size), agentProbe)
	m := decode(t, s.EditorRecv())
	if string(m.ID) != "3" || m.Error == nil {
		t.Fatalf("editor waiting on id 3 got %s, want an error response with id 3", clip(fmt.Sprintf("%+v", m)))
	} else if !strings.Contains(m.Error.Message, "exceeds") {
		t.Errorf("error message %q does not contain \"exceeds\"", m.Error.Message)
	}
	s.EditorExpect(agentProbe)

	t.Log("an oversized response from the editor")
	s.AgentToEditor(`{"jsonrpc":"2.0","id":"read-1","method":"fs/read_text_file","params":{"sessionId":"s","path":"/f"}}`)
	s.EditorSend(sized(`{"jsonrpc":"2.0","id":"read-1","result":{"content":"`, `"}}`, size), editorProbe)
	m = decode(t, s.AgentRecv())
	if string(m.ID) != `"read-1"` || m.Error == nil {
		t.Fatalf("agent waiting on id \"read-1\" got %s, want an error response with that id", clip(fmt.Sprintf("%+v", m)))
	}
	s.AgentExpect(editorProbe)

	t.Log("oversized notifications both ways are dropped")
	s.AgentSend(sized(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`, `"}}}}`, size), agentProbe)
	s.EditorExpect(agentProbe)
	s.EditorSend(sized(`{"jsonrpc":"2.0","method":"_vendor/big","params":{"p":"`, `"}}`, size), editorProbe)
	s.AgentExpect(editorProbe)

	t.Log("and the connection still works")
	s.EditorToAgent(`{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn"}}`)
	s.Finish()

	for _, side := range [][]string{s.transcript().Editor, s.transcript().Agent} {
		for _, l := range side {
			if len(l) > limit {
				t.Errorf("a %d-byte line over the limit was forwarded: %s", len(l), clip(l))
			}
		}
	}
	// Each oversized message is reported on stderr, naming its sender.
	for _, side := range []string{"editor", "fakeagent"} {
		var n int
		for _, l := range matchingLines(s.stderrText(), side) {
			if strings.Contains(l, "too large") || strings.Contains(l, "exceeds") {
				n++
			}
		}
		if n < 3 {
			t.Errorf("stderr reports %d oversized messages from %s, want 3:\n%s", n, side, clip(s.stderrText()))
		}
	}
}
