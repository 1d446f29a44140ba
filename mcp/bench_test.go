package mcp

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"testing"

	"github.com/acp-broker/acp-broker/jsonrpc"
	"github.com/acp-broker/acp-broker/rules"
)

// allowAll is a Governor that allows every call at once, so the benchmark
// measures the proxy and its channel, not the rules (whose cost
// rules.BenchmarkDecide measures).
type allowAll struct{}

func (allowAll) Decide(Call) Verdict                        { return Verdict{Decision: Allow} }
func (allowAll) Ask(context.Context, Call) Verdict          { return Verdict{Decision: Allow} }
func (allowAll) Rewrote(string, string, []string, []string) {}
func (allowAll) Listed(string, []Change)                    {}

// BenchmarkProxyRoundTrip times one message and its answer through an echo
// server (cat), directly and through the proxy: a message the proxy only
// relays (ping) and a tools/call it holds for the broker's verdict.
//
//	go test -run '^$' -bench ProxyRoundTrip -benchtime 2s ./mcp/
func BenchmarkProxyRoundTrip(b *testing.B) {
	ping := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n")
	call := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_note","arguments":{"name":"a"}}}` + "\n")
	b.Run("direct", func(b *testing.B) {
		cmd := exec.Command("cat")
		in, out := pipes(b, cmd)
		roundTrips(b, in, out, call)
	})
	for _, c := range []struct {
		name string
		msg  []byte
	}{{"proxied-ping", ping}, {"proxied-call", call}} {
		b.Run(c.name, func(b *testing.B) {
			in, out := startProxy(b)
			roundTrips(b, in, out, c.msg)
		})
	}
}

func pipes(b *testing.B, cmd *exec.Cmd) (io.WriteCloser, *bufio.Reader) {
	b.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { in.Close(); cmd.Wait() })
	return in, bufio.NewReader(out)
}

// startProxy runs a hub and, in this process, a proxy in front of cat.
func startProxy(b *testing.B) (io.WriteCloser, *bufio.Reader) {
	b.Helper()
	h := &Hub{Exe: "acp-broker", Catalog: CatalogIn(b.TempDir()), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Policy: func(string) (*rules.Policy, error) { return rules.NewPolicy(nil, "/home/u", nil), nil }, Governor: allowAll{}}
	if err := h.Listen(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	m, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[{"name":"echo","command":"cat","args":[],"env":[]}]}}`))
	if err != nil {
		b.Fatal(err)
	}
	if _, _, _, err := h.Rewrite(m); err != nil {
		b.Fatal(err)
	}
	var token string
	for t := range h.links {
		token = t
	}
	agentIn, proxyIn := io.Pipe()
	proxyOut, agentOut := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := RunProxy(context.Background(), ProxyOptions{Socket: h.Path(), Token: token, Server: "echo", Command: []string{"cat"},
			Stdin: agentIn, Stdout: agentOut, Stderr: os.Stderr, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		done <- err
	}()
	b.Cleanup(func() {
		proxyIn.Close()
		if err := <-done; err != nil {
			b.Errorf("proxy: %v", err)
		}
	})
	return proxyIn, bufio.NewReader(proxyOut)
}

func roundTrips(b *testing.B, in io.Writer, out *bufio.Reader, msg []byte) {
	b.Helper()
	for b.Loop() {
		if _, err := in.Write(msg); err != nil {
			b.Fatal(err)
		}
		line, err := out.ReadBytes('\n')
		if err != nil {
			b.Fatal(err)
		}
		if len(line) != len(msg) {
			b.Fatalf("echoed %q, want %q", line, msg)
		}
	}
}
