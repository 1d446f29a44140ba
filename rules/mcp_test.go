package rules

import (
	"encoding/json"
	"strings"
	"testing"
)

// hintsFrom returns an MCPHints function that knows the given tools.
func hintsFrom(known map[string]ToolHints) func(server, tool string) ToolHints {
	return func(server, tool string) ToolHints { return known[server+"/"+tool] }
}

func decideWithHints(t *testing.T, p *Policy, js string, hints map[string]ToolHints) Verdict {
	t.Helper()
	toolCall(t, js)
	return p.Decide(ReadToolCallJSON(json.RawMessage(js), Context{Cwd: testCwd, Home: testHome, MCPServers: []string{"notes"}, MCPHints: hintsFrom(hints)}))
}

// TestAnnotationsRelaxOnlyForTrustedServers pins the mission's rule: MCP
// annotations are untrusted hints; only readOnlyHint, from a server the user
// trusts, as first seen, relaxes the default.
func TestAnnotationsRelaxOnlyForTrustedServers(t *testing.T) {
	trusted := "[mcp.notes]\ntrust_annotations = true\n"
	readOnly := map[string]ToolHints{"notes/read_note": {Known: true, ReadOnly: true}}
	changed := map[string]ToolHints{"notes/read_note": {Known: true, ReadOnly: true, Changed: "readOnlyHint true → false"}}
	writes := map[string]ToolHints{"notes/read_note": {Known: true}}
	call := `{"toolCallId":"c","kind":"other","name":"mcp__notes__read_note","rawInput":{"name":"a"}}`
	withPath := `{"toolCallId":"c","kind":"other","name":"mcp__notes__read_note","rawInput":{"path":"/work/repo/notes.md"}}`
	tests := []struct {
		name   string
		layers []string
		call   string
		hints  map[string]ToolHints
		want   Decision
		reason string
	}{
		{"trusted read-only", []string{trusted}, call, readOnly, Allow, "readOnlyHint by its trusted server"},
		{"trusted read-only reads the paths it names", []string{trusted}, withPath, readOnly, Allow, ""},
		{"untrusted read-only", nil, call, readOnly, Ask, "not trusted"},
		{"trusted but changed since pinned", []string{trusted}, call, changed, Ask, "changed since it was pinned"},
		{"trusted, not read-only", []string{trusted}, call, writes, Ask, "no rule allows this MCP tool"},
		{"trusted, never listed", []string{trusted}, call, nil, Ask, ""},
		{"trust in an untrusted project", []string{"#project\n" + trusted}, call, readOnly, Ask, ""},
		{"trust in a trusted project", []string{"#trusted-project\n" + trusted}, call, readOnly, Allow, ""},
		{"read_only = ask still asks", []string{"read_only = \"ask\"\n" + trusted}, call, readOnly, Ask, ""},
		{"a deny rule beats the annotation", []string{trusted + "[[rule]]\ndecision = \"deny\"\nmcp = \"notes/*\"\n"}, call, readOnly, Deny, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := decideWithHints(t, policyFrom(t, tt.layers...), tt.call, tt.hints)
			if v.Decision != tt.want {
				t.Fatalf("decision %s (%s: %s), want %s", v.Decision, v.Source, v.Reason, tt.want)
			}
			if !strings.Contains(v.Reason, tt.reason) {
				t.Errorf("reason %q does not say %q", v.Reason, tt.reason)
			}
		})
	}
}

func TestMCPProxySetting(t *testing.T) {
	tests := []struct {
		name   string
		layers []string
		server string
		want   bool
	}{
		{"default", nil, "notes", true},
		{"off for all", []string{"[mcp]\nproxy = false\n"}, "notes", false},
		{"off for one", []string{"[mcp.raw]\nproxy = false\n"}, "notes", true},
		{"off for that one", []string{"[mcp.raw]\nproxy = false\n"}, "raw", false},
		{"server setting beats the global one", []string{"[mcp]\nproxy = false\n[mcp.notes]\nproxy = true\n"}, "notes", true},
		{"managed layer wins", []string{"#managed\n[mcp]\nproxy = true\n", "[mcp]\nproxy = false\n"}, "notes", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := policyFrom(t, tt.layers...).MCPProxy(tt.server); got != tt.want {
				t.Fatalf("MCPProxy(%q) = %v, want %v", tt.server, got, tt.want)
			}
		})
	}
}

