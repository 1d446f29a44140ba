package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// The README is read from the module's root, two directories up.
const readmePath = "../../README.md"

// readmeBlock is one fenced code block of the README.
type readmeBlock struct {
	lang    string // the word after the opening fence: toml, sh, ...
	line    int    // the line of the opening fence, counted from 1
	text    string // the lines between the fences
	invalid bool   // the block is marked <!-- invalid --> on the line before it (blank lines between allowed)
}

// readmeBlocks returns the README's fenced code blocks, in order.
func readmeBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	f, err := os.Open(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		blocks  []readmeBlock
		cur     *readmeBlock
		body    strings.Builder
		lastTxt string // the last non-blank line outside a block
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &readmeBlock{
				lang:    strings.TrimSpace(strings.TrimPrefix(line, "```")),
				line:    n,
				invalid: strings.TrimSpace(lastTxt) == "<!-- invalid -->",
			}
			body.Reset()
		case cur != nil && strings.HasPrefix(line, "```"):
			cur.text = body.String()
			blocks = append(blocks, *cur)
			cur, lastTxt = nil, line
		case cur != nil:
			body.WriteString(line + "\n")
		case strings.TrimSpace(line) != "":
			lastTxt = line
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("README.md:%d: the code block is never closed", cur.line)
	}
	return blocks
}

// runReadmeScripts writes each script (name → text) into a directory and
// runs them all as testscripts, with HOME inside each script's $WORK and
// the session's directory, $HOME/project, as the current directory: as a
// user with no configuration of their own would run them.
func runReadmeScripts(t *testing.T, scripts map[string]string) {
	t.Helper()
	dir := t.TempDir()
	for name, text := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name+".txtar"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	testscript.Run(t, testscript.Params{
		Dir:                 dir,
		RequireExplicitExec: true,
		Cmds:                map[string]func(*testscript.TestScript, bool, []string){"exits": cmdExits},
		Setup: func(env *testscript.Env) error {
			home := filepath.Join(env.WorkDir, "home")
			env.Setenv("HOME", home)
			project := filepath.Join(home, "project")
			if err := os.MkdirAll(project, 0o755); err != nil {
				return err
			}
			env.Cd = project
			return nil
		},
	})
}

// TestREADMEConfigs checks every ```toml block of the README as a config
// file of its own, with the check `acp-broker rules check` runs: each must
// pass it, and a block marked <!-- invalid --> on the line before it must
// fail it. A failing block is named by its README line.
func TestREADMEConfigs(t *testing.T) {
	scripts := make(map[string]string)
	for _, b := range readmeBlocks(t) {
		if b.lang != "toml" {
			continue
		}
		var s strings.Builder
		fmt.Fprintf(&s, "# README.md line %d: the ```toml block there, as a config file of its own.\n", b.line)
		// The variables a channel names for its secrets: a reader who
		// copies the block sets them.
		for _, v := range envNames(b.text) {
			fmt.Fprintf(&s, "env %s=set-by-the-reader\n", v)
		}
		// The programs an exec channel names in the reader's home: a
		// reader who copies the block has them (the check refuses a
		// program it cannot run).
		if programs := homePrograms(b.text); len(programs) > 0 {
			s.WriteString("exec sed -i 's#/home/me/#'$HOME'/#g' $WORK/block.toml\n")
			for _, p := range programs {
				fmt.Fprintf(&s, "exec sh -c 'mkdir -p \"$(dirname \"$1\")\" && printf \"#!/bin/sh\\n\" >\"$1\" && chmod +x \"$1\"' sh $HOME/%s\n", p)
			}
		}
		if b.invalid {
			s.WriteString("# It is marked <!-- invalid -->: the check must reject it.\n")
			s.WriteString("! exec acp-broker rules check --config $WORK/block.toml\n")
		} else {
			s.WriteString("exec acp-broker rules check --config $WORK/block.toml\n")
		}
		fmt.Fprintf(&s, "-- block.toml --\n%s", b.text)
		scripts[fmt.Sprintf("README.md-line-%d-toml", b.line)] = s.String()
	}
	if len(scripts) == 0 {
		t.Fatal("the README has no ```toml blocks: is it the README?")
	}
	runReadmeScripts(t, scripts)
}

// homePrograms returns the programs, under /home/me, that the exec channels
// of a config run, relative to /home/me.
func homePrograms(config string) []string {
	var programs []string
	for _, m := range regexp.MustCompile(`(?m)^\s*command\s*=\s*\[\s*"/home/me/([^"]+)"`).FindAllStringSubmatch(config, -1) {
		programs = append(programs, m[1])
	}
	return programs
}

