//go:build linux

package integration

import (
	"fmt"
	"testing"
)

// codex-acp 2.6.0 (dist/index.js) announces a started command whose
// commandActions are not exactly one (`git status && git log -1` is two) with
// the app-server's whole command string: startFacts falls back to {type:
// "unknown", command: item.command}, and the tool_call's rawInput is
// {command: "/bin/bash -lc '…'", cwd}. The permission request for the same
// item (CommandReporter.permission) carries stripShellPrefix(params.command):
// the script alone. The two say the same; anything else must still disagree.

// codexStarted is codex-acp 2.6's tool_call for a started command, for a
// client that is not JetBrains AIR: command is rawInput.command as the
// app-server gave it (a string or, from older adapters, an argv).
func codexStarted(id string, command any, title string) string {
	return toolCallUpdate("tool_call", fmt.Sprintf(`"toolCallId":"call_%s","kind":"execute","title":%s,"status":"in_progress","content":[{"type":"terminal","terminalId":"call_%s"}],"rawInput":{"command":%s,"cwd":"$CWD"},"_meta":{"terminal_info":{"cwd":"$CWD","terminal_id":"call_%s"}}`,
		id, mustJSON(title), id, mustJSON(command), id))
}

// codexStartedRequest is codex-acp 2.6's permission request about a started
// command: no kind or status of its own (applyStandardFields adds them last),
// the stripped command.
func codexStartedRequest(n, id, command string) string {
	return permission(`"r`+n+`"`, fmt.Sprintf(`{"toolCallId":"call_%s","title":%s,"rawInput":{"command":%s,"cwd":"$CWD"},"kind":"execute","status":"pending"}`,
		id, mustJSON(command), mustJSON(command)), codex2Options("git", false))
}

// TestCodexStartedCommandAgreesWithItsShell: a started command announced
// with its shell and asked about without it is decided by the rules (it
// was asked, whatever they said), and is judged as the announced shell
// runs it. A request that is not exactly the announced shell's script, or
// an announcement that is anything more than a shell, -c or -lc, and a
// literal script, still disagrees: it is asked, or denied when a deny rule
// matches either.
func TestCodexStartedCommandAgreesWithItsShell(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules})
	type c struct {
		name      string
		announced any
		asked     string
		option    string // decided with this option, else asked
	}
	cases := []c{
		// What codex-acp 2.6 sends.
		{"two_actions_allowed", `/bin/bash -lc 'git status && git log -1'`, "git status && git log -1", "allow_once"},
		{"double_quoted_script", `/bin/bash -lc "git log --format='%h' -1"`, "git log --format='%h' -1", "allow_once"},
		{"zsh_on_macOS", `/bin/zsh -lc 'git status && git diff HEAD'`, "git status && git diff HEAD", "allow_once"},
		{"sh_c", `sh -c 'git status'`, "git status", "allow_once"},
		{"argv_announcement", []string{"/bin/bash", "-lc", "git status && git log -1"}, "git status && git log -1", "allow_once"},
		{"shlex_quoted_single_quote", `/bin/bash -lc 'git log --format='"'"'%h'"'"' -1'`, "git log --format='%h' -1", "allow_once"},
		// A deny rule sees the script.
		{"denied_script", `/bin/bash -lc 'git status && git push --force origin main'`, "git status && git push --force origin main", "cancel"},

		// Another script than the announced one.
		{"other_command", `bash -lc 'ls'`, "rm -rf x", ""},
		{"other_allowed_command", `/bin/bash -lc 'git status'`, "git log -1", ""},
		{"announced_more", `/bin/bash -lc 'ls; rm x'`, "ls", ""},
		{"announced_more_than_allowed", `/bin/bash -lc 'git status; rm x'`, "git status", ""},
		{"announced_less", `/bin/bash -lc 'git status'`, "git status && git log -1", ""},
		{"announced_denied", `/bin/bash -lc 'npm install left-pad'`, "git status", "cancel"},
		{"argv_other_command", []string{"/bin/bash", "-lc", "npm install left-pad"}, "git status", "cancel"},
		{"spacing_differs", `/bin/bash -lc 'git  status'`, "git status", ""},
		{"quotes_differ", `/bin/bash -lc 'git log "-1"'`, "git log -1", ""},
		// An announcement that is more than a shell and its script.
		{"argument_after_script", `/bin/bash -lc 'git status' x`, "git status", ""},
		{"argv_argument_after_script", []string{"/bin/bash", "-lc", "git status", "x"}, "git status", ""},
		{"variable_in_script", `/bin/bash -lc "git status$X"`, "git status$X", ""},
		{"substitution_script", `/bin/bash -lc "$(echo git status)"`, "git status", ""},
		{"env_assignment", `GIT_DIR=/tmp/x /bin/bash -lc 'git status'`, "git status", ""},
		{"env_program", `env /bin/bash -lc 'git status'`, "git status", ""},
		{"redirection", `/bin/bash -lc 'git status' > /tmp/out`, "git status", ""},
		{"second_command", `/bin/bash -lc 'git status'; rm -rf x`, "git status", ""},
		{"other_shell_option", `/bin/bash -ic 'git status'`, "git status", ""},
		{"unread_shell", `/usr/bin/fish -c 'git status'`, "git status", ""},
		{"interpreter", `python3 -c 'git status'`, "git status", ""},
		// A shell of the agent's own is whatever was put there.
		{"shell_at_a_path_of_its_own", `/tmp/evil/bash -lc 'git status'`, "git status", ""},
		{"relative_shell", []string{"./bash", "-lc", "git status"}, "git status", ""},
		{"not_a_shell", `git status`, "git  status", ""},
		// The announced shell's reading counts: sh does not read $'…'
		// (bash reads $'\x67it' as git), so the request is asked.
		{"read_in_the_shells_dialect", []string{"/bin/sh", "-c", `$'\x67it' status`}, `$'\x67it' status`, ""},
	}
	var play []decideCase
	for i, c := range cases {
		n := fmt.Sprint(i + 1)
		dc := decideCase{
			name:   c.name,
			before: []string{codexStarted(n, c.announced, c.asked)},
			req:    codexStartedRequest(n, n, c.asked),
			option: c.option,
		}
		if c.option == "" {
			dc.answer = answer(`"r`+n+`"`, "cancel")
		}
		play = append(play, dc)
	}
	// The request's own command in the wrapped form agrees too.
	play = append(play, decideCase{
		name:   "request_wrapped",
		before: []string{codexStarted("90", "git status", "git status")},
		req:    codexStartedRequest("90", "90", "/bin/bash -lc 'git status'"),
		option: "allow_once",
	})
	// A request that only names the tool call is judged on the
	// announcement, whose title is its shell's script.
	play = append(play, decideCase{
		name:   "request_names_only_the_tool_call",
		before: []string{codexStarted("91", "/bin/bash -lc 'git status && git log -1'", "git status && git log -1")},
		req:    permission(`"r91"`, `{"toolCallId":"call_91"}`, codex2Options("git", false)),
		option: "allow_once",
	})
	d.play(t, play)
}
