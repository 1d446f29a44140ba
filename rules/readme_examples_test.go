package rules

import "testing"

// TestREADMEWorkedExamples pins the per-agent examples the README gives, so
// the README stays true.
func TestREADMEWorkedExamples(t *testing.T) {
	claude := policyFrom(t, `
[[rule]]
id = "tests"
decision = "allow"
command = ["npm test", "npm run test *", "git status", "git diff *"]

[[rule]]
id = "edit-src"
decision = "allow"
kind = "edit"
path = "./src/**"

[[rule]]
id = "github-read"
decision = "allow"
mcp = "github/get_*"
`)
	codex := policyFrom(t, `
[[rule]]
id = "read-tools"
decision = "allow"
command = ["cat *", "ls *", "rg *", "git log *"]

[[rule]]
id = "no-network-installs"
decision = "deny"
reason = "dependencies come from the lock file"
command = ["npm install *", "pip install *"]
`)
	gemini := policyFrom(t, `
[[rule]]
id = "git-read"
decision = "allow"
command = ["git status", "git log *", "git diff *"]

[[rule]]
id = "no-force-push"
decision = "deny"
command = "git push --force *"
`)
	tests := []struct {
		name string
		p    *Policy
		call string
		want Decision
	}{
		{"claude tests and diff", claude, cmdCall("npm test && git diff --stat"), Allow},
		{"claude rm", claude, cmdCall("npm test && rm -rf build"), Ask},
		{"claude edit src", claude, `{"kind":"edit","content":[{"type":"diff","path":"/work/repo/src/app.ts","newText":"x"}]}`, Allow},
		{"claude edit package.json", claude, `{"kind":"edit","content":[{"type":"diff","path":"/work/repo/package.json","newText":"x"}]}`, Ask},
		{"claude mcp get", claude, `{"kind":"other","name":"mcp__github__get_issue"}`, Allow},
		{"claude mcp create", claude, `{"kind":"other","name":"mcp__github__create_issue"}`, Ask},
		{"codex rg", codex, `{"kind":"search","rawInput":{"command":["/bin/bash","-lc","rg TODO src"],"cwd":"/work/repo"}}`, Allow},
		{"codex cat .env", codex, `{"kind":"read","rawInput":{"command":["/bin/bash","-lc","cat .env"],"cwd":"/work/repo"}}`, Ask},
		{"codex npm install", codex, `{"kind":"execute","rawInput":{"command":["/bin/bash","-lc","npm install left-pad"],"cwd":"/work/repo"}}`, Deny},
		// codex-acp 2.x sends the command as a string, the shell prefix stripped.
		{"codex 2.x rg", codex, `{"kind":"search","rawInput":{"command":"rg TODO src","cwd":"/work/repo"}}`, Allow},
		{"codex 2.x cat .env", codex, `{"kind":"read","rawInput":{"command":"cat .env","cwd":"/work/repo"}}`, Ask},
		{"codex 2.x npm install", codex, `{"kind":"execute","rawInput":{"command":"npm install left-pad","cwd":"/work/repo"}}`, Deny},
		{"gemini git log", gemini, `{"kind":"execute","title":"git log --oneline"}`, Allow},
		{"gemini force push", gemini, `{"kind":"execute","title":"git status; git push --force"}`, Deny},
		{"gemini other", gemini, `{"kind":"execute","title":"make"}`, Ask},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if v := decide(t, tt.p, tt.call); v.Decision != tt.want {
				t.Fatalf("decision %s (%s: %s), want %s", v.Decision, v.Source, v.Reason, tt.want)
			}
		})
	}
}
