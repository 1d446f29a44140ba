//go:build linux

package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// agentSide runs RunProxy in-process with pipes standing for the agent's
// end of the MCP connection.
type agentSide struct {
	t     *testing.T
	in    *io.PipeWriter
	lines chan string
	done  chan proxyResult
}

type proxyResult struct {
	code int
	err  error
}

func runProxyAsAgent(t *testing.T, socket, token string, command ...string) *agentSide {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	a := &agentSide{t: t, in: inW, lines: make(chan string, 64), done: make(chan proxyResult, 1)}
	go func() {
		code, err := RunProxy(context.Background(), ProxyOptions{
			Socket: socket, Token: token, Server: "fs", Command: command,
			Stdin: inR, Stdout: outW, Stderr: os.Stderr,
			Log: slog.New(slog.DiscardHandler),
			// The servers exit at end of input; on a busy machine
			// that can take more than a second.
			CloseGrace: waitTimeout,
		})
		outW.Close()
		a.done <- proxyResult{code, err}
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			a.lines <- sc.Text()
		}
		close(a.lines)
	}()
	t.Cleanup(func() {
		inW.Close()
		outR.Close()
	})
	return a
}

func (a *agentSide) send(frame string) {
	a.t.Helper()
	if _, err := io.WriteString(a.in, frame+"\n"); err != nil {
		a.t.Fatalf("writing to the proxy: %v", err)
	}
}

// next is the next line the proxy wrote to the agent.
func (a *agentSide) next() string {
	a.t.Helper()
	select {
	case line, ok := <-a.lines:
		if !ok {
			a.t.Fatal("the proxy closed the agent's side")
		}
		return line
	case <-time.After(waitTimeout):
		a.t.Fatal("nothing from the proxy")
	}
	return ""
}

// finish ends the agent's input and returns how RunProxy ended.
func (a *agentSide) finish() proxyResult {
	a.t.Helper()
	a.in.Close()
	select {
	case r := <-a.done:
		return r
	case <-time.After(waitTimeout):
		a.t.Fatal("RunProxy did not return after the agent's input ended")
	}
	return proxyResult{}
}

func sameJSON(got json.RawMessage, want string) bool {
	var g, w any
	return json.Unmarshal(got, &g) == nil && json.Unmarshal([]byte(want), &w) == nil && reflect.DeepEqual(g, w)
}

// toolResult reads a tools/call result as the agent would.
type toolResult struct {
	ID     json.RawMessage `json:"id"`
	Result *struct {
		Content []textContent `json:"content"`
		IsError bool          `json:"isError"`
	} `json:"result"`
	Error *struct {
		Code int `json:"code"`
	} `json:"error"`
}

func readResult(t *testing.T, line string) toolResult {
	t.Helper()
	var r toolResult
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("the proxy wrote %q: %v", line, err)
	}
	return r
}