// envNames returns the environment variables a config names for secrets
// (token_env = "NAME", secret_env = "NAME").
func envNames(config string) []string {
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\s*\w+_env\s*=\s*"(\w+)"`).FindAllStringSubmatch(config, -1) {
		names = append(names, m[1])
	}
	return names
}

// readmeSkips are the README's commands that no test can run here, each
// with the reason. Every entry must match a command the README shows, so
// that the list names no command the README has dropped.
var readmeSkips = []struct {
	command *regexp.Regexp
	reason  string
}{
	{regexp.MustCompile(`^\./test\.sh\b`), "runs the whole test suite, this test included"},
	{regexp.MustCompile(`^go test `), "runs fuzzing or benchmarks of the suite this test is part of"},
	{regexp.MustCompile(`^bash bench/run\.sh\b`), "runs the benchmarks: minutes of full load, measured, not checked"},
	{regexp.MustCompile(`^go install \./`), "compiles the whole binary once more and installs it into the user's GOPATH/bin; the commands here run the same main package, as this test binary, under the name acp-broker"},
	{regexp.MustCompile(`(^| )-- `), "starts a real agent, which needs its own login or API key (and, through npx, the npm registry)"},
	{regexp.MustCompile(`\b(ID|SERVER|TOOL)\b`), "a synopsis: ID, SERVER and TOOL stand for what a running session has shown"},
}

// readmeCommand is one command of a ```sh or ```console block, with the
// output the README shows for it, if any.
type readmeCommand struct {
	line    int    // in README.md
	command string // as shown, its comment removed
	output  []string
	shown   bool // the README shows its output ("$ command" lines)
}

// readmeCommands splits a shell block into its commands: "$ command"
// lines followed by their output, or else one command per line, "#"
// comments and blank lines aside.
func readmeCommands(b readmeBlock) []readmeCommand {
	lines := strings.Split(strings.TrimSuffix(b.text, "\n"), "\n")
	prompted := false
	for _, l := range lines {
		prompted = prompted || strings.HasPrefix(l, "$ ")
	}
	var cmds []readmeCommand
	for i, l := range lines {
		n := b.line + 1 + i
		switch {
		case prompted && strings.HasPrefix(l, "$ "):
			cmds = append(cmds, readmeCommand{line: n, command: strings.TrimPrefix(l, "$ "), shown: true})
		case prompted && len(cmds) > 0:
			cmds[len(cmds)-1].output = append(cmds[len(cmds)-1].output, l)
		case !prompted && strings.TrimSpace(l) != "" && !strings.HasPrefix(strings.TrimSpace(l), "#"):
			cmds = append(cmds, readmeCommand{line: n, command: stripComment(l)})
		}
	}
	return cmds
}

// stripComment removes a trailing "# comment" that follows two or more
// spaces, as the README aligns them; a "#" inside the command stays.
func stripComment(line string) string {
	if i := regexp.MustCompile(`\s{2,}#`).FindStringIndex(line); i != nil {
		line = line[:i[0]]
	}
	return strings.TrimSpace(line)
}

// runnable returns the command as the test runs it: the optional parts of
// a synopsis ("[--json]") left out, and `go run ./cmd/acp-broker` as the
// test binary, which is the same main package under the name acp-broker.
func runnable(command string) string {
	command = regexp.MustCompile(`\s*\[[^\]]*\]`).ReplaceAllString(command, "")
	return strings.Replace(command, "go run ./cmd/acp-broker", "acp-broker", 1)
}

// TestREADMECommands runs every command the README's ```sh and ```console
// blocks show, but those readmeSkips lists with its reason, as a testscript
// per block (the commands of a block in order, in one $WORK). Each must
// succeed, and where the README shows its output, print that output
// (stdout and stderr, as a terminal shows them), with /home/me standing
// for $HOME. A failing command is named by its README line.
func TestREADMECommands(t *testing.T) {
	used := make([]bool, len(readmeSkips))
	scripts := make(map[string]string)
	ran := 0
	for _, b := range readmeBlocks(t) {
		if b.lang != "sh" && b.lang != "console" {
			continue
		}
		var s strings.Builder
		var files strings.Builder
		fmt.Fprintf(&s, "# README.md line %d: the commands of the ```%s block there.\n", b.line, b.lang)
		for i, c := range readmeCommands(b) {
			run := runnable(c.command)
			skipped := false
			for j, skip := range readmeSkips {
				if skip.command.MatchString(run) {
					used[j], skipped = true, true
					t.Logf("README.md:%d: not run: %s: %s", c.line, c.command, skip.reason)
					break
				}
			}
			if skipped {
				continue
			}
			ran++
			fmt.Fprintf(&s, "\n# README.md line %d: %s\n", c.line, c.command)
			fmt.Fprintf(&s, "exec sh $WORK/command-%d.sh\n", i)
			fmt.Fprintf(&files, "-- command-%d.sh --\n%s 2>&1\n", i, run)
			if c.shown {
				fmt.Fprintf(&s, "cmpenv stdout $WORK/output-%d\n", i)
				out := strings.ReplaceAll(strings.Join(c.output, "\n"), "/home/me", "$HOME")
				fmt.Fprintf(&files, "-- output-%d --\n%s\n", i, out)
			}
		}
		if files.Len() == 0 {
			continue
		}
		scripts[fmt.Sprintf("README.md-line-%d-%s", b.line, b.lang)] = s.String() + files.String()
	}
	for j, skip := range readmeSkips {
		if !used[j] {
			t.Errorf("readmeSkips: %q matches no command in the README any more: remove it", skip.command)
		}
	}
	if ran == 0 {
		t.Fatal("no command of the README was run")
	}
	runReadmeScripts(t, scripts)
}
