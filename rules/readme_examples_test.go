package rules

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEWorkedExamples pins the per-agent examples the README gives, so
// the README stays true.
func TestREADMEWorkedExamples(t *testing.T) {
	// The rule files are the README's own blocks, in the order it gives
	// them: a change there is tested here.
	blocks := workedExampleBlocks(t)
	claude, codex, gemini := policyFrom(t, blocks[0]), policyFrom(t, blocks[1]), policyFrom(t, blocks[2])
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

// workedExampleBlocks returns the ```toml blocks of the README's "Worked
// examples, per agent": Claude Code's, Codex's and Gemini CLI's.
func workedExampleBlocks(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n### Worked examples, per agent\n")
	if !ok {
		t.Fatal(`the README has no "### Worked examples, per agent" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var blocks []string
	for {
		var block string
		if _, section, ok = strings.Cut(section, "\n```toml\n"); !ok {
			break
		}
		block, section, _ = strings.Cut(section, "\n```\n")
		blocks = append(blocks, block)
	}
	if len(blocks) != 3 {
		t.Fatalf("the worked examples have %d toml blocks, want 3 (Claude Code, Codex, Gemini CLI)", len(blocks))
	}
	return blocks
}
