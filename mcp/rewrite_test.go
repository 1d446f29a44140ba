package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/acp-broker/acp-broker/jsonrpc"
	"github.com/acp-broker/acp-broker/rules"
)

// testSocket is the socket path of hubs built by hand, so that expected
// frames can be written out.
const testSocket = "/tmp/acp-broker-mcp-test/s"

// handHub is a hub that is not listening: enough for Rewrite.
func handHub(g *fakeGovernor, policy func(string) (*rules.Policy, error)) *Hub {
	return &Hub{Exe: "/opt/acp-broker", Policy: policy, Governor: g, path: testSocket, links: map[string]*link{}}
}

// fakeGovernor records what the hub tells it and decides calls with decide
// (Allow when nil). Ask reports the call on asked, when set, and waits for
// it to be cancelled.
type fakeGovernor struct {
	decide func(Call) Verdict

	mu      sync.Mutex
	decided []Call
	asked   chan Call
	rewrote []rewriteReport
	listed  []listReport
}

type rewriteReport struct {
	method, cwd        string
	proxied, unchanged []string
}

type listReport struct {
	session string
	changes []Change
}

func (g *fakeGovernor) Decide(c Call) Verdict {
	g.mu.Lock()
	g.decided = append(g.decided, c)
	g.mu.Unlock()
	if g.decide == nil {
		return Verdict{Decision: Allow}
	}
	return g.decide(c)
}

func (g *fakeGovernor) Ask(ctx context.Context, c Call) Verdict {
	if g.asked != nil {
		g.asked <- c
	}
	<-ctx.Done()
	return Verdict{Decision: Deny, Message: "cancelled"}
}

func (g *fakeGovernor) Rewrote(method, cwd string, proxied, unchanged []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.rewrote = append(g.rewrote, rewriteReport{method, cwd, proxied, unchanged})
}

func (g *fakeGovernor) Listed(session string, changes []Change) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.listed = append(g.listed, listReport{session, changes})
}

func (g *fakeGovernor) decisions() []Call {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.decided)
}

func (g *fakeGovernor) listings() []listReport {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.listed)
}

func (g *fakeGovernor) rewrites() []rewriteReport {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.rewrote)
}

// defaultPolicy is the rules with no file: every stdio server proxied.
func defaultPolicy(string) (*rules.Policy, error) { return rules.NewPolicy(nil, "/home/u", nil), nil }

func parse(t *testing.T, frame string) *jsonrpc.Message {
	t.Helper()
	m, err := jsonrpc.Parse([]byte(frame))
	if err != nil {
		t.Fatalf("test frame: %v", err)
	}
	return m
}

// rewrite runs Rewrite on frame and fails the test on an error.
func rewrite(t *testing.T, h *Hub, frame string) ([]byte, string, func(string)) {
	t.Helper()
	out, note, established, err := h.Rewrite(parse(t, frame))
	if err != nil {
		t.Fatalf("Rewrite: %v", err)
	}
	return out, note, established
}

// tokens returns the token registered for each server name.
func tokens(h *Hub) map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]string{}
	for token, l := range h.links {
		out[l.server] = token
	}
	return out
}

// proxyArgs is the argv the agent must get for a proxied server.
func proxyArgs(token, server string, command ...string) string {
	argv, _ := json.Marshal(append([]string{ProxyCommand, "--socket", testSocket, "--token", token, "--server", server, "--"}, command...))
	return string(argv)
}

