package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/acp-broker/acp-broker/jsonrpc"
)

// ProxyCommand is the broker's subcommand that the agent starts in place of
// a stdio MCP server.
const ProxyCommand = "mcp-proxy"

// Rewrite implements session.Setup: every stdio server in the request's
// mcpServers gets the broker's proxy as its command, with the original
// command and arguments after "--". Name, env and every other member stay
// as sent, and so does every byte outside the two values replaced.
func (h *Hub) Rewrite(m *jsonrpc.Message) ([]byte, string, func(string), error) {
	listSpan, ok := jsonrpc.FieldSpan(m.Params, "mcpServers")
	if !ok {
		return nil, "", nil, nil
	}
	// Spans are relative to the params; the edits are made on the frame.
	base := paramsOffset(m)
	list := m.Params[listSpan.Start:listSpan.End]
	elements, err := jsonrpc.Elements(list)
	if err != nil {
		return nil, "", nil, nil // not a list: the agent will refuse it, as it would have
	}
	cwd, _ := jsonrpc.String(m.Params, "cwd")
	policy, err := h.Policy(cwd)
	if err != nil {
		return nil, "", nil, fmt.Errorf("the rules cannot be loaded, so MCP servers cannot be set up under the broker: %v", err)
	}
	edits := map[jsonrpc.Span][]byte{}
	var proxied, unchanged []string
	var tokens []string
	for _, el := range elements {
		entry := list[el.Start:el.End]
		members, err := jsonrpc.Members(entry)
		if err != nil {
			// What the agent would read of it is not certain: refused.
			return nil, "", nil, fmt.Errorf("an mcpServers entry cannot be read exactly (%v), so it cannot be proxied", err)
		}
		if err := jsonrpc.Strict(entry); err != nil {
			return nil, "", nil, fmt.Errorf("an mcpServers entry cannot be read exactly (%v), so it cannot be proxied", err)
		}
		var e struct {
			Type    *string   `json:"type"`
			Name    string    `json:"name"`
			Command *string   `json:"command"`
			Args    *[]string `json:"args"`
		}
		if json.Unmarshal(entry, &e) != nil || e.Command == nil || (e.Type != nil && *e.Type != "stdio") {
			// http and sse servers, and entries that are no server the
			// agent could start: passed on as they are.
			unchanged = append(unchanged, describe(e.Name, e.Type))
			continue
		}
		if !policy.MCPProxy(e.Name) {
			unchanged = append(unchanged, e.Name+" (proxy = false)")
			continue
		}
		token := newToken()
		args := []string{ProxyCommand, "--socket", h.path, "--token", token, "--server", e.Name, "--", *e.Command}
		if e.Args != nil {
			args = append(args, *e.Args...)
		}
		cmd, _ := json.Marshal(h.Exe)
		argv, _ := json.Marshal(args)
		at := base + listSpan.Start + el.Start
		cmdSpan, _ := jsonrpc.FieldSpan(entry, "command")
		edits[jsonrpc.Span{Start: at + cmdSpan.Start, End: at + cmdSpan.End}] = cmd
		if _, has := members["args"]; has {
			argsSpan, _ := jsonrpc.FieldSpan(entry, "args")
			edits[jsonrpc.Span{Start: at + argsSpan.Start, End: at + argsSpan.End}] = argv
		} else {
			// The entry ends with '}': the args go just before it.
			end := at + len(entry) - 1
			edits[jsonrpc.Span{Start: end, End: end}] = append(append([]byte(`,"args":`), argv...), ' ')
		}
		proxied = append(proxied, e.Name)
		tokens = append(tokens, token)
		h.mu.Lock()
		h.links[token] = &link{server: e.Name, cwd: cwd}
		h.mu.Unlock()
	}
	h.Governor.Rewrote(m.Method, cwd, proxied, unchanged)
	if len(edits) == 0 {
		return nil, "", nil, nil
	}
	note := "MCP servers run through acp-broker mcp-proxy: " + strings.Join(proxied, ", ")
	established := func(session string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, t := range tokens {
			if session == "" {
				delete(h.links, t) // the set-up failed: nothing will use it
			} else if l, ok := h.links[t]; ok {
				l.session = session
			}
		}
	}
	return jsonrpc.Splice(m.Raw, edits), note, established, nil
}

func describe(name string, typ *string) string {
	if typ != nil {
		return fmt.Sprintf("%s (%s, not governed)", name, *typ)
	}
	return name + " (no command)"
}

// paramsOffset is where the params lie in the frame.
func paramsOffset(m *jsonrpc.Message) int {
	sp, ok := jsonrpc.FieldSpan(m.Raw, "params")
	if !ok {
		panic(errors.New("mcp: a message with params has no params member"))
	}
	return sp.Start
}
