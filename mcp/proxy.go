package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/acp-broker/acp-broker/jsonrpc"
)

// ProxyOptions configure RunProxy.
type ProxyOptions struct {
	Socket, Token, Server string
	// Command is the server's original command and arguments.
	Command []string
	// Stdin and Stdout are the agent's side of the MCP connection. The
	// server's stderr goes straight to Stderr's file.
	Stdin  io.Reader
	Stdout io.Writer
	Stderr *os.File
	Log    *slog.Logger
	// MaxMessageSize bounds one message from the agent; default 64 MiB.
	MaxMessageSize int
	// CloseGrace is how long the server may take to exit after its input
	// ends, before SIGTERM and then SIGKILL.
	CloseGrace time.Duration
}

// RunProxy introduces itself to the broker, starts the server with exactly
// the original command, arguments and environment, and relays until the
// server exits. It returns the server's exit status. If the broker cannot
// be reached or refuses the token, the server is never started: an MCP
// server nobody governs is not started in the broker's name.
func RunProxy(ctx context.Context, o ProxyOptions) (int, error) {
	if o.MaxMessageSize <= 0 {
		o.MaxMessageSize = 64 << 20
	}
	if o.CloseGrace <= 0 {
		o.CloseGrace = 5 * time.Second
	}
	if len(o.Command) == 0 {
		return 0, errors.New("no server command given")
	}
	link, err := dialHub(ctx, o.Socket, o.Token)
	if err != nil {
		return 0, fmt.Errorf("cannot reach the broker that proxies %q (%v); not starting it unguarded", o.Server, err)
	}
	defer link.Close()

	path, err := exec.LookPath(o.Command[0])
	if err != nil {
		return 0, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return 0, err
	}
	cmd := &exec.Cmd{Path: path, Args: o.Command, Stdin: inR, Stdout: outW, Stderr: o.Stderr, SysProcAttr: childAttr()}
	if err := cmd.Start(); err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return 0, err
	}
	inR.Close()
	outW.Close()
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(signals)

	p := &proxy{
		o:         o,
		link:      link,
		server:    jsonrpc.NewWriter(inW),
		agent:     jsonrpc.NewWriter(o.Stdout),
		toolLists: map[string]bool{},
		held:      map[string]context.CancelFunc{},
	}
	relayed := make(chan struct{})
	go func() {
		p.fromServer(jsonrpc.NewReader(outR, o.MaxMessageSize))
		close(relayed)
	}()
	agentDone := make(chan struct{})
	go func() {
		p.fromAgent(jsonrpc.NewReader(o.Stdin, o.MaxMessageSize))
		close(agentDone)
	}()
	for running := true; running; {
		select {
		case sig := <-signals:
			_ = cmd.Process.Signal(sig)
		case <-agentDone:
			// The agent is done with the server: it gets what a direct
			// server would, the end of its input, then a grace period.
			inW.Close()
			if !waitFor(done, o.CloseGrace) {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				if !waitFor(done, o.CloseGrace) {
					_ = cmd.Process.Kill()
				}
			}
			agentDone = nil
		case <-done:
			running = false
		}
	}
	<-done
	waitFor(relayed, time.Second)
	inW.Close()
	outR.Close()
	code := cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	return code, nil
}

