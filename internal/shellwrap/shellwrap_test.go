package shellwrap_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/acp-broker/acp-broker/internal/shellwrap"
	"github.com/acp-broker/acp-broker/rules"
)

func jsonOf(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWraps(t *testing.T) {
	for _, c := range []struct {
		name    string
		wrapper any
		command string
		want    bool
	}{
		{"codex_multi_action", `/bin/bash -lc 'git status && git log -1'`, "git status && git log -1", true},
		{"plain_c", `sh -c 'ls'`, "ls", true},
		{"zsh", `/bin/zsh -lc 'git status'`, "git status", true},
		{"unquoted_script", `/bin/bash -lc ls`, "ls", true},
		{"double_quotes", `bash -lc "echo \"hi\" \$HOME"`, `echo "hi" $HOME`, true},
		{"shlex_single_quote", `/bin/bash -lc 'echo '"'"'hi'"'"''`, "echo 'hi'", true},
		{"escaped_single_quote", `/bin/bash -lc 'echo '\''hi'\'''`, "echo 'hi'", true},
		{"newline_in_script", "bash -lc 'ls\nrm x'", "ls\nrm x", true},
		{"argv", []string{"/bin/bash", "-lc", "git status"}, "git status", true},
		{"argv_c", []string{"dash", "-c", "ls; pwd"}, "ls; pwd", true},

		{"other_script", `bash -lc 'ls'`, "rm -rf x", false},
		{"more_script", `bash -lc 'ls; rm x'`, "ls", false},
		{"less_script", `bash -lc 'ls'`, "ls; rm x", false},
		{"script_with_spaces_around", `bash -lc ' ls'`, "ls", false},
		{"not_a_wrapper", `git status`, "git status", false},
		{"argv_not_a_wrapper", []string{"git", "status"}, "git status", false},
		{"argument_after_script", `bash -lc 'ls' x`, "ls", false},
		{"argv_argument_after_script", []string{"bash", "-lc", "ls", "x"}, "ls", false},
		{"variable_script", `bash -lc "$CMD"`, "$CMD", false},
		{"variable_in_script", `bash -lc "ls $X"`, "ls $X", false},
		{"substitution", `bash -lc "$(echo ls)"`, "ls", false},
		{"substitution_kept", `bash -lc "$(echo ls)"`, "$(echo ls)", false},
		{"ansi_c_quotes", `bash -lc $'ls'`, "ls", false},
		{"glob_script", `bash -lc l*`, "l*", false},
		{"brace_script", `bash -lc {ls,rm}`, "{ls,rm}", false},
		{"tilde", `bash -lc ~`, "~", false},
		{"other_shell", `fish -c 'ls'`, "ls", false},
		{"python", `python3 -c 'ls'`, "ls", false},
		{"env_wrapper", `env bash -lc 'ls'`, "ls", false},
		{"env_assignment", `FOO=1 bash -lc 'ls'`, "ls", false},
		{"redirect", `bash -lc 'ls' > out`, "ls", false},
		{"background", `bash -lc 'ls' &`, "ls", false},
		{"negated", `! bash -lc 'ls'`, "ls", false},
		{"second_command", `bash -lc 'ls'; rm x`, "ls", false},
		{"pipeline", `bash -lc 'ls' | sh`, "ls", false},
		{"other_flag", `bash -ic 'ls'`, "ls", false},
		{"split_flags", `bash -l -c 'ls'`, "ls", false},
		{"login_only", `bash -l 'ls'`, "ls", false},
		{"quoted_shell", `"bash" -lc 'ls'`, "ls", true},
		{"script_is_an_option", `bash -c '-x'`, "-x", false},
		{"empty_script", `bash -c ''`, "", false},
		{"nul", "bash -c 'ls\x00'", "ls\x00", false},
		{"wrapper_is_an_object", map[string]string{"command": "bash -lc ls"}, "ls", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := shellwrap.Wraps(jsonOf(t, c.wrapper), jsonOf(t, c.command)); got != c.want {
				t.Errorf("Wraps(%v, %q) = %v, want %v", c.wrapper, c.command, got, c.want)
			}
		})
	}
}

// TestWrapsNeedsAStringCommand: the wrapped side is the request's command
// string; an argv is never a script.
func TestWrapsNeedsAStringCommand(t *testing.T) {
	if shellwrap.Wraps(jsonOf(t, "bash -lc 'git status'"), jsonOf(t, []string{"git", "status"})) {
		t.Error("an argv was taken for the script")
	}
}

// TestWrapsInvalidUTF8: JSON decoding makes two different invalid strings
// alike (U+FFFD); they never agree.
func TestWrapsInvalidUTF8(t *testing.T) {
	if shellwrap.Wraps(json.RawMessage("\"bash -lc '\xff'\""), json.RawMessage("\"\xfe\"")) {
		t.Error("invalid UTF-8 agreed")
	}
}

// TestRulesReadThroughEveryWrapper: every shell this package unwraps is one
// the rules read through: what a wrapper runs is judged as its script.
func TestRulesReadThroughEveryWrapper(t *testing.T) {
	for shell := range shellwrap.Shells {
		for _, flag := range []string{"-c", "-lc"} {
			argv := []string{"/bin/" + shell, flag, "git status"}
			if _, ok := shellwrap.Script(jsonOf(t, argv)); !ok {
				t.Errorf("%v is not a wrapper", argv)
				continue
			}
			got := rules.ParseArgv(argv)
			if len(got.Opaque) > 0 || len(got.Commands) != 1 || len(got.Commands[0].Opaque) > 0 || !slices.Equal(got.Commands[0].Argv, []string{"git", "status"}) {
				t.Errorf("rules read %v as %+v, not as git status", argv, got)
			}
		}
	}
	if _, ok := shellwrap.Script(jsonOf(t, []string{"/bin/fish", "-c", "ls"})); ok {
		t.Error("fish, whose script the rules cannot read, is a wrapper")
	}
}