func TestMCPSettingsAreCheckedStrictly(t *testing.T) {
	tests := []struct {
		name, layer, src, where, msg string
	}{
		{"proxy not a boolean", "user", "[mcp]\nproxy = \"no\"\n", "rules.toml:2:1", "proxy must be true or false, not a string"},
		{"trust not a boolean", "user", "[mcp.notes]\ntrust_annotations = 1\n", "rules.toml:2:1", "trust_annotations must be true or false, not a number"},
		{"misspelt trust", "user", "[mcp.notes]\ntrust_annotation = true\n", "rules.toml:2:1", `unknown key "trust_annotation" in [mcp.notes]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			layer := User
			if tt.layer == "project" {
				layer = Project
			}
			_, err := Parse("rules.toml", layer, tt.src)
			if err == nil || !strings.HasPrefix(err.Error(), tt.where) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want %s: ...%s", err, tt.where, tt.msg)
			}
		})
	}
}

// TestProjectProxySettingsAreIgnored: a project file that turns the proxy
// off is read, with the setting skipped and a warning, and the proxy stays
// on.
func TestProjectProxySettingsAreIgnored(t *testing.T) {
	for _, src := range []string{"[mcp]\nproxy = false\n", "[mcp.notes]\nproxy = false\n", "[mcp]\nproxy = \"no\"\n", "[mcp.notes]\nproxy = false\ntrust_annotations = true\n"} {
		f, err := Parse(".acp-broker.toml", Project, src)
		if err != nil || len(f.Ignored) != 1 || !strings.Contains(f.Ignored[0], ".acp-broker.toml:2: ignored [mcp") || !strings.Contains(f.Ignored[0], "cannot turn the MCP proxy on or off") {
			t.Fatalf("%q: err = %v, file = %+v", src, err, f)
		}
		f.Trusted = true
		p := NewPolicy([]*File{f}, testHome, nil)
		if !p.MCPProxy("notes") || !p.MCPProxy("other") {
			t.Errorf("%q turned the proxy off", src)
		}
	}
}

// TestMCPCallArgumentsAreRead: a tools/call's arguments are read like a
// tool's input, so command, path and URL rules apply to them.
func TestMCPCallArgumentsAreRead(t *testing.T) {
	p := policyFrom(t, "[[rule]]\ndecision = \"allow\"\nmcp = \"files/*\"\n[[rule]]\nid = \"no-etc\"\ndecision = \"deny\"\npath = \"/etc/**\"\n")
	ctx := Context{Cwd: testCwd, Home: testHome}
	if v := p.Decide(ReadMCPCall("files", "read", json.RawMessage(`{"name":"a"}`), ctx)); v.Decision != Allow {
		t.Errorf("allowed tool: %s (%s)", v.Decision, v.Reason)
	}
	// A rule for the tool does not cover the paths it is given: those need
	// path rules of their own, as for any other tool.
	if v := p.Decide(ReadMCPCall("files", "read", json.RawMessage(`{"path":"/work/repo/a"}`), ctx)); v.Decision != Ask {
		t.Errorf("allowed tool given a path: %s (%s)", v.Decision, v.Reason)
	}
	if v := p.Decide(ReadMCPCall("files", "write", json.RawMessage(`{"path":"/etc/passwd"}`), ctx)); v.Decision != Deny || v.Rule == nil || v.Rule.ID != "no-etc" {
		t.Errorf("a path rule did not apply to the arguments: %s (%s)", v.Decision, v.Reason)
	}
	for _, args := range []string{`{"path":"/a","path":"/etc/passwd"}`, `[1,2]`, `{"Path":"/a","path":"/b"}`} {
		if v := p.Decide(ReadMCPCall("files", "read", json.RawMessage(args), ctx)); v.Decision == Allow {
			t.Errorf("arguments %s that cannot be read exactly were allowed", args)
		}
	}
}

func TestTrustWithoutProxyIsABlindSpot(t *testing.T) {
	p := policyFrom(t, "[mcp]\nproxy = false\n[mcp.notes]\ntrust_annotations = true\n[mcp.fs]\ntrust_annotations = true\nproxy = true\n")
	got := strings.Join(p.BlindSpots(), "\n")
	if !strings.Contains(got, "[mcp.notes] trust_annotations has no effect") || strings.Contains(got, "[mcp.fs]") {
		t.Errorf("blind spots:\n%s", got)
	}
}

// TestMCPNameCollision: names an agent may confuse, by case or by the
// agents' name mangling, collide; distinct names do not.
func TestMCPNameCollision(t *testing.T) {
	tests := []struct {
		server  string
		servers []string
		collide bool
	}{
		{"docs", []string{"docs"}, false},
		{"docs", []string{"docs", "web"}, false},
		{"docs", []string{"docs", "docs"}, true},
		{"docs", []string{"docs", "Docs"}, true},
		{"Docs", []string{"docs"}, true},
		{"docs", []string{"docs", "DOCS"}, true},
		{"a", []string{"a", "a_b"}, true},   // Gemini: a_b + c and a + b_c are a_b_c
		{"a_b", []string{"a", "a_b"}, true}, // either way round
		{"a", []string{"a", "a__b"}, true},  // Claude: mcp__a__b__c
		{"my.docs", []string{"my.docs", "my_docs"}, true},
		{"my-docs", []string{"my-docs", "my docs"}, true},
		{"docs", []string{"docs", "docsearch"}, false},
		{"ab", []string{"ab", "a_b"}, false},
		{"docs", nil, false},
	}
	for _, tt := range tests {
		if _, got := MCPNameCollision(tt.server, tt.servers); got != tt.collide {
			t.Errorf("MCPNameCollision(%q, %q) = %v, want %v", tt.server, tt.servers, got, tt.collide)
		}
	}
	if got := MCPNameCollisions([]string{"docs", "web", "Docs", "a", "a_b"}); len(got) != 2 || got[0] != [2]string{"docs", "Docs"} || got[1] != [2]string{"a", "a_b"} {
		t.Errorf("MCPNameCollisions = %q", got)
	}
}

// TestCollidingMCPServerIsNeverRelaxed: a call to a server whose name
// collides in the session is asked, whatever relaxes the name (hints, the
// config's read_only_tools, an allow rule, a mode); a deny still applies.
func TestCollidingMCPServerIsNeverRelaxed(t *testing.T) {
	p := policyFrom(t, "[mcp.notes]\ntrust_annotations = true\nread_only_tools = [\"list\"]\n[[rule]]\ndecision = \"allow\"\nmcp = \"notes/get_*\"\n[[rule]]\ndecision = \"deny\"\nmcp = \"notes/drop\"\n")
	hints := hintsFrom(map[string]ToolHints{"notes/read": {Known: true, ReadOnly: true}})
	for _, servers := range [][]string{{"notes"}, {"notes", "notes"}, {"notes", "NOTES"}, {"notes", "notes_read"}} {
		ctx := Context{Cwd: testCwd, Home: testHome, MCPServers: servers, MCPHints: hints}
		collides := len(servers) > 1
		for _, tool := range []string{"read", "list", "get_x"} {
			req := ReadToolCallJSON(json.RawMessage(`{"toolCallId":"c","kind":"other","name":"mcp__notes__`+tool+`","rawInput":{}}`), ctx)
			v := p.Decide(req)
			if collides && (v.Decision != Ask || v.Source != "ambiguous MCP server") {
				t.Errorf("%q %s: %s (%s)", servers, tool, v.Decision, v.Reason)
			}
			if !collides && v.Decision != Allow {
				t.Errorf("%q %s without a collision: %s (%s)", servers, tool, v.Decision, v.Reason)
			}
			if m := ApplyMode(v, req, "bypass"); collides && m.Decision == Allow {
				t.Errorf("%q %s: bypass allowed it", servers, tool)
			}
		}
		req := ReadToolCallJSON(json.RawMessage(`{"toolCallId":"c","kind":"other","name":"mcp__notes__drop","rawInput":{}}`), ctx)
		if v := p.Decide(req); v.Decision != Deny {
			t.Errorf("%q drop: %s", servers, v.Decision)
		}
	}
}