// setupTemplate is a session/new with every kind of mcpServers entry, and
// members, escapes and spacing the rewrite must leave as they are. The
// @name.member@ markers are filled in with what the editor sent, then with
// what the agent must get: everything else is the same bytes on both sides.
const setupTemplate = `{"jsonrpc":"2.0", "id":7,"method":"session/new",
 "params":{ "_meta":{"editor":"z\u00e9d","command":"not-an-entry"}, "cwd":"/work/proj",
  "mcpServers" : [
   {"name":"fs", "command": @fs.command@ , "args":@fs.args@,"env":[{"name":"TOKEN","value":"a\u0026b"}], "_meta":{"k":[1,2.5e3]}, "future":{"x":null}},
   {"type":"http","name":"web","url":"https://mcp.example/x","headers":[{"name":"A","value":"B"}]},
   {"name":"bare","command":@bare.command@@bare.args@},
   {"type":"stdio","name":"typed","command":@typed.command@,"args":@typed.args@,"env":[]},
   {"type":"sse","name":"events","url":"https://mcp.example/sse","headers":[]},
   {"type":"websocket","name":"later","command":@later.command@,"args":@later.args@},
   {"name":"nocmd","env":[]}
  ],
  "futureField":{"deep":[{"name":"x","command":"not-an-entry","args":[]}]}
 }
}`

func fill(template string, values map[string]string) string {
	var pairs []string
	for k, v := range values {
		pairs = append(pairs, "@"+k+"@", v)
	}
	return strings.NewReplacer(pairs...).Replace(template)
}

func TestRewriteChangesOnlyStdioCommandsAndArgs(t *testing.T) {
	g := &fakeGovernor{}
	h := handHub(g, defaultPolicy)
	in := fill(setupTemplate, map[string]string{
		"fs.command":    `"n\u0070x"`,
		"fs.args":       ` [ "-y", "pkg/fs\u0021", "a\"b", "<&>" ] `,
		"bare.command":  `"/usr/bin/srv"`,
		"bare.args":     ``,
		"typed.command": `"typed-srv"`,
		"typed.args":    `[]`,
		"later.command": `"ws-server"`,
		"later.args":    `[]`,
	})
	out, note, _ := rewrite(t, h, in)

	tok := tokens(h)
	if len(tok) != 4 {
		t.Fatalf("links = %v, want one for each of fs, bare, typed, later", tok)
	}
	want := fill(setupTemplate, map[string]string{
		"fs.command": `"/opt/acp-broker"`,
		// The value is replaced, not the spacing around it.
		"fs.args":      " " + proxyArgs(tok["fs"], "fs", "npx", "-y", "pkg/fs!", `a"b`, "<&>") + " ",
		"bare.command": `"/opt/acp-broker"`,
		// An entry without args gets them just before its closing brace.
		"bare.args":     `,"args":` + proxyArgs(tok["bare"], "bare", "/usr/bin/srv") + ` `,
		"typed.command": `"/opt/acp-broker"`,
		"typed.args":    proxyArgs(tok["typed"], "typed", "typed-srv"),
		// A type the broker does not know, with a command: an agent may start
		// it as stdio (decoders fall back to the variant without a type), so
		// it is proxied rather than left ungoverned.
		"later.command": `"/opt/acp-broker"`,
		"later.args":    proxyArgs(tok["later"], "later", "ws-server"),
	})
	if string(out) != want {
		t.Errorf("rewritten frame:\n%s\nwant:\n%s", out, want)
	}
	if !json.Valid(out) {
		t.Error("the rewritten frame is not JSON")
	}
	if !strings.Contains(note, "fs, bare, typed, later") {
		t.Errorf("note = %q, want the proxied servers", note)
	}

	got := g.rewrites()
	if len(got) != 1 {
		t.Fatalf("Rewrote called %d times", len(got))
	}
	r := got[0]
	if r.method != "session/new" || r.cwd != "/work/proj" || !slices.Equal(r.proxied, []string{"fs", "bare", "typed", "later"}) {
		t.Errorf("Rewrote(%q, %q, %v, ...), want session/new in /work/proj proxying fs, bare, typed, later", r.method, r.cwd, r.proxied)
	}
	var unchanged []string
	for _, u := range r.unchanged {
		unchanged = append(unchanged, strings.Fields(u)[0])
	}
	if !slices.Equal(unchanged, []string{"web", "events", "nocmd"}) {
		t.Errorf("Rewrote unchanged = %q", r.unchanged)
	}
}

