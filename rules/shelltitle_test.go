package rules

import (
	"encoding/json"
	"testing"
)

// TestTitleOfAShellsScript: codex-acp 2.6 titles a started command with the
// script of the shell it announces (`git status` for `/bin/bash -lc 'git
// status'`): that title names the same command. A title naming another
// command than the script still conflicts.
func TestTitleOfAShellsScript(t *testing.T) {
	for _, c := range []struct {
		title, command string
		conflict       bool
	}{
		{"git status && ls", `/bin/bash -lc 'git status && ls'`, false},
		{"git log --format='%h'", `/bin/zsh -lc "git log --format='%h'"`, false},
		{"git status", `/bin/bash -lc 'git status; rm -rf x'`, true},
		{"git status", `/bin/bash -lc 'git status' x`, true},
		{"git status", `FOO=1 /bin/bash -lc 'git status'`, true},
		{"git status", `/usr/bin/python3 -c 'git status'`, true},
	} {
		tc, _ := json.Marshal(map[string]any{"toolCallId": "t", "kind": "execute", "title": c.title, "rawInput": map[string]string{"command": c.command}})
		r := ReadToolCallJSON(tc, Context{Cwd: "/repo"})
		if got := len(r.Conflicts) > 0; got != c.conflict {
			t.Errorf("title %q, command %q: conflicts %v, want a conflict: %v", c.title, c.command, r.Conflicts, c.conflict)
		}
	}
}
