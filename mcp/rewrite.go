package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/acp-broker/acp-broker/jsonrpc"
	"github.com/acp-broker/acp-broker/rules"
)

// ProxyCommand is the broker's subcommand that the agent starts in place of
// a stdio MCP server.
const ProxyCommand = "mcp-proxy"

// Rewrite implements session.Setup: every stdio server in the request's
// mcpServers gets the broker's proxy as its command, with the original
// command and arguments after "--". Name, env and every other member stay
// as sent, and so does every byte outside the two values replaced.
func (h *Hub) Rewrite(m *jsonrpc.Message) ([]byte, string, func(string), error) {
	// session/load and session/resume name the session; their answers do not.
	requested, _ := jsonrpc.String(m.Params, "sessionId")
	// Whatever the set-up proxies replaces what the session's earlier one
	// did: a server of the same name it no longer proxies (an http one now,
	// or none) must not be relaxed by what the old one said.
	detach := func(session string) {
		if session == "" {
			session = requested
		}
		if session == "" {
			return
		}
		if h.Catalog != nil {
			h.Catalog.Detach(session)
		}
		h.mu.Lock()
		h.retire(session)
		h.mu.Unlock()
	}
	listSpan, ok := jsonrpc.FieldSpan(m.Params, "mcpServers")
	if !ok {
		return nil, "", detach, nil
	}
	if _, err := jsonrpc.Members(m.Params); err != nil {
		// Two server lists, say: the agent may start the one not read here.
		return nil, "", nil, fmt.Errorf("the params cannot be read exactly (%v), so their MCP servers cannot be proxied", err)
	}
	// Spans are relative to the params; the edits are made on the frame.
	base := paramsOffset(m)
	list := m.Params[listSpan.Start:listSpan.End]
	elements, err := jsonrpc.Elements(list)
	if err != nil {
		return nil, "", detach, nil // not a list: the agent will refuse it, as it would have
	}
	cwd, _ := jsonrpc.String(m.Params, "cwd")
	policy, err := h.Policy(cwd)
	if err != nil {
		return nil, "", nil, fmt.Errorf("the rules cannot be loaded, so MCP servers cannot be set up under the broker: %v", err)
	}
	edits := map[jsonrpc.Span][]byte{}
	var proxied, unchanged, names []string
	links := map[string]*link{}
	for _, el := range elements {
		entry := list[el.Start:el.End]
		e, err := readEntry(entry)
		if err != nil {
			// What the agent would read of it is not certain: refused.
			return nil, "", nil, fmt.Errorf("an mcpServers entry cannot be read exactly (%v), so it cannot be proxied", err)
		}
		names = append(names, e.name)
		switch {
		case e.typ == "http" || e.typ == "sse":
			unchanged = append(unchanged, fmt.Sprintf("%s (%s, not governed)", e.name, e.typ))
			continue
		case e.command == nil:
			unchanged = append(unchanged, e.name+" (no command)")
			continue
		case !policy.MCPProxy(e.name):
			unchanged = append(unchanged, e.name+" (proxy = false)")
			continue
		}
		if err := h.Listen(); err != nil {
			return nil, "", nil, fmt.Errorf("the MCP proxies' socket cannot be opened (%v), so MCP servers cannot be set up under the broker", err)
		}
		token := newToken()
		args := append([]string{ProxyCommand, "--socket", h.path, "--token", token, "--server", e.name, "--", e.command.value}, e.args...)
		cmd, _ := json.Marshal(h.Exe)
		argv, _ := json.Marshal(args)
		at := base + listSpan.Start + el.Start
		edits[jsonrpc.Span{Start: at + e.command.span.Start, End: at + e.command.span.End}] = cmd
		if e.argsSpan != nil {
			edits[jsonrpc.Span{Start: at + e.argsSpan.Start, End: at + e.argsSpan.End}] = argv
		} else {
			// The entry ends with '}': the args go just before it.
			end := at + len(entry) - 1
			edits[jsonrpc.Span{Start: end, End: end}] = append(append([]byte(`,"args":`), argv...), ' ')
		}
		proxied = append(proxied, e.name)
		links[token] = &link{server: e.name, cwd: cwd}
	}
	for _, pair := range rules.MCPNameCollisions(names) {
		// Refusing the set-up would cost the user the session; instead no
		// call to either server is ever decided without a human.
		h.Log.Warn("two MCP servers of a session have names an agent may confuse: calls to them are always asked; rename one", "server", pair[0], "other", pair[1])
		unchanged = append(unchanged, fmt.Sprintf("%s and %s (names collide: always asked)", pair[0], pair[1]))
	}
	h.Governor.Rewrote(m.Method, cwd, proxied, unchanged)
	if len(edits) == 0 {
		return nil, "", detach, nil
	}
	h.mu.Lock()
	for token, l := range links {
		h.links[token] = l
	}
	h.mu.Unlock()
	note := "MCP servers run through acp-broker mcp-proxy: " + strings.Join(proxied, ", ")
	established := func(session string) {
		if session == "" {
			session = requested
		}
		detach(session)
		h.mu.Lock()
		defer h.mu.Unlock()
		for token := range links {
			if session == "" {
				delete(h.links, token) // the set-up failed: nothing will use it
			} else if l, ok := h.links[token]; ok {
				l.session = session
				if h.Catalog != nil {
					h.Catalog.Attach(session, l.server)
				}
			}
		}
	}
	return jsonrpc.Splice(m.Raw, edits), note, established, nil
}

