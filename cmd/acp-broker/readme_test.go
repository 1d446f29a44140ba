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
// written exactly as the README shows it (its aligned comment aside), with
// the reason: a command the README gains is run unless it is added here.
// Every command listed must be in the README, so that the list names no
// command the README has dropped.
var readmeSkips = []struct {
	reason   string
	commands []string
}{
	{"runs the whole test suite, this test included", []string{
		"./test.sh",
		"./test.sh -short",
	}},
	{"fuzzes until it is stopped", []string{
		"go test -run XXX -fuzz FuzzParse ./jsonrpc",
		"go test -run XXX -fuzz FuzzMembers ./jsonrpc",
		"go test -run XXX -fuzz FuzzMayConcernTracker ./session",
		"go test -run XXX -fuzz FuzzValidate ./elicit",
		"go test -run XXX -fuzz FuzzDecideCommand ./rules",
		"go test -run XXX -fuzz FuzzReadToolCall ./rules",
	}},
	{"runs benchmarks: minutes of full load, measured, not checked", []string{
		"bash bench/run.sh",
		"go test -run '^$' -bench 'Decide$|DecideRead' -benchtime 20000x -count 5 ./rules/",
		"go test -run '^$' -bench DecideShape -benchmem ./rules/",
		"go test -run '^$' -bench Load ./rules/",
		"go test -run '^$' -bench Relay -benchmem ./session/",
	}},
	{"compiles the whole binary once more and installs it into the user's GOPATH/bin; the commands here run the same main package, as this test binary, under the name acp-broker", []string{
		"go install ./cmd/acp-broker",
	}},
	{"starts a real agent, which needs its own login or API key (and, through npx, the npm registry)", []string{
		"acp-broker -- npx -y @agentclientprotocol/claude-agent-acp",
	}},
	{"a synopsis: ID, SERVER and TOOL stand for what a running session has shown", []string{
		"acp-broker remembered revoke ID...",
		"acp-broker mcp accept SERVER [TOOL]",
		"acp-broker mcp forget SERVER [TOOL]",
	}},
}

// readmeLangs are the languages a README block may be tagged with: the
// shell blocks TestREADMECommands runs, the toml blocks TestREADMEConfigs
// checks, and the files of other programs the README shows. A block of
// another language fails TestREADMEBlocks, so that no block of commands
// goes unrun for want of a tag this test knows.
var readmeLangs = map[string]bool{
	"sh": true, "console": true, // run
	"toml": true,                                            // checked
	"json": true, "jsonc": true, "lua": true, "elisp": true, // editors' settings
	"": true, // output, a log line, a synopsis: no "$ " line
}

// TestREADMEBlocks fails on a README block TestREADMECommands would not
// run though it may hold commands (see unrunBlock).
func TestREADMEBlocks(t *testing.T) {
	for _, b := range readmeBlocks(t) {
		if err := unrunBlock(b); err != nil {
			t.Error(err)
		}
	}
}

// unrunBlock returns an error for a block in a language readmeLangs does
// not list, and for a block with no language that has a "$ " line.
func unrunBlock(b readmeBlock) error {
	switch {
	case !readmeLangs[b.lang]:
		return fmt.Errorf("README.md:%d: a ```%s block: the README tests know no such language (tag commands sh or console, or add the language to readmeLangs)", b.line, b.lang)
	case b.lang == "" && regexp.MustCompile(`(?m)^\$ `).MatchString(b.text):
		return fmt.Errorf("README.md:%d: a block with no language has \"$ \" lines, which are never run: tag it ```console", b.line)
	}
	return nil
}

// TestUnrunBlock: a block of commands that would not be run is refused.
func TestUnrunBlock(t *testing.T) {
	for _, tt := range []struct {
		b    readmeBlock
		want bool // an error
	}{
		{readmeBlock{lang: "", text: "$ acp-broker rule check\nacp-broker: error: unknown command\n"}, true},
		{readmeBlock{lang: "", text: "output\n$ acp-broker rules list\n"}, true},
		{readmeBlock{lang: "bash", text: "acp-broker init\n"}, true},
		{readmeBlock{lang: "shell-session", text: "$ acp-broker init\n"}, true},
		{readmeBlock{lang: "", text: "acp-broker [flags] -- AGENT [ARGS...]\n"}, false},
		{readmeBlock{lang: "", text: "level=WARN msg=\"costs $ 5\"\n"}, false},
		{readmeBlock{lang: "console", text: "$ acp-broker init\n"}, false},
		{readmeBlock{lang: "json", text: "{\"a\": 1}\n"}, false},
	} {
		if err := unrunBlock(tt.b); (err != nil) != tt.want {
			t.Errorf("unrunBlock(```%s %q) = %v; want an error: %v", tt.b.lang, tt.b.text, err, tt.want)
		}
	}
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
// comments and blank lines aside. In a block with "$ " lines, a line
// before the first is an error: it would be neither run nor compared.
func readmeCommands(b readmeBlock) ([]readmeCommand, error) {
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
		case prompted:
			return nil, fmt.Errorf("README.md:%d: %q comes before the block's first \"$ \" line: it is neither a command nor a command's output", n, l)
		case strings.TrimSpace(l) != "" && !strings.HasPrefix(strings.TrimSpace(l), "#"):
			cmds = append(cmds, readmeCommand{line: n, command: stripComment(l)})
		}
	}
	return cmds, nil
}

