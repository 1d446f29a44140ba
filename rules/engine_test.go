package rules

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testHome and testCwd are fixed so table tests read the same everywhere;
// tests that need real symbolic links use a temporary directory.
const (
	testHome = "/home/u"
	testCwd  = "/work/repo"
)

func policyFrom(t *testing.T, layers ...string) *Policy {
	t.Helper()
	var files []*File
	for i, src := range layers {
		layer := User
		name := "user.toml"
		switch {
		case strings.HasPrefix(src, "#managed\n"):
			layer, name = Managed, "managed.toml"
		case strings.HasPrefix(src, "#project\n"):
			layer, name = Project, ".acp-broker.toml"
		case strings.HasPrefix(src, "#trusted-project\n"):
			layer, name = Project, ".acp-broker.toml"
		}
		f, err := Parse(name, layer, src)
		if err != nil {
			t.Fatalf("layer %d: %v", i, err)
		}
		if strings.HasPrefix(src, "#trusted-project\n") {
			f.Trusted = true
		}
		files = append(files, f)
	}
	return NewPolicy(files, testHome, []string{"/home/u/.config/acp-broker", "/home/u/.local/state/acp-broker", "/etc/acp-broker"})
}

// toolCall reads a tool call written as JSON.
func toolCall(t *testing.T, js string) map[string]json.RawMessage {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(js), &fields); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return fields
}

func decide(t *testing.T, p *Policy, js string) Verdict {
	t.Helper()
	toolCall(t, js) // fails the test on JSON that does not parse
	return p.Decide(ReadToolCallJSON(json.RawMessage(js), Context{Cwd: testCwd, Home: testHome, MCPServers: []string{"github", "my_server"}}))
}

func cmdCall(command string) string {
	b, _ := json.Marshal(map[string]any{"toolCallId": "c", "kind": "execute", "title": command, "rawInput": map[string]string{"command": command}})
	return string(b)
}

func TestDefaults(t *testing.T) {
	p := policyFrom(t)
	tests := []struct {
		name, call string
		want       Decision
	}{
		{"read a file", `{"kind":"read","locations":[{"path":"/work/repo/main.go"}]}`, Allow},
		{"search", `{"kind":"search","rawInput":{"pattern":"TODO","path":"/work/repo"}}`, Allow},
		{"think", `{"kind":"think","title":"Update todos"}`, Allow},
		{"edit", `{"kind":"edit","content":[{"type":"diff","path":"/work/repo/a.go","oldText":"a","newText":"b"}]}`, Ask},
		{"command", cmdCall("ls"), Ask},
		{"fetch", `{"kind":"fetch","title":"Fetch https://go.dev","rawInput":{"url":"https://go.dev"}}`, Ask},
		{"other", `{"kind":"other","title":"Something"}`, Ask},
		{"no kind", `{"title":"Something"}`, Ask},
		{"mcp tool", `{"kind":"other","name":"mcp__github__get_issue"}`, Ask},
		{"read a protected file", `{"kind":"read","locations":[{"path":"/home/u/.ssh/id_rsa"}]}`, Ask},
		{"read .env", `{"kind":"read","rawInput":{"file_path":"/work/repo/.env.local"}}`, Ask},
		{"a read kind carrying a diff", `{"kind":"read","content":[{"type":"diff","path":"/work/repo/a.go","newText":"b"}]}`, Ask},
		{"a read kind carrying a command", `{"kind":"read","rawInput":{"command":"cat x"}}`, Ask},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if v := decide(t, p, tt.call); v.Decision != tt.want {
				t.Fatalf("decision %s (%s: %s), want %s", v.Decision, v.Source, v.Reason, tt.want)
			}
		})
	}
	ask := policyFrom(t, `read_only = "ask"`)
	if v := decide(t, ask, `{"kind":"read","locations":[{"path":"/work/repo/main.go"}]}`); v.Decision != Ask {
		t.Fatalf(`read_only = "ask": %s`, v.Decision)
	}
}

