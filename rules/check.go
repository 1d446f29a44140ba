package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Matches reports whether a rule speaks for every action of a request: what
// a rule's examples must do and its counterexamples must not.
func (p *Policy) Matches(r *Rule, req *Request) bool {
	if !p.requestMatches(r, req) {
		return false
	}
	for _, a := range req.actions() {
		if !p.covers(r, req, a, r.Decision != Allow) {
			return false
		}
	}
	return true
}

// ExampleRequest reads a rule example as the engine would read a request:
// a command becomes an execute tool call with that command.
func ExampleRequest(ex Example, ctx Context) *Request {
	if ex.ToolCall != nil {
		return ReadToolCall(ex.ToolCall, ctx)
	}
	cmd, _ := json.Marshal(map[string]string{"command": ex.Text})
	return ReadToolCall(map[string]json.RawMessage{"kind": json.RawMessage(`"execute"`), "rawInput": cmd}, ctx)
}

// ExampleFailure is an example its rule does not match, or a counterexample
// it does.
type ExampleFailure struct {
	Rule    *Rule
	Example Example
	Counter bool
	// Decision is what the whole policy decides for the example.
	Decision Verdict
}

func (f ExampleFailure) String() string {
	what := f.Example.Text
	if what == "" {
		b, _ := json.Marshal(f.Example.ToolCall)
		what = string(b)
	}
	if f.Counter {
		return fmt.Sprintf("%s:%d: rule %s matches its counterexample %s", f.Rule.File, f.Example.Line, f.Rule.Name(), what)
	}
	return fmt.Sprintf("%s:%d: rule %s does not match its example %s (the policy decides %s)", f.Rule.File, f.Example.Line, f.Rule.Name(), what, f.Decision.Decision)
}

// CheckExamples runs every rule's examples and counterexamples and returns
// the ones that fail, and how many ran. A project file's examples are of a
// session in its own directory, as its ./ is.
func (p *Policy) CheckExamples(sessionCtx Context) (failures []ExampleFailure, ran int) {
	for _, r := range p.Rules {
		ctx := r.context(sessionCtx)
		for _, ex := range r.Examples {
			ran++
			req := ExampleRequest(ex, ctx)
			if !p.Matches(r, req) {
				failures = append(failures, ExampleFailure{Rule: r, Example: ex, Decision: p.Decide(req)})
			}
		}
		for _, ex := range r.Counterexamples {
			ran++
			req := ExampleRequest(ex, ctx)
			if p.Matches(r, req) {
				failures = append(failures, ExampleFailure{Rule: r, Example: ex, Counter: true, Decision: p.Decide(req)})
			}
		}
	}
	return failures, ran
}

// argumentReaders are programs that read (or copy, or send) files named as
// arguments: an allow rule for any arguments hands out any file, however
// the rules protect paths.
var argumentReaders = []string{
	"cat", "head", "tail", "less", "more", "bat", "grep", "egrep", "rg", "ag", "sed", "awk", "cut",
	"sort", "uniq", "wc", "diff", "cmp", "strings", "od", "xxd", "hexdump", "base64", "cp", "mv",
	"rsync", "scp", "tar", "zip", "gzip", "jq", "yq", "curl", "wget",
}

// flagRunners are programs that some flags or arguments turn into something
// that runs code or writes anywhere (git -c alias, find -delete, sed -i,
// npm run, make targets...): an allow rule for any arguments allows that too.
var flagRunners = []string{
	"git", "find", "sed", "awk", "npm", "npx", "pnpm", "yarn", "make", "go", "cargo", "pip", "tar",
	"rsync", "ssh", "docker", "kubectl", "terraform", "vim", "vi", "nvim", "less", "man",
}

// BlindSpots warns about allow rules that open one of the engine's known
// blind spots.
func (p *Policy) BlindSpots() []string {
	var warnings []string
	for _, r := range p.Rules {
		if r.Decision != Allow {
			continue
		}
		for _, c := range r.Commands {
			prog, ok := c.program()
			if !ok || !c.rest || len(c.words) != 1 {
				continue
			}
			if slices.Contains(argumentReaders, prog) {
				warnings = append(warnings, fmt.Sprintf("%s: allow rule %q lets the agent read any file it names, including files reached by recursion or globbing; protected paths named outright are still asked", r.Where(), c.src))
			}
			if slices.Contains(flagRunners, prog) {
				warnings = append(warnings, fmt.Sprintf("%s: allow rule %q allows every %s subcommand and flag, including ones that run code or write anywhere; allow the subcommands you mean (%q)", r.Where(), c.src, prog, prog+" status"))
			}
		}
		for _, re := range r.CommandRegex {
			if src := regexSource(re); strings.HasPrefix(src, ".*") || strings.HasPrefix(src, ".+") {
				warnings = append(warnings, fmt.Sprintf("%s: command_regex %q starts with a wildcard and can match any program", r.Where(), src))
			}
		}
	}
	servers := make([]string, 0, len(p.mcpTrust))
	for server, trusted := range p.mcpTrust {
		if trusted && !p.MCPProxy(server) {
			servers = append(servers, server)
		}
	}
	slices.Sort(servers)
	for _, server := range servers {
		warnings = append(warnings, fmt.Sprintf("[mcp.%s] trust_annotations has no effect: the server is not proxied (proxy = false), so its annotations are never seen", server))
	}
	return warnings
}