func TestRewriteGivesEachEntryItsOwnToken(t *testing.T) {
	h := handHub(&fakeGovernor{}, defaultPolicy)
	frame := `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[` +
		`{"name":"a","command":"srv","args":[],"env":[]},{"name":"b","command":"srv","args":[],"env":[]}]}}`
	_, _, first := rewrite(t, h, frame)
	_, _, second := rewrite(t, h, frame)

	h.mu.Lock()
	seen := map[string]bool{}
	for token, l := range h.links {
		if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(token) {
			t.Errorf("token %q is not 32 random bytes in hex", token)
		}
		if l.cwd != "/w" || l.session != "" || l.connected {
			t.Errorf("new link %+v", *l)
		}
		seen[token] = true
	}
	h.mu.Unlock()
	if len(seen) != 4 {
		t.Fatalf("%d tokens for four proxied entries", len(seen))
	}

	first("sess-1")
	second("") // that set-up failed: its tokens go
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.links) != 2 {
		t.Errorf("%d links left, want the first set-up's two", len(h.links))
	}
	for _, l := range h.links {
		if l.session != "sess-1" {
			t.Errorf("link of %s bound to session %q, want sess-1", l.server, l.session)
		}
	}
}

func TestRewriteFollowsTheProxySetting(t *testing.T) {
	const frame = `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[` +
		`{"name":"fs","command":"fs-srv","args":[],"env":[]},{"name":"git","command":"git-srv","args":[],"env":[]}]}}`
	cases := []struct {
		name    string
		config  string
		proxied []string
	}{
		{"default", ``, []string{"fs", "git"}},
		{"one server off", "[mcp.fs]\nproxy = false\n", []string{"git"}},
		{"all off", "[mcp]\nproxy = false\n", nil},
		{"all off but one", "[mcp]\nproxy = false\n\n[mcp.git]\nproxy = true\n", []string{"git"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := rules.Parse("config.toml", rules.User, tc.config)
			if err != nil {
				t.Fatal(err)
			}
			policy := rules.NewPolicy([]*rules.File{f}, "/home/u", nil)
			g := &fakeGovernor{}
			h := handHub(g, func(cwd string) (*rules.Policy, error) {
				if cwd != "/w" {
					t.Errorf("policy asked for %q, want the set-up's cwd", cwd)
				}
				return policy, nil
			})
			out, _, _ := rewrite(t, h, frame)
			for _, server := range []string{"fs", "git"} {
				proxied := slices.Contains(tc.proxied, server)
				original := `"command":"` + server + `-srv","args":[]`
				if kept := out == nil || strings.Contains(string(out), original); kept == proxied {
					t.Errorf("%s: proxied %v, want %v (frame %s)", server, !kept, proxied, out)
				}
			}
			if len(tc.proxied) == 0 && out != nil {
				t.Errorf("nothing to proxy, yet Rewrite returned %s", out)
			}
			if got := tokens(h); len(got) != len(tc.proxied) {
				t.Errorf("links = %v, want %v", got, tc.proxied)
			}
			r := g.rewrites()
			if len(r) != 1 || !slices.Equal(r[0].proxied, tc.proxied) || len(r[0].unchanged) != 2-len(tc.proxied) {
				t.Errorf("Rewrote = %+v, want proxied %v and the rest unchanged", r, tc.proxied)
			}
			for _, u := range r[0].unchanged {
				if !strings.Contains(u, "proxy = false") {
					t.Errorf("unchanged %q does not say why", u)
				}
			}
		})
	}
}