func waitFor(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// hubLink is the proxy's end of the private channel.
type hubLink struct {
	conn *jsonrpc2.Conn
}

func dialHub(ctx context.Context, socket, token string) (*hubLink, error) {
	c, err := net.DialTimeout("unix", socket, 10*time.Second)
	if err != nil {
		return nil, err
	}
	conn := jsonrpc2.NewConn(ctx, jsonrpc2.NewPlainObjectStream(c), jsonrpc2.HandlerWithError(func(context.Context, *jsonrpc2.Conn, *jsonrpc2.Request) (any, error) {
		return nil, errors.New("the proxy takes no requests")
	}))
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var res helloResult
	if err := conn.Call(hctx, methodHello, helloParams{Token: token}, &res); err != nil {
		conn.Close()
		return nil, fmt.Errorf("the broker refused this proxy: %w", err)
	}
	return &hubLink{conn: conn}, nil
}

func (l *hubLink) Close() error { return l.conn.Close() }

// proxy relays one MCP connection.
type proxy struct {
	o      ProxyOptions
	link   *hubLink
	server *jsonrpc.Writer
	agent  *jsonrpc.Writer

	mu sync.Mutex
	// toolLists holds the ids of tools/list requests whose results are
	// reported to the broker.
	toolLists map[string]bool
	// held holds the calls waiting for a human, by id.
	held map[string]context.CancelFunc
}

// fromAgent relays the agent's messages to the server. A tools/call waits
// for the broker's decision; a message the proxy cannot read is not
// relayed, since it could be a call the proxy failed to see.
func (p *proxy) fromAgent(r *jsonrpc.Reader) {
	for {
		frame, err := r.Next()
		if err != nil {
			var tl *jsonrpc.TooLargeError
			if errors.As(err, &tl) {
				p.o.Log.Warn("message from the agent too large; not relayed", "server", p.o.Server, "size", tl.Size)
				if h := jsonrpc.ParseHead(tl.Head); h.ID != nil && h.HasMethod {
					p.agent.WriteFrame(jsonrpc.NewError(h.ID, jsonrpc.CodeInvalidRequest, "acp-broker mcp-proxy: message too large"))
				}
				continue
			}
			return
		}
		m, err := jsonrpc.Parse(frame)
		if err != nil {
			p.o.Log.Warn("message from the agent is not JSON-RPC; not relayed", "server", p.o.Server, "err", err)
			var inv *jsonrpc.InvalidError
			if errors.As(err, &inv) && inv.ID != nil && inv.HasMethod {
				p.agent.WriteFrame(jsonrpc.NewError(inv.ID, jsonrpc.CodeInvalidRequest, "acp-broker mcp-proxy: "+inv.Reason))
			}
			continue
		}
		switch {
		case m.Kind == jsonrpc.Request && m.Method == "tools/call":
			p.call(m)
			continue
		case looksLikeCall(m.Method):
			// A tools/call without an id, or spelt otherwise: the broker
			// cannot decide it as a call, and a server that runs what it
			// reads as one would run it undecided.
			p.o.Log.Warn("a tools/call the proxy cannot hold; not relayed", "server", p.o.Server, "method", m.Method, "kind", m.Kind.String())
			if m.Kind == jsonrpc.Request {
				p.refuse(m.ID, "acp-broker refuses a tools/call spelt "+strconv.Quote(m.Method))
			}
			continue
		case m.Kind == jsonrpc.Request && m.Method == "tools/list":
			p.mu.Lock()
			p.toolLists[m.IDKey()] = true
			p.mu.Unlock()
		case m.Kind == jsonrpc.Notification && m.Method == "notifications/cancelled":
			if id, ok := jsonrpc.Field(m.Params, "requestId"); ok && p.cancelHeld(id) {
				continue // the server never saw the call
			}
		}
		if p.server.WriteFrame(frame) != nil {
			return
		}
	}
}

// looksLikeCall reports a method that a server may take for tools/call
// though it is not exactly that: in another case, or with spaces or NULs
// around it.
func looksLikeCall(method string) bool {
	return strings.EqualFold(strings.Trim(method, " \t\r\n\x00"), "tools/call")
}

// call holds a tools/call until the broker has decided it. What the rules
// decide at once keeps its place in the stream; a call that waits for a
// human lets the messages after it pass.
func (p *proxy) call(m *jsonrpc.Message) {
	frame := append([]byte(nil), m.Raw...)
	id := append(json.RawMessage(nil), m.ID...)
	params := callParams{ID: id}
	if err := jsonrpc.Strict(m.Params); err != nil {
		p.refuse(id, "acp-broker cannot read this call exactly ("+err.Error()+"), so it is refused")
		return
	}
	if err := json.Unmarshal(m.Params, &params); err != nil || params.Name == "" {
		p.refuse(id, "acp-broker cannot read this call (no tool name), so it is refused")
		return
	}
	params.ID = id
	var v Verdict
	if err := p.link.conn.Call(context.Background(), methodCall, params, &v); err != nil {
		p.refuse(id, "acp-broker could not decide this call ("+err.Error()+"), so it is refused")
		return
	}
	switch v.Decision {
	case Allow:
		p.server.WriteFrame(frame)
		return
	case Ask:
	default:
		p.refuse(id, v.Message)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	key := m.IDKey()
	p.mu.Lock()
	p.held[key] = cancel
	p.mu.Unlock()
	go func() {
		defer cancel()
		var v Verdict
		err := p.link.conn.Call(ctx, methodAsk, params, &v)
		p.mu.Lock()
		_, still := p.held[key]
		delete(p.held, key)
		p.mu.Unlock()
		switch {
		case !still || ctx.Err() != nil:
			// The agent cancelled it: no answer is due.
		case err != nil:
			p.refuse(id, "acp-broker could not get an answer for this call ("+err.Error()+"), so it is refused")
		case v.Decision == Allow:
			p.server.WriteFrame(frame)
		default:
			p.refuse(id, v.Message)
		}
	}()
}

// cancelHeld drops a call the agent cancelled while a human was asked.
func (p *proxy) cancelHeld(id json.RawMessage) bool {
	key := jsonrpc.IDKey(id)
	p.mu.Lock()
	cancel, ok := p.held[key]
	delete(p.held, key)
	p.mu.Unlock()
	if ok {
		cancel()
		_ = p.link.conn.Notify(context.Background(), methodCancel, cancelParams{ID: id})
	}
	return ok
}

// refuse answers a call with an MCP tool error, which the model reads: the
// call never reached the server.
func (p *proxy) refuse(id json.RawMessage, message string) {
	if message == "" {
		message = "acp-broker refused this call"
	}
	res, err := jsonrpc.NewResult(id, toolError{Content: []textContent{{Type: "text", Text: message}}, IsError: true})
	if err == nil {
		p.agent.WriteFrame(res)
	}
}

type toolError struct {
	Content []textContent `json:"content"`
	IsError bool          `json:"isError"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// fromServer relays the server's messages to the agent unchanged. A
// tools/list result is reported to the broker before the agent sees it, so
// that the broker knows a tool before the agent can call it. Lines that are
// not JSON-RPC are relayed too: they cannot carry a call, and a listing the
// proxy cannot read leaves its tools unknown, which relaxes nothing.
func (p *proxy) fromServer(r *jsonrpc.Reader) {
	defer p.agent.Flush()
	for {
		if !r.HasFrame() {
			p.agent.Flush()
		}
		frame, err := r.Next()
		if err != nil {
			var tl *jsonrpc.TooLargeError
			if errors.As(err, &tl) {
				p.o.Log.Warn("message from the server too large; not relayed", "server", p.o.Server, "size", tl.Size)
				continue
			}
			return
		}
		if m, err := jsonrpc.Parse(frame); err == nil && m.Kind == jsonrpc.Response {
			p.mu.Lock()
			list := p.toolLists[m.IDKey()]
			delete(p.toolLists, m.IDKey())
			p.mu.Unlock()
			if list && m.Result != nil {
				p.report(m.Result)
			}
		} else if err == nil && m.Kind == jsonrpc.Notification && m.Method == "notifications/tools/list_changed" {
			// What the tools are now is unknown until they are listed again.
			if err := p.link.conn.Call(context.Background(), methodChanged, struct{}{}, nil); err != nil {
				p.o.Log.Warn("cannot tell the broker that the tools changed", "server", p.o.Server, "err", err)
			}
		}
		if p.agent.Queue(frame) != nil {
			return
		}
	}
}

// report sends a tools/list result's tools to the broker.
func (p *proxy) report(result json.RawMessage) {
	var res struct {
		Tools []Tool `json:"tools"`
	}
	if err := jsonrpc.Strict(result); err != nil {
		p.o.Log.Warn("a tools/list result repeats a member; its tools stay unknown to the broker", "server", p.o.Server, "err", err)
		return
	}
	if err := json.Unmarshal(result, &res); err != nil {
		p.o.Log.Warn("cannot read a tools/list result; its tools stay unknown to the broker", "server", p.o.Server, "err", err)
		return
	}
	if err := p.link.conn.Call(context.Background(), methodTools, toolsParams{Tools: res.Tools}, nil); err != nil {
		p.o.Log.Warn("cannot report tools to the broker", "server", p.o.Server, "err", err)
	}
}