// The server is cat: whatever the proxy relays comes back to the agent, in
// order, so what does not come back was never relayed.
func TestProxyRelaysOnlyWhatTheBrokerAllows(t *testing.T) {
	g := &fakeGovernor{decide: func(c Call) Verdict {
		if c.Tool == "rm" {
			return Verdict{Decision: Deny, Message: "rm is not allowed in this project"}
		}
		return Verdict{Decision: Allow}
	}}
	h := listeningHub(t, g)
	a := runProxyAsAgent(t, h.Path(), register(t, h, "fs", "sess-1", "cat"), "cat")

	const (
		denied     = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rm","arguments":{"path":"/"}}}`
		allowed    = `{ "jsonrpc" : "2.0", "id":"b\u0032", "method":"tools/call","params":{"arguments":{"path":"caf\u00e9"},"name":"read"}}`
		notJSON    = `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"rm"`
		dupMember  = `{"jsonrpc":"2.0","id":3,"method":"tools/call","method":"ping"}`
		dupParams  = `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read","name":"rm"}}`
		noName     = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"arguments":{}}}`
		passedOn   = `{"jsonrpc":"2.0","id":6,"method":"resources/list"}`
		endOfInput = `{"jsonrpc":"2.0","method":"notifications/end"}`
	)
	a.send(denied)
	if r := readResult(t, a.next()); string(r.ID) != "1" || r.Result == nil || !r.Result.IsError ||
		len(r.Result.Content) != 1 || r.Result.Content[0].Text != "rm is not allowed in this project" {
		t.Errorf("a denied call was answered %+v, want a tool error with the broker's message", r)
	}
	a.send(allowed)
	if got := a.next(); got != allowed {
		t.Errorf("an allowed call reached the server as\n%s\nwant\n%s", got, allowed)
	}
	a.send(notJSON)
	a.send(dupMember)
	if r := readResult(t, a.next()); string(r.ID) != "3" || r.Error == nil {
		t.Errorf("a request that is not JSON-RPC was answered %+v, want an error", r)
	}
	a.send(dupParams)
	if r := readResult(t, a.next()); string(r.ID) != "4" || r.Result == nil || !r.Result.IsError {
		t.Errorf("a call naming two tools was answered %+v, want refused", r)
	}
	a.send(noName)
	if r := readResult(t, a.next()); string(r.ID) != "5" || r.Result == nil || !r.Result.IsError {
		t.Errorf("a call naming no tool was answered %+v, want refused", r)
	}
	a.send(passedOn)
	a.send(endOfInput)
	// Everything the server echoed since the allowed call: only what was
	// neither a call nor unreadable.
	for _, want := range []string{passedOn, endOfInput} {
		if got := a.next(); got != want {
			t.Errorf("the server got %s, want %s", got, want)
		}
	}

	decided := g.decisions()
	if len(decided) != 2 || decided[0].Tool != "rm" || decided[1].Tool != "read" {
		t.Fatalf("Decide got %+v, want rm then read: the unreadable calls are refused without asking", decided)
	}
	// The arguments reach the broker re-encoded by jsonrpc2 (escapes
	// decoded), so they are compared by value.
	if c := decided[1]; c.Session != "sess-1" || c.Server != "fs" || !sameJSON(c.Arguments, `{"path":"caf\u00e9"}`) {
		t.Errorf("Decide got %+v (arguments %s), want the session's call with its arguments", c, c.Arguments)
	}
	if r := a.finish(); r.err != nil || r.code != 0 {
		t.Errorf("RunProxy = %d, %v; want cat's exit status 0", r.code, r.err)
	}
}

// The broker learns a server's tools before the agent does, so that it
// knows a tool before the agent can call it.
func TestProxyReportsToolsBeforeTheAgentSeesThem(t *testing.T) {
	g := &fakeGovernor{}
	h := listeningHub(t, g)
	const listing = `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"read","description":"reads","annotations":{"readOnlyHint":true}},{"name":"write","description":"writes"}]}}`
	// Answers the first request with the listing, then echoes.
	server := []string{"/bin/sh", "-c", `read -r request; printf '%s\n' '` + listing + `'; exec cat`}
	a := runProxyAsAgent(t, h.Path(), register(t, h, "fs", "sess-1", server...), server...)

	a.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if got := a.next(); got != listing {
		t.Fatalf("the listing reached the agent as %s", got)
	}
	if hints := h.Catalog.Hints("fs", "read"); !relaxed(hints) {
		t.Errorf("when the agent got the listing, Hints(fs, read) = %+v", hints)
	}
	if hints := h.Catalog.Hints("fs", "write"); !hints.Known || hints.ReadOnly {
		t.Errorf("Hints(fs, write) = %+v", hints)
	}
	if l := g.listings(); len(l) != 1 || l[0].session != "sess-1" || len(l[0].changes) != 2 {
		t.Errorf("Listed = %+v, want the two tools pinned in sess-1", l)
	}

	// A result for an id that was no tools/list is relayed, not reported.
	const other = `{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"sneaky","annotations":{"readOnlyHint":true}}]}}`
	a.send(other) // cat echoes it as if the server had answered request 2
	if got := a.next(); got != other {
		t.Fatalf("got %s", got)
	}
	if hints := h.Catalog.Hints("fs", "sneaky"); hints.Known {
		t.Errorf("a result that answered no tools/list was reported: %+v", hints)
	}
	a.finish()
}

// A proxy the broker does not accept never starts its server: a server
// nobody governs is not started in the broker's name.
func TestProxyWithoutTheBrokerNeverStartsTheServer(t *testing.T) {
	h := listeningHub(t, &fakeGovernor{})
	inUse := register(t, h, "fs", "sess-1", "srv")
	hello(t, h, inUse)
	cases := []struct {
		name          string
		socket, token string
	}{
		{"unknown token", h.Path(), "f00d"},
		{"token in use", h.Path(), inUse},
		{"no broker", filepath.Join(t.TempDir(), "s"), inUse},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			started := filepath.Join(t.TempDir(), "started")
			a := runProxyAsAgent(t, tc.socket, tc.token, "/bin/sh", "-c", "touch "+started+"; cat")
			var r proxyResult
			select {
			case r = <-a.done:
			case <-time.After(waitTimeout):
				t.Fatal("RunProxy did not return")
			}
			if r.err == nil || !strings.Contains(r.err.Error(), "not starting it unguarded") {
				t.Errorf("RunProxy = %d, %v; want the refusal", r.code, r.err)
			}
			// A server started anyway would have had time to show it.
			for range 20 {
				if _, err := os.Stat(started); err == nil {
					t.Fatal("the server was started")
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
