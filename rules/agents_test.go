package rules

import "testing"

// userRules are what a user of every agent might write.
const userRules = `
[[rule]]
decision = "allow"
command = ["git status", "git diff *", "npm test", "cat *"]

[[rule]]
decision = "allow"
kind = "edit"
path = "./src/**"

[[rule]]
decision = "allow"
url = "domain:pkg.go.dev"

[[rule]]
decision = "allow"
mcp = "github/get_*"

[[rule]]
decision = "deny"
command = "git push --force *"
reason = "no force pushes"
`

// TestAgentRequestShapes decides the permission requests real agents send
// (see shared/acp/NOTES.md) as a user of those rules would expect.
func TestAgentRequestShapes(t *testing.T) {
	p := policyFrom(t, userRules)
	tests := []struct {
		agent, name, call string
		want              Decision
	}{
		// claude-agent-acp
		{"claude", "Bash allowed", `{"toolCallId":"t1","kind":"execute","title":"npm test","rawInput":{"command":"npm test","description":"Run tests"}}`, Allow},
		{"claude", "Bash asked", `{"toolCallId":"t1","kind":"execute","title":"rm -rf node_modules","rawInput":{"command":"rm -rf node_modules"}}`, Ask},
		{"claude", "Bash denied", `{"toolCallId":"t1","kind":"execute","title":"git push --force origin main","rawInput":{"command":"git push --force origin main"}}`, Deny},
		{"claude", "Bash chain with a denied part", `{"toolCallId":"t1","kind":"execute","title":"npm test && git push --force origin","rawInput":{"command":"npm test && git push --force origin"}}`, Deny},
		{"claude", "Read", `{"toolCallId":"t2","kind":"read","title":"Read /work/repo/go.mod","rawInput":{"file_path":"/work/repo/go.mod"},"locations":[{"path":"/work/repo/go.mod"}]}`, Allow},
		{"claude", "Edit in src", `{"toolCallId":"t3","kind":"edit","title":"Edit src/a.go","rawInput":{"file_path":"/work/repo/src/a.go","old_string":"a","new_string":"b"},"content":[{"type":"diff","path":"/work/repo/src/a.go","oldText":"a","newText":"b"}],"locations":[{"path":"/work/repo/src/a.go"}]}`, Allow},
		{"claude", "Write outside src", `{"toolCallId":"t3","kind":"edit","title":"Write Makefile","rawInput":{"file_path":"/work/repo/Makefile","content":"x"},"content":[{"type":"diff","path":"/work/repo/Makefile","newText":"x"}]}`, Ask},
		{"claude", "merged view of a newer build (kind from the earlier tool_call)", `{"toolCallId":"t4","title":"npm test","kind":"execute","name":"Bash","_meta":{"claudeCode":{"toolName":"Bash"}},"rawInput":{"command":"npm test"}}`, Allow},
		{"claude", "Grep", `{"toolCallId":"t5","kind":"search","title":"grep TODO","rawInput":{"pattern":"TODO","path":"/work/repo"}}`, Allow},
		{"claude", "WebFetch allowed domain", `{"toolCallId":"t6","kind":"fetch","title":"Fetch https://pkg.go.dev/net/http","rawInput":{"url":"https://pkg.go.dev/net/http","prompt":"summarise"}}`, Allow},
		{"claude", "WebFetch other domain", `{"toolCallId":"t6","kind":"fetch","title":"Fetch https://example.com","rawInput":{"url":"https://example.com","prompt":"x"}}`, Ask},
		{"claude", "MCP read tool", `{"toolCallId":"t7","kind":"other","title":"mcp__github__get_issue","name":"mcp__github__get_issue","rawInput":{"owner":"o","repo":"r","issue_number":1}}`, Allow},
		{"claude", "MCP write tool", `{"toolCallId":"t7","kind":"other","title":"mcp__github__create_issue","name":"mcp__github__create_issue","rawInput":{"title":"x"}}`, Ask},
		{"claude", "TodoWrite", `{"toolCallId":"t8","kind":"think","title":"Update todos","rawInput":{"todos":[]}}`, Allow},
		{"claude", "ExitPlanMode", `{"toolCallId":"t9","kind":"switch_mode","title":"Ready to code?","rawInput":{"plan":"..."}}`, Ask},
		// codex-acp
		{"codex", "exec allowed", `{"toolCallId":"c1","kind":"execute","title":"git status","rawInput":{"command":["/bin/bash","-lc","git status"],"cwd":"/work/repo","reason":"check"}}`, Allow},
		{"codex", "exec chain asked", `{"toolCallId":"c1","kind":"execute","title":"git status && make","rawInput":{"command":["/bin/bash","-lc","git status && make"],"cwd":"/work/repo"}}`, Ask},
		{"codex", "exec denied", `{"toolCallId":"c1","kind":"execute","title":"git push --force","rawInput":{"command":["bash","-lc","git push --force origin"],"cwd":"/work/repo"}}`, Deny},
		{"codex", "recognised read allowed by cat *", `{"toolCallId":"c2","kind":"read","title":"Read README.md","rawInput":{"command":["/bin/bash","-lc","cat README.md"],"cwd":"/work/repo"}}`, Allow},
		{"codex", "recognised read of a secret", `{"toolCallId":"c2","kind":"read","title":"Read .env","rawInput":{"command":["/bin/bash","-lc","cat .env"],"cwd":"/work/repo"}}`, Ask},
		{"codex", "exec in another cwd", `{"toolCallId":"c3","kind":"execute","title":"cat a","rawInput":{"command":["cat","id_rsa"],"cwd":"/home/u/.ssh"}}`, Ask},
		{"codex", "patch in src", `{"toolCallId":"c4","kind":"edit","title":"Edit src/a.go","content":[{"type":"diff","path":"/work/repo/src/a.go","oldText":"a","newText":"b"}],"rawInput":{"changes":{"/work/repo/src/a.go":{"type":"update","unified_diff":"..."}}}}`, Allow},
		{"codex", "patch moving out of src", `{"toolCallId":"c4","kind":"edit","title":"Edit src/a.go","content":[{"type":"diff","path":"/work/repo/src/a.go","newText":"b"}],"rawInput":{"changes":{"/work/repo/src/a.go":{"type":"update","move_path":"/work/repo/b.go"}}}}`, Ask},
		{"codex", "MCP read tool", `{"toolCallId":"c5","kind":"other","title":"Tool: github/get_issue","rawInput":{"server":"github","tool":"get_issue","arguments":{"number":1}}}`, Allow},
		// gemini-cli
		{"gemini", "shell allowed", `{"toolCallId":"g1","kind":"execute","title":"git status","content":[]}`, Allow},
		{"gemini", "shell chain", `{"toolCallId":"g1","kind":"execute","title":"git status && curl x | sh"}`, Ask},
		{"gemini", "shell denied", `{"toolCallId":"g1","kind":"execute","title":"git push --force origin main"}`, Deny},
		{"gemini", "edit in src", `{"toolCallId":"g2","kind":"edit","title":"Writing to src/a.go","locations":[{"path":"/work/repo/src/a.go"}],"content":[{"type":"diff","path":"/work/repo/src/a.go","oldText":"","newText":"x"}]}`, Allow},
		{"gemini", "read", `{"toolCallId":"g3","kind":"read","title":"ReadFile","locations":[{"path":"/work/repo/main.go"}]}`, Allow},
		{"gemini", "MCP read tool", `{"toolCallId":"g4","kind":"other","title":"get_issue (github MCP Server)"}`, Allow},
		{"gemini", "MCP other tool", `{"toolCallId":"g4","kind":"other","title":"delete_repo (github MCP Server)"}`, Ask},
	}
	for _, tt := range tests {
		t.Run(tt.agent+"/"+tt.name, func(t *testing.T) {
			if v := decide(t, p, tt.call); v.Decision != tt.want {
				t.Fatalf("decision %s (%s: %s), want %s", v.Decision, v.Source, v.Reason, tt.want)
			}
		})
	}
}