func TestRewriteFailsWhenTheRulesCannotBeLoaded(t *testing.T) {
	g := &fakeGovernor{}
	h := handHub(g, func(string) (*rules.Policy, error) { return nil, errors.New("config.toml:3:1: bad") })
	_, _, _, err := h.Rewrite(parse(t, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[{"name":"fs","command":"srv","args":[],"env":[]}]}}`))
	if err == nil {
		t.Fatal("a set-up was passed on with rules that could not be loaded")
	}
	if len(tokens(h)) != 0 || len(g.rewrites()) != 0 {
		t.Error("a refused set-up registered links or was recorded as rewritten")
	}
}

// Entries that an agent could read otherwise than the broker are refused,
// not passed on: the agent could start a server nobody governs.
func TestRewriteRefusesAmbiguousEntries(t *testing.T) {
	cases := []struct {
		name  string
		entry string
	}{
		{"command twice", `{"name":"fs","command":"safe","command":"evil","args":[],"env":[]}`},
		{"args twice", `{"name":"fs","command":"srv","args":["a"],"args":["b"],"env":[]}`},
		{"name twice", `{"name":"fs","name":"other","command":"srv","args":[],"env":[]}`},
		{"type twice", `{"type":"http","type":"stdio","name":"fs","command":"srv","args":[],"env":[]}`},
		{"command in two cases", `{"name":"fs","command":"safe","Command":"evil","args":[],"env":[]}`},
		{"args in two cases", `{"name":"fs","command":"srv","args":["a"],"ARGS":["b"],"env":[]}`},
		{"escaped duplicate", `{"name":"fs","command":"safe","comm\u0061nd":"evil","args":[],"env":[]}`},
		{"duplicate deep inside", `{"name":"fs","command":"srv","args":[],"env":[{"name":"A","value":"1","value":"2"}]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := &fakeGovernor{}
			h := handHub(g, defaultPolicy)
			frame := `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[` + tc.entry + `]}}`
			out, _, _, err := h.Rewrite(parse(t, frame))
			if err == nil {
				t.Fatalf("Rewrite passed on %s as %s", tc.entry, out)
			}
			if len(tokens(h)) != 0 {
				t.Error("a refused entry registered a link")
			}
		})
	}
}