// stripComment removes a trailing "# comment" that follows two or more
// spaces, as the README aligns them; a "#" inside the command stays.
func stripComment(line string) string {
	if i := regexp.MustCompile(`\s{2,}#`).FindStringIndex(line); i != nil {
		line = line[:i[0]]
	}
	return strings.TrimSpace(line)
}

// synopsisOptions matches the optional flags a synopsis of an acp-broker
// command ends with ("[--json]", "[--project DIR]"): a flag in brackets,
// with at most a placeholder in capitals. Brackets of any other kind ("[ -f
// x ]", a glob's "[ab]") are the shell's and stay.
var synopsisOptions = regexp.MustCompile(`(\s+\[--[a-z][a-z-]*(\s+[A-Z][A-Z_]*)?\])+$`)

// runnable returns the command as the test runs it: `go run
// ./cmd/acp-broker` as the test binary, which is the same main package
// under the name acp-broker, and an acp-broker command's synopsis without
// its optional flags.
func runnable(command string) string {
	command = strings.Replace(command, "go run ./cmd/acp-broker", "acp-broker", 1)
	if strings.HasPrefix(command, "acp-broker ") {
		command = synopsisOptions.ReplaceAllString(command, "")
	}
	return command
}

// commandScript is the shell script that runs a README command: by bash,
// as a reader's shell would, with errexit and pipefail so that no failing
// part of it (a && b, a; b, a | b) passes for the whole, and with the
// stderr of every part on its stdout, as a terminal shows them in turn.
// The command is on lines of its own, so that a comment cannot swallow
// the brace.
func commandScript(run string) string {
	return "set -e -o pipefail\n{\n" + run + "\n} 2>&1\n"
}

// shownFailure reports whether the output the README shows for a command
// is that of a failure: an error of acp-broker's own.
func shownFailure(output []string) bool {
	for _, l := range output {
		if strings.HasPrefix(l, "acp-broker: error: ") {
			return true
		}
	}
	return false
}

// TestREADMECommands runs every command the README's ```sh and ```console
// blocks show, but those readmeSkips lists with its reason, as a testscript
// per block (see blockScript). A failing command is named by its README
// line.
func TestREADMECommands(t *testing.T) {
	skips := make(map[string]string) // command → reason
	for _, skip := range readmeSkips {
		for _, c := range skip.commands {
			skips[c] = skip.reason
		}
	}
	used := make(map[string]bool)
	scripts := make(map[string]string)
	ran := 0
	for _, b := range readmeBlocks(t) {
		if b.lang != "sh" && b.lang != "console" {
			continue
		}
		script, n, err := blockScript(b, skips, used, t.Logf)
		if err != nil {
			t.Error(err)
			continue
		}
		if n > 0 {
			scripts[fmt.Sprintf("README.md-line-%d-%s", b.line, b.lang)] = script
			ran += n
		}
	}
	for c := range skips {
		if !used[c] {
			t.Errorf("readmeSkips: %q is no command in the README any more: remove it", c)
		}
	}
	if ran == 0 {
		t.Fatal("no command of the README was run")
	}
	runReadmeScripts(t, scripts)
}

