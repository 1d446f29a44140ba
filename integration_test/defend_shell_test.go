//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDefendTerminalAsAShellRunsIt: editors run a terminal's command through
// the user's shell (Zed builds `sh -c "<command> '<arg>'…"`, with the
// command unquoted), so a command word a shell reads differently from how it
// is spelled is judged as that shell reads it: a deny rule on rm sees through
// `\rm`, `"rm"`, `{rm,-rf,x}`, a glob, a leading space, `rm -rf` given as
// the program with the path as its argument, or `true;rm`. Each is refused
// and never reaches the editor; the file rm would remove still exists.
func TestDefendTerminalAsAShellRunsIt(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: heldRules})
	keep := filepath.Join(d.cwd, "keep")
	if err := os.WriteFile(keep, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct{ name, members string }{
		{"backslash_in_the_program", `"command":"\\rm","args":["-rf","$CWD/keep"],"cwd":"$CWD"`},
		{"empty_quotes_in_the_program", `"command":"r''m","args":["-rf","$CWD/keep"],"cwd":"$CWD"`},
		{"double_quotes_in_the_program", `"command":"\"rm\"","args":["-rf","$CWD/keep"],"cwd":"$CWD"`},
		{"brace_expansion_without_args", `"command":"{rm,-rf,$CWD/keep}","cwd":"$CWD"`},
		{"glob_in_the_program", `"command":"/bin/r?","args":["-rf","$CWD/keep"],"cwd":"$CWD"`},
		{"leading_space", `"command":" rm","args":["-rf","$CWD/keep"],"cwd":"$CWD"`},
		{"program_and_flags_in_command", `"command":"rm -rf","args":["$CWD/keep"],"cwd":"$CWD"`},
		{"a_list_in_command", `"command":"true;rm","args":["-rf","$CWD/keep"],"cwd":"$CWD"`},
		{"a_newline_in_command", `"command":"true\nrm","args":["-rf","$CWD/keep"],"cwd":"$CWD"`},
		{"variable_in_the_program_with_args", `"command":"$0","args":["-c","rm -rf $CWD/keep"],"cwd":"$CWD"`},
	} {
		ok := d.step(t, c.name, func() {
			msg := d.refusedUnrun(terminalReq(itoa(i+1), c.members))
			if msg != "" && !strings.Contains(msg, "no-rm") && !strings.Contains(msg, "cannot see") {
				d.t.Errorf("error message %q does not say why", msg)
			}
			if _, err := os.Stat(keep); err != nil {
				d.t.Errorf("the file rm would have removed is gone: %v", err)
			}
		})
		if !ok {
			return
		}
	}
	// A plain program with arguments is still read as its argv: an argument
	// a shell would expand is quoted by the editor, so it is one word.
	d.forwardedAtOnce(terminalReq(`20`, `"command":"git","args":["log","--format=%H $x"],"cwd":"$CWD"`), `{"jsonrpc":"2.0","id":20,"result":{"terminalId":"t"}}`)
	d.finish()
}
