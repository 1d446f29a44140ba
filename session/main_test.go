package session

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acp-broker/acp-broker/jsonrpc"
)

// The tests run the broker in this process against a real agent subprocess:
// this test binary re-executed as a "reflector" agent. The reflector reports
// every line it receives to the editor as a _test/received notification, and
// writes to its stdout whatever line the editor asks it to with _test/send,
// so one test, playing the editor, scripts both peers.
func TestMain(m *testing.M) {
	if os.Getenv("ACP_BROKER_TEST_AGENT") == "reflector" {
		reflector()
		return
	}
	os.Exit(m.Run())
}

type control struct {
	Method string `json:"method"`
	Params struct {
		Line string `json:"line"`
		Code int    `json:"code"`
	} `json:"params"`
}

func reflector() {
	out := bufio.NewWriter(os.Stdout)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	for in.Scan() {
		line := in.Text()
		var c control
		_ = json.Unmarshal([]byte(line), &c)
		switch c.Method {
		case "_test/send":
			fmt.Fprintln(out, c.Params.Line)
		case "_test/exit":
			out.Flush()
			os.Exit(c.Params.Code)
		default:
			report, _ := json.Marshal(map[string]any{
				"jsonrpc": "2.0", "method": "_test/received", "params": map[string]string{"line": line},
			})
			fmt.Fprintf(out, "%s\n", report)
		}
		out.Flush()
	}
}

// harness plays the editor for one in-process broker.
type harness struct {
	t      *testing.T
	in     *io.PipeWriter // the editor's messages to the broker
	lines  chan string    // every line the broker wrote to the editor
	stderr *strings.Builder
	done   chan int
}

func startBroker(t *testing.T, policy Policy) *harness {
	t.Helper()
	return startBrokerWith(t, policy, nil)
}

// startBrokerWith is startBroker with an Options.Initialize hook.
func startBrokerWith(t *testing.T, policy Policy, initialize func(m *jsonrpc.Message) ([]byte, string)) *harness {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("ACP_BROKER_TEST_AGENT", "reflector")
	// Under -race the runtime sleeps a second before exiting; the agent's
	// exit is part of every test.
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	h := &harness{t: t, in: inW, lines: make(chan string, 1024), stderr: &strings.Builder{}, done: make(chan int, 1)}
	stderr := NewLockedWriter(&syncBuilder{b: h.stderr})
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	go func() {
		code, err := Run(context.Background(), Options{
			AgentPath:     exe,
			AgentArgs:     []string{"reflector-agent"},
			EditorIn:      inR,
			EditorOut:     outW,
			Stderr:        stderr,
			Logger:        slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
			ShutdownGrace: 2 * time.Second,
			KillGrace:     time.Second,
			Policy:        policy,
			Initialize:    initialize,
		})
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		outW.Close()
		h.done <- code
	}()
	t.Cleanup(func() {
		inW.Close()
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
			t.Error("broker did not stop after the editor closed its input")
		}
		if t.Failed() {
			t.Logf("broker stderr:\n%s", h.stderr.String())
		}
	})
	return h
}

// syncBuilder lets the test read stderr while the broker writes it.
type syncBuilder struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// send writes one line from the editor.
func (h *harness) send(line string) {
	h.t.Helper()
	if _, err := io.WriteString(h.in, line+"\n"); err != nil {
		h.t.Fatalf("editor write: %v", err)
	}
}

// agentSends makes the agent write line to the editor's side of the broker.
func (h *harness) agentSends(line string) {
	h.t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "_test/send", "params": map[string]string{"line": line}})
	h.send(string(b))
}

// next returns the next line the editor receives.
func (h *harness) next() string {
	h.t.Helper()
	select {
	case l, ok := <-h.lines:
		if !ok {
			h.t.Fatal("editor output closed")
		}
		return l
	case <-time.After(10 * time.Second):
		h.t.Fatal("timed out waiting for a message to the editor")
	}
	return ""
}

// expect fails unless the next line to the editor is want.
func (h *harness) expect(want string) {
	h.t.Helper()
	if got := h.next(); got != want {
		h.t.Fatalf("editor received\n  %s\nwant\n  %s", got, want)
	}
}

// expectEither fails unless the editor's next two lines are a and b, in
// either order: one the broker writes to the editor, the other the agent's
// report of what the broker wrote to it, two pipes with no order between them.
func (h *harness) expectEither(a, b string) {
	h.t.Helper()
	first, second := h.next(), h.next()
	if !(first == a && second == b) && !(first == b && second == a) {
		h.t.Fatalf("editor received\n  %s\n  %s\nwant, in either order\n  %s\n  %s", first, second, a, b)
	}
}

// expectAgentReceived fails unless the agent's next received line is want.
func (h *harness) expectAgentReceived(want string) {
	h.t.Helper()
	h.expect(received(want))
}

// received is the reflector's report of a line it read.
func received(line string) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "_test/received", "params": map[string]string{"line": line}})
	return string(b)
}

// sync proves every earlier message has been processed in both directions:
// the agent echoes a marker back only after reading everything before it.
func (h *harness) sync(tag string) {
	h.t.Helper()
	marker := fmt.Sprintf(`{"jsonrpc":"2.0","method":"_test/sync","params":{"tag":%q}}`, tag)
	h.send(marker)
	h.expectAgentReceived(marker)
}