// retire forgets the tokens of a session's earlier set-ups: a set-up being
// established replaces them. Called with h.mu held.
func (h *Hub) retire(session string) {
	for token, l := range h.links {
		if l.session == session {
			l.retired = true
			delete(h.links, token)
		}
	}
}

// entry is what the rewrite reads of an mcpServers entry.
type entry struct {
	typ, name string
	command   *stringAt // nil when the entry has none
	args      []string
	argsSpan  *jsonrpc.Span // nil when the entry has no args member
}

type stringAt struct {
	value string
	span  jsonrpc.Span
}

// entryMembers are the members the rewrite reads, as ACP spells them.
var entryMembers = []string{"type", "name", "command", "args", "env"}

// readEntry reads an entry exactly. A member the rewrite reads that is
// repeated, spelt in another case, or of another type than ACP says is an
// error: decoders differ on such entries (Go's matches names in any case and
// may start as stdio a server whose type it cannot read), so the agent might
// start a server the broker took for something else.
func readEntry(raw []byte) (entry, error) {
	var e entry
	members, err := jsonrpc.Members(raw)
	if err != nil {
		return e, err
	}
	if err := jsonrpc.Strict(raw); err != nil {
		return e, err
	}
	for name := range members {
		for _, known := range entryMembers {
			if name != known && strings.EqualFold(name, known) {
				return e, fmt.Errorf("member %q is spelt %q in ACP", name, known)
			}
		}
	}
	str := func(name string) (string, error) {
		var v string
		if err := json.Unmarshal(members[name], &v); err != nil {
			return "", fmt.Errorf("%s is not a string", name)
		}
		return v, nil
	}
	if _, ok := members["type"]; ok {
		if e.typ, err = str("type"); err != nil {
			return e, err
		}
	}
	if _, ok := members["name"]; ok {
		if e.name, err = str("name"); err != nil {
			return e, err
		}
	}
	if _, ok := members["command"]; ok {
		c, err := str("command")
		if err != nil {
			return e, err
		}
		sp, _ := jsonrpc.FieldSpan(raw, "command") // found by Members a moment ago
		e.command = &stringAt{c, sp}
	}
	if v, ok := members["args"]; ok {
		if string(v) != "null" && json.Unmarshal(v, &e.args) != nil {
			return e, errors.New("args is not a list of strings")
		}
		sp, _ := jsonrpc.FieldSpan(raw, "args")
		e.argsSpan = &sp
	}
	return e, nil
}

// paramsOffset is where the params lie in the frame.
func paramsOffset(m *jsonrpc.Message) int {
	sp, ok := jsonrpc.FieldSpan(m.Raw, "params")
	if !ok {
		panic(errors.New("mcp: a message with params has no params member"))
	}
	return sp.Start
}

// Proxied returns the names of a session's MCP servers (its mcpServers
// entries as the editor sent them) that the broker runs through its proxy
// under this policy, as Rewrite decides it: the servers whose tools a proxy
// of the session reports on.
func Proxied(entries []json.RawMessage, policy *rules.Policy) map[string]bool {
	out := map[string]bool{}
	for _, raw := range entries {
		e, err := readEntry(raw)
		if err != nil || e.typ == "http" || e.typ == "sse" || e.command == nil || !policy.MCPProxy(e.name) {
			continue
		}
		out[e.name] = true
	}
	return out
}
