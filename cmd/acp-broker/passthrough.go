package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/term"
)

// terminalAuthForms are the arguments agents advertise for a `terminal` auth
// method, which the editor appends to the configured command
// (`acp-broker [flags] -- AGENT [ARGS...]`) and runs in a terminal for the
// user to log in: none of them starts an ACP conversation. They count only
// for the agent that advertises them, and only at the end of the command
// line, where the editor puts them.
var terminalAuthForms = []struct {
	agent string
	args  []string
}{
	// claude-agent-acp (dist/acp-agent.js, initialize): the remote login,
	// the Claude subscription login and the Anthropic Console login. Any
	// "--cli" makes it run the native Claude CLI instead (dist/index.js).
	{"claude-agent-acp", []string{"--cli"}},
	{"claude-agent-acp", []string{"--cli", "auth", "login", "--claudeai"}},
	{"claude-agent-acp", []string{"--cli", "auth", "login", "--console"}},
}

// terminalLogin says why the agent's command line is a terminal login to run
// directly rather than an ACP session to broker, or "" when it is not.
// It is one when the broker's stdin and stdout are both a terminal, where
// no editor speaks ACP, or when the command line ends with the arguments of
// a known agent's terminal auth method. The editor, not the agent, chooses
// the broker's command line, so an agent cannot put an ACP session over
// pipes into this mode.
func terminalLogin(agent []string, stdin io.Reader, stdout io.Writer) string {
	if isTerminal(stdin) && isTerminal(stdout) {
		return "stdin and stdout are a terminal"
	}
	for _, form := range terminalAuthForms {
		n := len(agent) - len(form.args)
		if n < 1 || !slices.Equal(agent[n:], form.args) {
			continue
		}
		if slices.ContainsFunc(launched(agent[:n]), func(w string) bool { return namesAgent(w, form.agent) }) {
			return fmt.Sprintf("%q are the arguments of %s's terminal login", strings.Join(form.args, " "), form.agent)
		}
	}
	return ""
}

// launched returns the words of a command line that may name what runs:
// the command, and its first word that is not a flag, which a launcher runs
// (`npx -y PACKAGE`, `node PATH`).
func launched(command []string) []string {
	words := command[:1]
	if i := slices.IndexFunc(command[1:], func(w string) bool { return !strings.HasPrefix(w, "-") }); i >= 0 {
		words = append(words[:1:1], command[1+i])
	}
	return words
}

// namesAgent reports whether a command-line word names the agent: as a
// command, a path through its package directory, or an npm package spec
// (`@agentclientprotocol/claude-agent-acp@0.101.0`, as npx is given).
func namesAgent(arg, agent string) bool {
	for _, part := range strings.Split(arg, "/") {
		if part == agent || strings.HasPrefix(part, agent+"@") {
			return true
		}
	}
	return false
}

func isTerminal(stream any) bool {
	f, ok := stream.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// execAgent replaces the broker with the agent, so that the terminal, its
// signals and the exit status are the agent's own. It returns only if the
// agent could not be run.
func execAgent(path string, argv []string) error {
	return syscall.Exec(path, argv, os.Environ())
}
