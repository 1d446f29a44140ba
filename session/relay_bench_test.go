package session

import (
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/acp-broker/acp-broker/jsonrpc"
)

// These benchmarks run the broker's relay in this process, without an agent
// process or pipes: the peers are channels and in-memory writers, so what
// they measure is the broker's own work per message (cpu-ns/op, allocs/op),
// which is what the end-to-end bench cannot separate from the machine.

// chanReader is a peer's output: each slice sent on the channel is read in
// order; closing the channel ends the stream.
type chanReader struct {
	in  chan []byte
	cur []byte
}

func (r *chanReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		b, ok := <-r.in
		if !ok {
			return 0, io.EOF
		}
		r.cur = b
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// repeatReader yields one line count times.
type repeatReader struct {
	line  []byte
	count int
	cur   []byte
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(r.cur) == 0 {
			if r.count == 0 {
				break
			}
			r.count--
			r.cur = r.line
		}
		k := copy(p[n:], r.cur)
		r.cur = r.cur[k:]
		n += k
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// fakeAgentInput receives what the broker writes to the agent and answers
// each frame with the reply set for it, if any.
type fakeAgentInput struct {
	reply   []byte
	replies chan<- []byte
	frames  int
}

func (a *fakeAgentInput) Write(p []byte) (int, error) {
	a.frames++
	if a.reply != nil {
		a.replies <- a.reply
	}
	return len(p), nil
}

// editorOutput receives what the broker writes to the editor and signals
// each write.
type editorOutput struct {
	wrote chan struct{}
	last  []byte
}

func (e *editorOutput) Write(p []byte) (int, error) {
	e.last = append(e.last[:0], p...)
	select {
	case e.wrote <- struct{}{}:
	default:
	}
	return len(p), nil
}

// benchGuard is a ModeGuard that watches agents named like a known one and
// never switches: it counts how often the relay asks it.
type benchGuard struct{ watches atomic.Int64 }

func (g *benchGuard) Watches(agent string) bool {
	g.watches.Add(1)
	return agent == "claude-agent-acp"
}
func (g *benchGuard) Switch(Info) (string, bool)                            { return "", false }
func (g *benchGuard) Refuse(Info, string) string                            { return "" }
func (g *benchGuard) Switched(Info, string, string, error) (string, string) { return "", "" }

// benchRelay is a broker between a scripted editor and agent, with a
// session s1 opened.
type benchRelay struct {
	b      *broker
	guard  *benchGuard
	editor chan []byte // the editor's input
	agent  chan []byte // the agent's output
	toAg   *fakeAgentInput
	toEd   *editorOutput
}

func newBenchRelay(tb testing.TB, agentName string) *benchRelay {
	tb.Helper()
	r := &benchRelay{guard: &benchGuard{}, editor: make(chan []byte, 1), agent: make(chan []byte, 1)}
	r.toAg = &fakeAgentInput{replies: r.agent}
	r.toEd = &editorOutput{wrote: make(chan struct{}, 1)}
	opts := Options{
		AgentArgs: []string{"bench-agent"},
		EditorOut: r.toEd,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Policy:    forwardPolicy{},
		Modes:     r.guard,
	}
	r.b = newBroker(opts, &agentProcess{})
	r.b.agent = jsonrpc.NewWriter(r.toAg)
	go r.b.readAgent(jsonrpc.NewReader(&chanReader{in: r.agent}, DefaultMaxMessageSize))
	go r.b.readEditor(jsonrpc.NewReader(&chanReader{in: r.editor}, DefaultMaxMessageSize))
	tb.Cleanup(func() { close(r.editor); close(r.agent) })
	r.roundTrip(tb, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`,
		`{"jsonrpc":"2.0","id":"init","result":{"protocolVersion":1,"agentCapabilities":{},"agentInfo":{"name":"`+agentName+`","version":"1"}}}`)
	r.roundTrip(tb, `{"jsonrpc":"2.0","id":"new","method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`,
		`{"jsonrpc":"2.0","id":"new","result":{"sessionId":"s1"}}`)
	if !r.b.tracker.info("s1").Opened {
		tb.Fatal("session s1 is not open")
	}
	return r
}

// roundTrip sends the editor's request and waits for the agent's reply to
// reach the editor.
func (r *benchRelay) roundTrip(tb testing.TB, request, reply string) {
	r.toAg.reply = []byte(reply + "\n")
	r.editor <- []byte(request + "\n")
	<-r.toEd.wrote
	if got := strings.TrimSuffix(string(r.toEd.last), "\n"); got != reply {
		tb.Fatalf("the editor got %s, want %s", got, reply)
	}
}

// cpuTime is the process's user and system time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func reportCPU(b *testing.B, start int64) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

var benchAgents = []string{"bench-agent", "claude-agent-acp"}

// BenchmarkRelayRoundTrip is a 200-byte session/set_mode request and the
// agent's answer to it, as bench/ measures end to end.
func BenchmarkRelayRoundTrip(b *testing.B) {
	for _, agent := range benchAgents {
		b.Run(agent, func(b *testing.B) {
			r := newBenchRelay(b, agent)
			request := []byte(`{"jsonrpc":"2.0","id":1,"method":"session/set_mode","params":{"sessionId":"s1","modeId":"acceptEdits","_meta":{"client":"bench-editor","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}` + "\n")
			r.toAg.reply = []byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n")
			r.guard.watches.Store(0)
			b.ReportAllocs()
			start := cpuTime()
			b.ResetTimer()
			for range b.N {
				r.editor <- request
				<-r.toEd.wrote
			}
			b.StopTimer()
			reportCPU(b, start)
			b.ReportMetric(float64(r.guard.watches.Load())/float64(b.N), "watches/op")
		})
	}
}

// updateFrame is an agent_message_chunk of about size bytes, the text
// written as bench/ writes it.
func updateFrame(size int) []byte {
	text := strings.Repeat(`Here is the change: \"func main() { fmt.Println(\\\"hi\\\") }\" keeps the tests green.\n`, size/80+1)[:size]
	text = strings.TrimRight(text, `\`)
	return []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + text + `"}}}}` + "\n")
}

// BenchmarkRelayUpdate1KiB streams 1 KiB agent_message_chunk updates from
// the agent to the editor.
func BenchmarkRelayUpdate1KiB(b *testing.B) { benchUpdates(b, 1<<10, benchAgents) }

// BenchmarkRelayUpdate1MiB is BenchmarkRelayUpdate1KiB with 1 MiB updates.
func BenchmarkRelayUpdate1MiB(b *testing.B) { benchUpdates(b, 1<<20, benchAgents[:1]) }

func benchUpdates(b *testing.B, size int, agents []string) {
	line := updateFrame(size)
	for _, agent := range agents {
		b.Run(agent, func(b *testing.B) {
			r := newBenchRelay(b, agent)
			r.toEd.wrote = nil // every write would otherwise be signalled
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			start := cpuTime()
			b.ResetTimer()
			r.b.readAgent(jsonrpc.NewReader(&repeatReader{line: line, count: b.N}, DefaultMaxMessageSize))
			b.StopTimer()
			reportCPU(b, start)
		})
	}
}

// BenchmarkRelayRequest1KiB sends 1 KiB session/prompt requests from the
// editor to the agent, the agent answering none of them.
func BenchmarkRelayRequest1KiB(b *testing.B) {
	text := strings.Repeat("Explain this repository, file by file. ", 1<<10/39+2)[:1<<10]
	line := []byte(`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"` + text + `"}]}}` + "\n")
	for _, agent := range benchAgents {
		b.Run(agent, func(b *testing.B) {
			r := newBenchRelay(b, agent)
			r.toAg.reply = nil
			r.toAg.frames = 0
			r.guard.watches.Store(0)
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			start := cpuTime()
			b.ResetTimer()
			r.b.readEditor(jsonrpc.NewReader(&repeatReader{line: line, count: b.N}, DefaultMaxMessageSize))
			b.StopTimer()
			reportCPU(b, start)
			if r.toAg.frames != b.N {
				b.Fatalf("the agent got %d frames, want %d", r.toAg.frames, b.N)
			}
			b.ReportMetric(float64(r.guard.watches.Load())/float64(b.N), "watches/op")
		})
	}
}