func TestMatchers(t *testing.T) {
	tests := []struct {
		name, rule, call string
		want             Decision
	}{
		{"kind allows reads", `kind = "read"`, `{"kind":"read","locations":[{"path":"/etc/hosts"}]}`, Allow},
		{"kind does not allow writes", `kind = "edit"`, `{"kind":"edit","content":[{"type":"diff","path":"/work/repo/a"}]}`, Ask},
		{"path allows writes", `path = "./**"`, `{"kind":"edit","content":[{"type":"diff","path":"/work/repo/src/a.go"}]}`, Allow},
		{"path outside", `path = "./**"`, `{"kind":"edit","content":[{"type":"diff","path":"/work/other/a.go"}]}`, Ask},
		{"relative path is made absolute", `path = "./src/**"`, `{"kind":"edit","rawInput":{"file_path":"src/x.go"}}`, Allow},
		{"dot-dot escapes", `path = "./src/**"`, `{"kind":"edit","rawInput":{"file_path":"src/../../etc/passwd"}}`, Ask},
		{"home anchor", `path = "~/notes/**"`, `{"kind":"edit","rawInput":{"file_path":"~/notes/a.md"}}`, Allow},
		{"anywhere anchor", `path = "**/*.md"`, `{"kind":"edit","rawInput":{"file_path":"/x/y/z.md"}}`, Allow},
		{"absolute anchor", `path = "/tmp/**"`, `{"kind":"edit","rawInput":{"file_path":"/tmp/a/b"}}`, Allow},
		{"url glob", `url = "https://go.dev/doc/*"`, `{"kind":"fetch","rawInput":{"url":"https://go.dev/doc/effective_go"}}`, Allow},
		{"url domain", `url = "domain:example.com"`, `{"kind":"fetch","rawInput":{"url":"https://api.example.com/x"}}`, Allow},
		{"url look-alike", `url = "domain:example.com"`, `{"kind":"fetch","rawInput":{"url":"https://example.com.evil.net/"}}`, Ask},
		{"url suffix look-alike", `url = "domain:example.com"`, `{"kind":"fetch","rawInput":{"url":"https://evilexample.com/"}}`, Ask},
		{"url userinfo", `url = "domain:example.com"`, `{"kind":"fetch","rawInput":{"url":"https://example.com@evil.net/"}}`, Ask},
		{"url user on the right host", `url = "domain:example.com"`, `{"kind":"fetch","rawInput":{"url":"https://u:p@example.com/"}}`, Ask},
		{"url other scheme", `url = "domain:example.com"`, `{"kind":"fetch","rawInput":{"url":"ftp://example.com/"}}`, Ask},
		{"mcp claude", `mcp = "github/get_*"`, `{"kind":"other","name":"mcp__github__get_issue"}`, Allow},
		{"mcp codex", `mcp = "github/get_*"`, `{"kind":"other","title":"Tool: github/get_issue","rawInput":{"server":"github","tool":"get_issue","arguments":{}}}`, Allow},
		{"mcp gemini title", `mcp = "github/get_*"`, `{"kind":"other","title":"get_issue (github MCP Server)"}`, Allow},
		{"mcp gemini name", `mcp = "my_server/get_*"`, `{"kind":"other","name":"my_server_get_issue"}`, Allow},
		{"mcp look-alike server", `mcp = "github/*"`, `{"kind":"other","name":"mcp__github_evil__get_issue"}`, Ask},
		{"mcp names disagree", `mcp = "github/*"`, `{"kind":"other","name":"mcp__github__get_issue","title":"Tool: gitlab/delete_repo"}`, Ask},
		{"tool glob", `tool = "Web*"`, `{"kind":"fetch","name":"WebSearch","rawInput":{"query":"acp"}}`, Allow},
		{"title glob", `title = "Update todo*"`, `{"kind":"other","title":"Update todos"}`, Allow},
		{"tool name cannot allow a command", `tool = "WebSearch"`, `{"kind":"fetch","name":"WebSearch","rawInput":{"command":"rm -rf /"}}`, Ask},
		{"kind cannot allow a command", `kind = "execute"`, cmdCall("rm -rf /"), Ask},
		{"modes off", "kind = \"other\"\nmodes = [\"plan\"]", `{"kind":"other","title":"x"}`, Ask},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policyFrom(t, "[[rule]]\ndecision = \"allow\"\n"+tt.rule+"\n")
			if v := decide(t, p, tt.call); v.Decision != tt.want {
				t.Fatalf("decision %s (%s: %s), want %s", v.Decision, v.Source, v.Reason, tt.want)
			}
		})
	}
}