// Matcher is one of a rule's action and name matchers, as written.
type Matcher struct {
	Name     string
	Patterns []string
}

// Matchers lists the rule's matchers other than kind and modes.
func (r *Rule) Matchers() []Matcher {
	var out []Matcher
	add := func(name string, srcs []string) {
		if len(srcs) > 0 {
			out = append(out, Matcher{name, srcs})
		}
	}
	add("tool", globSources(r.Tools))
	add("mcp", globSources(r.MCP))
	add("title", globSources(r.Titles))
	var cmds, regexes, paths, urls []string
	for _, c := range r.Commands {
		cmds = append(cmds, c.src)
	}
	for _, re := range r.CommandRegex {
		regexes = append(regexes, regexSource(re))
	}
	for _, p := range r.Paths {
		paths = append(paths, p.src)
	}
	for _, u := range r.URLs {
		urls = append(urls, u.src)
	}
	add("command", cmds)
	add("command_regex", regexes)
	add("path", paths)
	add("url", urls)
	return out
}

func globSources(gs []*glob) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.src)
	}
	return out
}

// Severity is how bad a Problem is: an error is a set-up the broker would
// refuse to start with, or one that fails when it is used; a warning is one
// that works but never does what it says.
type Severity string

const (
	Warning Severity = "warning"
	Error   Severity = "error"
)

// Problem is a mistake in a set-up that parses: one `rules check` reports so
// that it is found before the broker runs, not in the first hour of use.
type Problem struct {
	Severity Severity
	// Where is file:line, or "" for the set-up as a whole.
	Where string
	Msg   string
	Hint  string
}

func (p Problem) String() string {
	if p.Where == "" {
		return p.Msg
	}
	return p.Where + ": " + p.Msg
}

// Environment is what the broker will start with, as far as a set-up depends
// on it.
type Environment struct {
	Getenv   func(string) string
	LookPath func(string) (string, error)
	// UserConfig is where the user config is looked for.
	UserConfig string
}