func TestRewriteLeavesSetUpsWithoutAServerList(t *testing.T) {
	for _, params := range []string{
		`{"cwd":"/w"}`,
		`{"cwd":"/w","mcpServers":null}`,
		`{"cwd":"/w","mcpServers":{"name":"fs","command":"srv"}}`,
		`{"cwd":"/w","mcpServers":"fs"}`,
		`{"cwd":"/w","mcpServers":[]}`,
	} {
		g := &fakeGovernor{}
		h := handHub(g, defaultPolicy)
		out, note, established, err := h.Rewrite(parse(t, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":`+params+`}`))
		if out != nil || note != "" || err != nil {
			t.Errorf("%s: Rewrite = %s, %q, %v; want nothing rewritten", params, out, note, err)
		}
		// The set-up still ends what an earlier one of the session proxied.
		if established == nil {
			t.Errorf("%s: no established func: an earlier set-up's servers would stay the session's", params)
		} else {
			established("s")
		}
	}
}

// The tests below pin entries an agent could read otherwise than the
// broker: each is refused or proxied, never passed on as something else.

// Agents read "type" exactly (acp-go-sdk's McpServer.UnmarshalJSON looks up
// m["type"]; serde's tag does too), while encoding/json matches names in any
// case: an entry with "Type":"http" must not pass as an http server whose
// command the agent then starts as stdio.
func TestRewriteDoesNotTakeAnotherCaseForType(t *testing.T) {
	h := handHub(&fakeGovernor{}, defaultPolicy)
	frame := `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[` +
		`{"Type":"http","name":"fs","command":"evil","args":[],"env":[]}]}}`
	out, _, _, err := h.Rewrite(parse(t, frame))
	if err == nil && (out == nil || strings.Contains(string(out), `"command":"evil"`)) {
		t.Errorf("a stdio entry with a \"Type\" member was passed on unproxied: %s", frame)
	}
}

// acp-go-sdk ignores a type it cannot read and starts the entry as a stdio
// server, so an entry whose "type" is not a string is refused.
func TestRewriteDoesNotPassOnAnEntryItCannotDecode(t *testing.T) {
	for _, typ := range []string{`1`, `true`, `{}`, `["http"]`} {
		h := handHub(&fakeGovernor{}, defaultPolicy)
		frame := `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[` +
			`{"type":` + typ + `,"name":"fs","command":"evil","args":[],"env":[]}]}}`
		out, _, _, err := h.Rewrite(parse(t, frame))
		if err == nil && (out == nil || strings.Contains(string(out), `"command":"evil"`)) {
			t.Errorf("type %s: an entry with a command was passed on unproxied", typ)
		}
	}
}

// "Command" is a command to a Go agent and none to the broker's exact
// reading: refused, and never spliced into a frame that is not JSON.
func TestRewriteRefusesAnotherCaseForCommand(t *testing.T) {
	h := handHub(&fakeGovernor{}, defaultPolicy)
	frame := `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[` +
		`{"name":"fs","Command":"srv","args":[],"env":[]}]}}`
	out, _, _, err := h.Rewrite(parse(t, frame))
	if err == nil {
		t.Errorf("an entry with \"Command\" was passed on as %s", out)
	}
	if out != nil && !json.Valid(out) {
		t.Errorf("rewritten frame is not JSON: %s", out)
	}
}

// encoding/json (acp-go-sdk) and JSON.parse read the last of two
// "mcpServers": a set-up repeating it is refused, or the agent would start
// servers the broker never saw.
func TestRewriteRefusesARepeatedServerList(t *testing.T) {
	h := handHub(&fakeGovernor{}, defaultPolicy)
	frame := `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[],` +
		`"mcpServers":[{"name":"fs","command":"evil","args":[],"env":[]}]}}`
	out, _, _, err := h.Rewrite(parse(t, frame))
	if err == nil {
		t.Errorf("a set-up with two server lists was passed on as %s", out)
	}
}

// TestRewriteNotesCollidingNamesAndAttachesSessions: a set-up whose server
// names collide is rewritten as usual (refusing it would cost the user the
// session), and the collision is reported; once the agent answers, the
// catalog knows which servers the broker proxies in that session, and only
// those get hints there.
func TestRewriteNotesCollidingNamesAndAttachesSessions(t *testing.T) {
	g := &fakeGovernor{}
	h := handHub(g, defaultPolicy)
	var logs strings.Builder
	h.Log = slog.New(slog.NewTextHandler(&logs, nil))
	h.Catalog = CatalogIn(t.TempDir())
	frame := `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[` +
		`{"name":"docs","command":"/bin/docs","args":[],"env":[]},{"type":"http","name":"Docs","url":"https://x.invalid","headers":[]},{"name":"fs","command":"/bin/fs","args":[],"env":[]}]}}`
	out, _, established := rewrite(t, h, frame)
	if out == nil || len(tokens(h)) != 2 {
		t.Fatalf("not rewritten: %s", out)
	}
	r := g.rewrites()
	if len(r) != 1 || !slices.Contains(r[0].unchanged, "docs and Docs (names collide: always asked)") {
		t.Errorf("rewrite report %+v", r)
	}
	if !strings.Contains(logs.String(), "names an agent may confuse") {
		t.Errorf("no warning logged: %s", logs.String())
	}
	observe(t, h.Catalog, "fs", "", tool("read", "reads", `{"readOnlyHint":true}`))
	if h := h.Catalog.HintsFor("sess_1")("fs", "read"); h.Known {
		t.Error("hints before the session was established")
	}
	established("sess_1")
	if h := h.Catalog.HintsFor("sess_1")("fs", "read"); !relaxed(h) {
		t.Errorf("hints in the session that proxies fs: %+v", h)
	}
	for _, s := range []string{"sess_2", ""} {
		if h := h.Catalog.HintsFor(s)("fs", "read"); h.Known {
			t.Errorf("hints in session %q, which does not proxy fs: %+v", s, h)
		}
	}
	// session/load names the session in the request; its answer does not.
	_, _, established = rewrite(t, h, `{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"sess_0","cwd":"/w","mcpServers":[{"name":"fs","command":"/bin/fs","args":[],"env":[]}]}}`)
	established("")
	if h := h.Catalog.HintsFor("sess_0")("fs", "read"); !relaxed(h) {
		t.Errorf("hints in the loaded session: %+v", h)
	}
}
