//go:build linux

package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/acp-broker/acp-broker/jsonrpc"
)

// waitTimeout bounds every wait for the other end of a socket or pipe.
const waitTimeout = 10 * time.Second

// listeningHub is a hub serving on a fresh socket, closed with the test.
func listeningHub(t *testing.T, g *fakeGovernor) *Hub {
	t.Helper()
	h := &Hub{
		Exe:      "/opt/acp-broker",
		Catalog:  CatalogIn(t.TempDir()),
		Log:      slog.New(slog.DiscardHandler),
		Policy:   defaultPolicy,
		Governor: g,
	}
	if err := h.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// register rewrites a session/new with one stdio server, command and args
// as given, binds it to session (when not ""), and returns its token.
func register(t *testing.T, h *Hub, server, session string, command ...string) string {
	t.Helper()
	cmd, _ := json.Marshal(command[0])
	args, _ := json.Marshal(command[1:])
	frame := `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/work/proj","mcpServers":[{"name":` +
		string(jsonrpc.Quote(server)) + `,"command":` + string(cmd) + `,"args":` + string(args) + `,"env":[]}]}}`
	out, _, established := rewrite(t, h, frame)
	if out == nil {
		t.Fatalf("%s was not proxied", server)
	}
	if session != "" {
		established(session)
	}
	var sent struct {
		Params struct {
			MCPServers []struct{ Args []string } `json:"mcpServers"`
		} `json:"params"`
	}
	if err := json.Unmarshal(out, &sent); err != nil {
		t.Fatal(err)
	}
	args0 := sent.Params.MCPServers[0].Args
	i := slices.Index(args0, "--token")
	if i < 0 || i+1 >= len(args0) {
		t.Fatalf("no --token in %v", args0)
	}
	return args0[i+1]
}

// dial connects to the hub as a proxy would, without saying hello.
func dial(t *testing.T, h *Hub) *jsonrpc2.Conn {
	t.Helper()
	c, err := net.DialTimeout("unix", h.Path(), waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	conn := jsonrpc2.NewConn(context.Background(), jsonrpc2.NewPlainObjectStream(c), jsonrpc2.HandlerWithError(func(context.Context, *jsonrpc2.Conn, *jsonrpc2.Request) (any, error) {
		return nil, nil
	}))
	t.Cleanup(func() { conn.Close() })
	return conn
}

func callHub(t *testing.T, conn *jsonrpc2.Conn, method string, params, result any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	return conn.Call(ctx, method, params, result)
}

// hello dials and introduces itself with token, failing the test if the hub
// refuses.
func hello(t *testing.T, h *Hub, token string) *jsonrpc2.Conn {
	t.Helper()
	conn := dial(t, h)
	var res helloResult
	if err := callHub(t, conn, methodHello, helloParams{Token: token}, &res); err != nil {
		t.Fatalf("hello refused: %v", err)
	}
	return conn
}

func waitDisconnected(t *testing.T, conn *jsonrpc2.Conn, why string) {
	t.Helper()
	select {
	case <-conn.DisconnectNotify():
	case <-time.After(waitTimeout):
		t.Errorf("%s: the hub kept the connection open", why)
	}
}

func TestHubRefusesWhatComesBeforeAValidHello(t *testing.T) {
	h := listeningHub(t, &fakeGovernor{})
	token := register(t, h, "fs", "sess-1", "fs-server")
	cases := []struct {
		name   string
		method string
		params any
	}{
		{"unknown token", methodHello, helloParams{Token: "0000"}},
		{"empty token", methodHello, helloParams{}},
		{"no params", methodHello, nil},
		{"call first", methodCall, callParams{ID: json.RawMessage(`1`), Name: "read"}},
		{"tools first", methodTools, toolsParams{Tools: []Tool{{Name: "read", Annotations: json.RawMessage(`{"readOnlyHint":true}`)}}}},
		{"unknown method first", "status", struct{}{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn := dial(t, h)
			var res helloResult
			err := callHub(t, conn, tc.method, tc.params, &res)
			var rpcErr *jsonrpc2.Error
			if !errors.As(err, &rpcErr) {
				t.Fatalf("%s: got %v, %+v; want an error answer", tc.method, err, res)
			}
			waitDisconnected(t, conn, tc.name)
		})
	}
	// None of it bound the token or reported tools.
	hello(t, h, token)
	if live := h.Catalog.Live(); len(live) != 0 {
		t.Errorf("tools reported before hello reached the catalog: %v", live)
	}
}

func TestHubHelloNamesTheServerAndHoldsTheToken(t *testing.T) {
	h := listeningHub(t, &fakeGovernor{})
	token := register(t, h, "fs", "sess-1", "fs-server")

	first := dial(t, h)
	var res helloResult
	if err := callHub(t, first, methodHello, helloParams{Token: token}, &res); err != nil || res.Server != "fs" {
		t.Fatalf("hello = %+v, %v; want server fs", res, err)
	}

	// A process that read the token cannot speak for the running proxy.
	second := dial(t, h)
	if err := callHub(t, second, methodHello, helloParams{Token: token}, &res); err == nil {
		t.Fatal("a second hello with a token in use was accepted")
	}
	waitDisconnected(t, second, "token in use")

	// Nor can the proxy introduce itself again on the same connection.
	if err := callHub(t, first, methodHello, helloParams{Token: token}, &res); err == nil {
		t.Fatal("a second hello on one connection was accepted")
	}
	waitDisconnected(t, first, "second hello")

	// A restarted proxy may take the token again once the first is gone:
	// the hub learns of the disconnection asynchronously.
	deadline := time.Now().Add(waitTimeout)
	for {
		conn := dial(t, h)
		err := callHub(t, conn, methodHello, helloParams{Token: token}, &res)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the token stayed in use after its proxy disconnected: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestHubToolsReportReachesCatalogAndGovernor(t *testing.T) {
	g := &fakeGovernor{}
	h := listeningHub(t, g)
	conn := hello(t, h, register(t, h, "fs", "sess-1", "fs-server"))

	report := toolsParams{Tools: []Tool{
		{Name: "read", Description: "reads", Annotations: json.RawMessage(`{"readOnlyHint":true}`)},
		{Name: "write", Description: "writes"},
	}}
	if err := callHub(t, conn, methodTools, report, nil); err != nil {
		t.Fatal(err)
	}
	stored, err := CatalogIn(filepath.Dir(h.Catalog.Path)).Load()
	if err != nil {
		t.Fatal(err)
	}
	if r := stored["fs"]["read"]; r == nil || !r.ReadOnly() || !slices.Equal(r.Sessions, []string{"sess-1"}) {
		t.Errorf("catalog record of fs/read = %+v", r)
	}
	if h := h.Catalog.Hints("fs", "read"); !relaxed(h) {
		t.Errorf("Hints(fs, read) = %+v", h)
	}
	got := g.listings()
	if len(got) != 1 || got[0].session != "sess-1" || len(got[0].changes) != 2 || !got[0].changes[0].Pinned {
		t.Fatalf("Listed = %+v, want one report of two pinned tools in sess-1", got)
	}

	// The same listing again changes nothing, and the governor hears nothing.
	if err := callHub(t, conn, methodTools, report, nil); err != nil {
		t.Fatal(err)
	}
	if got := g.listings(); len(got) != 1 {
		t.Errorf("an unchanged listing was reported: %+v", got[1:])
	}
}

func TestHubCallGoesToDecideWithTheLinksContext(t *testing.T) {
	g := &fakeGovernor{decide: func(c Call) Verdict {
		if c.Tool == "rm" {
			return Verdict{Decision: Deny, Message: "no rm"}
		}
		return Verdict{Decision: Allow}
	}}
	h := listeningHub(t, g)
	conn := hello(t, h, register(t, h, "fs", "sess-1", "fs-server"))

	var v Verdict
	if err := callHub(t, conn, methodCall, callParams{ID: json.RawMessage(`"a"`), Name: "rm", Arguments: json.RawMessage(`{"path":"/"}`)}, &v); err != nil {
		t.Fatal(err)
	}
	if v != (Verdict{Decision: Deny, Message: "no rm"}) {
		t.Errorf("verdict = %+v, want the governor's", v)
	}
	want := Call{Session: "sess-1", Cwd: "/work/proj", Server: "fs", Tool: "rm", Arguments: json.RawMessage(`{"path":"/"}`)}
	got := g.decisions()
	if len(got) != 1 || got[0].Session != want.Session || got[0].Cwd != want.Cwd || got[0].Server != want.Server ||
		got[0].Tool != want.Tool || string(got[0].Arguments) != string(want.Arguments) {
		t.Errorf("Decide got %+v, want %+v", got, want)
	}
}

func TestHubCallBeforeTheSessionIsKnown(t *testing.T) {
	g := &fakeGovernor{}
	h := listeningHub(t, g)
	conn := hello(t, h, register(t, h, "fs", "", "fs-server"))
	var v Verdict
	if err := callHub(t, conn, methodCall, callParams{ID: json.RawMessage(`1`), Name: "read"}, &v); err != nil {
		t.Fatal(err)
	}
	if got := g.decisions(); len(got) != 1 || got[0].Session != "" || got[0].Server != "fs" {
		t.Errorf("Decide got %+v, want server fs and no session", got)
	}
}

func TestHubCancelEndsAPendingAsk(t *testing.T) {
	g := &fakeGovernor{asked: make(chan Call, 1)}
	h := listeningHub(t, g)
	conn := hello(t, h, register(t, h, "fs", "sess-1", "fs-server"))

	answered := make(chan error, 1)
	go func() {
		var v Verdict
		answered <- conn.Call(context.Background(), methodAsk, callParams{ID: json.RawMessage(`7`), Name: "write"}, &v)
	}()
	select {
	case c := <-g.asked:
		if c.Tool != "write" || c.Session != "sess-1" {
			t.Errorf("Ask got %+v", c)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the ask never reached the governor")
	}
	// Another id cancels nothing.
	if err := conn.Notify(context.Background(), methodCancel, cancelParams{ID: json.RawMessage(`8`)}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-answered:
		t.Fatalf("cancelling another id ended the ask: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := conn.Notify(context.Background(), methodCancel, cancelParams{ID: json.RawMessage(`7`)}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-answered:
		if err != nil {
			t.Errorf("a cancelled ask was answered with %v, want the governor's verdict", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("cancel did not end the pending ask")
	}
}
