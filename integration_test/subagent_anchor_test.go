//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSubagentCwdDoesNotEscapeTheSessionsDenyRules: a child announced with a
// cwd inside a directory its root's `./` rules deny (the root's ./gen/**)
// gains nothing from `./` meaning its cwd: the root's rules, read at the
// root's directory, still deny the paths they name (a relative or absolute
// edit, a write), however deep the child or its grandchild sits in there,
// while a child in a directory of its own keeps its `./` allows.
func TestSubagentCwdDoesNotEscapeTheSessionsDenyRules(t *testing.T) {
	d := startDecider(t, deciderOptions{rules: decideRules, project: sessionProjectRules, initialize: subagentsInit})
	for _, dir := range []string{"gen/src", "gen/deeper/src", "wt/src"} {
		if err := os.MkdirAll(filepath.Join(d.cwd, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name string
		f    func()
	}{
		{"child_in_a_denied_directory", func() {
			d.AgentToEditor(d.expand(subagentUpdate("sess_1", "child-gen", `"cwd":"$CWD/gen"`)))
			d.decided(childPermission("child-gen", "1", childEdit("g1", "src/a.go"), claudeOptions), "reject")
			d.decided(childPermission("child-gen", "2", childEdit("g2", "$CWD/gen/src/b.go"), claudeOptions), "reject")
			d.refused(`{"jsonrpc":"2.0","id":3,"method":"fs/write_text_file","params":{"sessionId":"child-gen","path":"$CWD/gen/src/c.go","content":"x"}}`)
		}},
		{"child_deeper_in_it", func() {
			d.AgentToEditor(d.expand(subagentUpdate("sess_1", "child-deeper", `"cwd":"$CWD/gen/deeper"`)))
			d.decided(childPermission("child-deeper", "4", childEdit("g4", "src/a.go"), claudeOptions), "reject")
		}},
		{"grandchild_of_a_child_elsewhere", func() {
			d.AgentToEditor(d.expand(subagentUpdate("sess_1", "child-wt", `"cwd":"$CWD/wt"`)))
			d.decided(childPermission("child-wt", "5", childEdit("w5", "src/a.go"), claudeOptions), "allow")
			d.AgentToEditor(d.expand(subagentUpdate("child-wt", "grandchild-gen", `"cwd":"$CWD/gen/deeper"`)))
			d.decided(childPermission("grandchild-gen", "6", childEdit("g6", "src/a.go"), claudeOptions), "reject")
			d.refused(`{"jsonrpc":"2.0","id":7,"method":"fs/write_text_file","params":{"sessionId":"grandchild-gen","path":"$CWD/gen/deeper/src/c.go","content":"x"}}`)
		}},
		{"a_command_run_in_it_is_judged_as_the_sessions", func() {
			d.decided(childPermission("child-gen", "8", claudeChildBash("g8", "git status"), claudeOptions), "allow")
		}},
	}
	for _, s := range steps {
		if !d.step(t, s.name, s.f) {
			return
		}
	}
	d.finish()
}