// Problems finds the set-up's mistakes that parse: what makes the broker
// refuse to start (a channel's secret unset, route = "channels" with no
// channel), fail when used (an exec channel whose program cannot run),
// confuse the audit log (duplicate rule ids), or never do what it says (an
// allow rule that can never allow a command, channels never asked).
func (p *Policy) Problems(env Environment) []Problem {
	var out []Problem
	add := func(sev Severity, where, hint, format string, args ...any) {
		out = append(out, Problem{Severity: sev, Where: where, Msg: fmt.Sprintf(format, args...), Hint: hint})
	}
	if !slices.ContainsFunc(p.Files, func(f *File) bool { return f.Layer == User }) {
		add(Warning, "", "run `acp-broker init` to write a commented starter config there",
			"no user config (%s): only the built-in defaults and the project's rules apply", env.UserConfig)
	}
	out = append(out, p.duplicateIDs()...)
	for _, r := range p.Rules {
		if r.Decision == Allow && slices.Contains(r.Kinds, "execute") && len(r.Commands) == 0 && len(r.CommandRegex) == 0 {
			add(Warning, r.Where(), `name the commands it allows: command = "make test" (or command_regex); kind = "execute" alone matches no command`,
				"allow rule %s names kind \"execute\" but no command or command_regex: it can never allow a command, since an allow rule covers a command only through those (requests for commands stay asked)", r.Name())
		}
	}
	cfg, channels := p.AskSettings()
	askAt := func(key string) string {
		if at := cfg.where(key); at != "" || len(channels) == 0 {
			return at
		}
		return channels[0].Where()
	}
	for _, c := range channels {
		where := c.Where()
		switch c.Type {
		case "exec":
			if _, err := env.LookPath(c.Command[0]); err != nil {
				add(Error, where, "give the program's full path, or install it in a directory of the PATH the broker starts with",
					"%s: its command %q cannot be run (%s): every prompt to it would fail", c, c.Command[0], notRunnable(c.Command[0], err, env))
			} else if !filepath.IsAbs(c.Command[0]) && strings.Contains(c.Command[0], "/") {
				add(Warning, where, "give the program's full path",
					"%s: its command %q is relative to the directory the broker is started in, which is the editor's choice, not this one", c, c.Command[0])
			}
		case "ntfy":
			if c.TokenEnv != "" && env.Getenv(c.TokenEnv) == "" {
				add(Error, where, fmt.Sprintf("set %s in the environment your editor starts acp-broker with (it may differ from this shell's), or remove token_env for a public server", c.TokenEnv),
					"%s: the environment variable %s (token_env) is not set: the broker would refuse to start", c, c.TokenEnv)
			}
		case "webhook":
			if env.Getenv(c.SecretEnv) == "" {
				add(Error, where, fmt.Sprintf("set %s in the environment your editor starts acp-broker with (it may differ from this shell's)", c.SecretEnv),
					"%s: the environment variable %s (secret_env) is not set: the broker would refuse to start", c, c.SecretEnv)
			}
		}
	}
	switch {
	case cfg.Route == "channels" && len(channels) == 0:
		add(Error, askAt("route"), `add a [[channel]] table, or route = "editor"`,
			`[ask] route = "channels", but no [[channel]] is configured: the broker would refuse to start`)
	case cfg.Route == "both" && cfg.EscalateAfter > 0 && len(channels) == 0:
		add(Error, askAt("escalate_after"), `add a [[channel]] table, or remove escalate_after`,
			`[ask] route = "both" with escalate_after, but no [[channel]] is configured: the broker would refuse to start`)
	case cfg.Route == "both" && len(channels) == 0:
		add(Warning, askAt("route"), `add a [[channel]] table, or route = "editor"`,
			`[ask] route = "both", but no [[channel]] is configured: only the editor is asked`)
	case cfg.Route == "editor" && cfg.EscalateAfter > 0 && len(channels) == 0:
		add(Warning, askAt("escalate_after"), "add a [[channel]] table, or remove escalate_after",
			"[ask] escalate_after = %q, but no [[channel]] is configured: nothing is escalated to", cfg.EscalateAfter)
	case cfg.Route == "editor" && cfg.EscalateAfter == 0 && len(channels) > 0:
		add(Warning, askAt("route"), `set route = "both" to ask them with the editor, or escalate_after = "2m" to ask them when the editor has not answered by then`,
			"%d [[channel]] configured, but [ask] route is \"editor\" with no escalate_after: the channels are never asked", len(channels))
	case cfg.Route == "editor" && cfg.EscalateAfter > 0 && cfg.Timeout > 0 && cfg.Timeout <= cfg.EscalateAfter:
		add(Warning, askAt("timeout"), "make timeout longer than escalate_after",
			"[ask] timeout = %q is not longer than escalate_after = %q: a request is rejected before the channels are asked", cfg.Timeout, cfg.EscalateAfter)
	}
	return out
}

// notRunnable says why exec.LookPath did not find a program: for a name it
// looked up in PATH, a file of that name there that is not executable is
// named, since LookPath passes over it in silence.
func notRunnable(name string, err error, env Environment) string {
	if !strings.Contains(name, "/") {
		for _, dir := range filepath.SplitList(env.Getenv("PATH")) {
			if dir == "" {
				continue
			}
			path := filepath.Join(dir, name)
			if fi, statErr := os.Stat(path); statErr == nil && !fi.IsDir() && fi.Mode()&0o111 == 0 {
				return path + " is not executable"
			}
		}
	}
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err.Error()
	}
	return err.Error()
}

// duplicateIDs reports each rule id given to more than one rule: the audit
// log, explain and list name a rule by its id, which must then say which.
// Within one file, or among the user's own layers, it is an error; where a
// project file reuses an id of another file (a starter id, say) only a
// warning, since a repository must not make every user's check fail.
func (p *Policy) duplicateIDs() []Problem {
	var out []Problem
	seen := map[string][]*Rule{}
	for _, r := range p.Rules {
		if r.ID == "" || r.Layer == Remembered {
			continue
		}
		earlier := seen[r.ID]
		seen[r.ID] = append(earlier, r)
		if len(earlier) == 0 {
			continue
		}
		first, severity := earlier[0], Warning
		for _, e := range earlier {
			if e.File == r.File || (e.Layer != Project && r.Layer != Project) {
				first, severity = e, Error
				break
			}
		}
		out = append(out, Problem{Severity: severity, Where: r.Where(), Hint: "give each rule its own id",
			Msg: fmt.Sprintf("rule id %q is already used at %s: the audit log and explain would not say which rule decided", r.ID, first.Where())})
	}
	return out
}