func TestPrecedenceAcrossLayers(t *testing.T) {
	allowAll := "[[rule]]\ndecision = \"allow\"\npath = \"/tmp/**\"\n"
	askAll := "[[rule]]\ndecision = \"ask\"\npath = \"/tmp/**\"\n"
	denyAll := "[[rule]]\ndecision = \"deny\"\npath = \"/tmp/secret/**\"\n"
	call := `{"kind":"edit","rawInput":{"file_path":"/tmp/secret/x"}}`
	tests := []struct {
		name   string
		layers []string
		want   Decision
	}{
		{"allow alone", []string{allowAll}, Allow},
		{"user ask beats managed allow", []string{"#managed\n" + allowAll, askAll}, Ask},
		{"managed deny beats user allow", []string{"#managed\n" + denyAll, allowAll}, Deny},
		{"deny beats a more specific allow", []string{denyAll, "[[rule]]\ndecision = \"allow\"\npath = \"/tmp/secret/x\"\n"}, Deny},
		{"project ask applies untrusted", []string{allowAll, "#project\n" + askAll}, Ask},
		{"project deny applies untrusted", []string{allowAll, "#project\n" + denyAll}, Deny},
		{"project allow is off untrusted", []string{"#project\n" + allowAll}, Ask},
		{"project allow applies trusted", []string{"#trusted-project\n" + allowAll}, Allow},
		{"trusted project allow does not beat managed ask", []string{"#managed\n" + askAll, "#trusted-project\n" + allowAll}, Ask},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if v := decide(t, policyFrom(t, tt.layers...), call); v.Decision != tt.want {
				t.Fatalf("decision %s (%s: %s), want %s", v.Decision, v.Source, v.Reason, tt.want)
			}
		})
	}
}

func TestUntrustedProjectSettingsDoNotLoosen(t *testing.T) {
	mcp := "[mcp.github]\nread_only_tools = [\"*\"]\n"
	call := `{"kind":"other","name":"mcp__github__delete_repo"}`
	if v := decide(t, policyFrom(t, "#project\n"+mcp), call); v.Decision != Ask {
		t.Fatalf("untrusted project read_only_tools: %s", v.Decision)
	}
	if v := decide(t, policyFrom(t, "#trusted-project\n"+mcp), call); v.Decision != Allow {
		t.Fatalf("trusted project read_only_tools: %s", v.Decision)
	}
	// Asking is never a loosening: an untrusted project may make reads ask.
	read := `{"kind":"read","locations":[{"path":"/work/repo/a"}]}`
	if v := decide(t, policyFrom(t, "#project\nread_only = \"ask\"\n"), read); v.Decision != Ask {
		t.Fatalf("untrusted project read_only = ask: %s", v.Decision)
	}
	if v := decide(t, policyFrom(t, "read_only = \"ask\"\n", "#trusted-project\nread_only = \"allow\"\n"), read); v.Decision != Ask {
		t.Fatalf("a trusted project loosened the user's read_only: %s", v.Decision)
	}
}

func TestProtectedPaths(t *testing.T) {
	broad := "[[rule]]\ndecision = \"allow\"\npath = [\"/**\", \"~/**\"]\n"
	unlock := "[[rule]]\ndecision = \"allow\"\npath = \"~/.aws/config\"\nunlock_protected = true\n"
	tests := []struct {
		name, path string
		write      bool
	}{
		{"ssh key", "/home/u/.ssh/id_ed25519", false},
		{"ssh dir", "/home/u/.ssh", true},
		{"gnupg", "/home/u/.gnupg/pubring.kbx", false},
		{"aws", "/home/u/.aws/credentials", false},
		{"gcloud", "/home/u/.config/gcloud/credentials.db", false},
		{"dotenv", "/work/repo/.env", false},
		{"dotenv variant", "/work/repo/api/.env.production", false},
		{"git internals written", "/work/repo/.git/hooks/pre-commit", true},
		{"git config written", "/work/repo/.git/config", true},
		{"broker config", "/home/u/.config/acp-broker/config.toml", true},
		{"broker state", "/home/u/.local/state/acp-broker/trust.toml", true},
		{"project file", "/work/repo/.acp-broker.toml", true},
		{"managed dir", "/etc/acp-broker/config.toml", true},
		{"case variant", "/home/u/.SSH/id_rsa", false},
		{"case variant of the broker's file", "/work/repo/.ACP-Broker.toml", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind := "read"
			if tt.write {
				kind = "edit"
			}
			call := `{"kind":"` + kind + `","rawInput":{"file_path":"` + tt.path + `"}}`
			v := decide(t, policyFrom(t, broad), call)
			if v.Decision != Ask || v.Source != "protected" {
				t.Fatalf("decision %s (%s: %s), want ask (protected)", v.Decision, v.Source, v.Reason)
			}
		})
	}
	if v := decide(t, policyFrom(t, broad), `{"kind":"read","rawInput":{"file_path":"/work/repo/.git/config"}}`); v.Decision != Allow {
		t.Fatalf("reading .git/config: %s", v.Decision)
	}
	if v := decide(t, policyFrom(t, unlock), `{"kind":"read","rawInput":{"file_path":"/home/u/.aws/config"}}`); v.Decision != Allow {
		t.Fatalf("an unlocked protected path: %s (%s)", v.Decision, v.Reason)
	}
	if v := decide(t, policyFrom(t, unlock), `{"kind":"read","rawInput":{"file_path":"/home/u/.aws/credentials"}}`); v.Decision != Ask {
		t.Fatalf("unlocking one protected file opened another: %s", v.Decision)
	}
}