// blockScript returns the testscript of a shell block's commands, in
// order, in one $WORK, and how many it runs: every command but those in
// skips (command → reason), which it marks in used and logs. Each must
// succeed, but one whose shown output has an "acp-broker: error:" line,
// which must fail; where the README shows the output, the command must
// print exactly that (stdout and stderr, as a terminal shows them), with
// /home/me standing for $HOME.
func blockScript(b readmeBlock, skips map[string]string, used map[string]bool, logf func(string, ...any)) (string, int, error) {
	cmds, err := readmeCommands(b)
	if err != nil {
		return "", 0, err
	}
	var s, files strings.Builder
	fmt.Fprintf(&s, "# README.md line %d: the commands of the ```%s block there.\n", b.line, b.lang)
	ran := 0
	for i, c := range cmds {
		if reason, ok := skips[c.command]; ok {
			used[c.command] = true
			logf("README.md:%d: not run: %s: %s", c.line, c.command, reason)
			continue
		}
		ran++
		fmt.Fprintf(&s, "\n# README.md line %d: %s\n", c.line, c.command)
		exec := "exec"
		if shownFailure(c.output) {
			exec = "! exec"
		}
		fmt.Fprintf(&s, "%s bash $WORK/command-%d.sh\n", exec, i)
		fmt.Fprintf(&files, "-- command-%d.sh --\n%s", i, commandScript(runnable(c.command)))
		if c.shown {
			fmt.Fprintf(&s, "cmpenv stdout $WORK/output-%d\n", i)
			out := strings.ReplaceAll(strings.Join(c.output, "\n"), "/home/me", "$HOME")
			fmt.Fprintf(&files, "-- output-%d --\n%s\n", i, out)
		}
	}
	return s.String() + files.String(), ran, nil
}

// TestREADMEBlockScript: the script of a block runs its commands as shown
// (a failing part of a pipe fails it, the first command's stderr in a && b
// is in the output, a synopsis' optional flag is left out) and compares
// what the block shows, a failure's output included; a skipped command is
// not run; a block whose first line is not its first command is refused.
func TestREADMEBlockScript(t *testing.T) {
	block := readmeBlock{lang: "console", line: 10, text: `$ acp-broker rules list --no-such-flag | head -1
acp-broker: error: unknown flag: --no-such-flag
acp-broker: hint: see 'acp-broker rules list --help'
$ echo first >&2 && acp-broker init
first
wrote /home/me/.config/acp-broker/config.toml
$ acp-broker remembered list [--project DIR] [--json]
ID  DECISION  MATCHES  SCOPE  LEARNED  AGENT  FROM
$ go test -run XXX -fuzz FuzzParse ./jsonrpc
$ acp-broker rules explain --command 'npm test -- --watch=false' | grep '^decision:'
decision: ask
`}
	used := make(map[string]bool)
	skips := map[string]string{
		"go test -run XXX -fuzz FuzzParse ./jsonrpc":                 "fuzzes",
		"acp-broker -- npx -y @agentclientprotocol/claude-agent-acp": "a real agent", // and not every command with a " -- "
	}
	script, ran, err := blockScript(block, skips, used, t.Logf)
	if err != nil || ran != 4 || !used["go test -run XXX -fuzz FuzzParse ./jsonrpc"] {
		t.Fatalf("blockScript = %d commands run, skip used %v, %v; want 4, true, nil", ran, used, err)
	}
	for _, want := range []string{"! exec bash $WORK/command-0.sh\n", "\nexec bash $WORK/command-1.sh\n", "\nexec bash $WORK/command-2.sh\n"} {
		if !strings.Contains(script, want) {
			t.Errorf("the script has no %q:\n%s", want, script)
		}
	}
	runReadmeScripts(t, map[string]string{"block": script})

	block.text = "acp-broker init\n" + block.text
	if _, _, err := blockScript(block, skips, used, t.Logf); err == nil || !strings.Contains(err.Error(), "README.md:11:") {
		t.Errorf("a line before the first \"$ \" line: blockScript's error is %v, want one naming README.md:11", err)
	}
}

// TestRunnable: a synopsis' optional flags are left out of an acp-broker
// command, and the shell's own brackets stay.
func TestRunnable(t *testing.T) {
	for _, tt := range []struct{ command, want string }{
		{"acp-broker remembered list [--project DIR] [--json]", "acp-broker remembered list"},
		{"go run ./cmd/acp-broker rules list [--json]", "acp-broker rules list"},
		{"go run ./cmd/acp-broker demo", "acp-broker demo"},
		{"[ -f ~/.bashrc ] && acp-broker completion bash", "[ -f ~/.bashrc ] && acp-broker completion bash"},
		{"acp-broker rules explain --path 'src/[ab].go'", "acp-broker rules explain --path 'src/[ab].go'"},
		{"ls [--a-z]*", "ls [--a-z]*"},
		{"acp-broker mcp accept SERVER [TOOL]", "acp-broker mcp accept SERVER [TOOL]"},
	} {
		if got := runnable(tt.command); got != tt.want {
			t.Errorf("runnable(%q) = %q, want %q", tt.command, got, tt.want)
		}
	}
}