func TestSymlinksAreResolved(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	repo := filepath.Join(dir, "repo")
	for _, d := range []string{filepath.Join(home, ".ssh"), repo} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	must(t, os.WriteFile(filepath.Join(home, ".ssh", "id_rsa"), []byte("key"), 0o600))
	must(t, os.Symlink(filepath.Join(home, ".ssh", "id_rsa"), filepath.Join(repo, "notes.txt")))
	must(t, os.Symlink(filepath.Join(dir, "outside", "new.txt"), filepath.Join(repo, "dangling")))
	must(t, os.Symlink("/etc", filepath.Join(repo, "etc")))

	f, err := Parse("user.toml", User, "[[rule]]\ndecision = \"allow\"\npath = \"./**\"\n[[rule]]\ndecision = \"deny\"\npath = \"/etc/**\"\n")
	must(t, err)
	p := NewPolicy([]*File{f}, home, nil)
	ctx := Context{Cwd: repo, Home: home}
	check := func(name, call string, want Decision) {
		t.Helper()
		v := p.Decide(ReadToolCall(toolCall(t, call), ctx))
		if v.Decision != want {
			t.Errorf("%s: decision %s (%s: %s), want %s", name, v.Decision, v.Source, v.Reason, want)
		}
	}
	check("a link into ~/.ssh", `{"kind":"read","rawInput":{"file_path":"notes.txt"}}`, Ask)
	check("a dangling link leaving the project", `{"kind":"edit","rawInput":{"file_path":"dangling"}}`, Ask)
	check("a link to a denied directory", `{"kind":"read","rawInput":{"file_path":"etc/passwd"}}`, Deny)
	check("a plain file", `{"kind":"edit","rawInput":{"file_path":"plain.txt"}}`, Allow)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestRequestsThatCannotBeReadAreNeverAllowed(t *testing.T) {
	p := policyFrom(t, "[[rule]]\ndecision = \"allow\"\nkind = [\"read\", \"other\"]\n")
	tests := []struct{ name, call string }{
		{"duplicate nested key", `{"kind":"read","rawInput":{"file_path":"/a","file_path":"/home/u/.ssh/id_rsa"}}`},
		{"case variant keys", `{"kind":"read","rawInput":{"file_path":"/a","File_Path":"/b"}}`},
		{"kind of the wrong type", `{"kind":["read"],"title":"x"}`},
		{"rawInput not an object", `{"kind":"read","rawInput":"cat /etc/passwd"}`},
		{"command of the wrong type", `{"kind":"read","rawInput":{"command":{"argv":["rm"]}}}`},
		{"relative path with no cwd", ``},
		{"duplicate top-level kind", `{"kind":"read","kind":"execute","title":"x"}`},
		{"two tool names", `{"kind":"read","name":"Read","_meta":{"claudeCode":{"toolName":"Bash"}},"locations":[{"path":"/a"}]}`},
		{"a location without a path", `{"kind":"read","locations":[{"line":3}]}`},
		{"an unparsable url", `{"kind":"other","rawInput":{"url":"http://[::1"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.call == "" {
				v := p.Decide(ReadToolCall(toolCall(t, `{"kind":"read","locations":[{"path":"a.txt"}]}`), Context{Home: testHome}))
				if v.Decision == Allow {
					t.Fatal("allowed a relative path with no working directory")
				}
				return
			}
			if v := decide(t, p, tt.call); v.Decision == Allow {
				t.Fatalf("allowed (%s)", v.Reason)
			}
		})
	}
}
