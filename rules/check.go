package rules

import (
	"encoding/json"
	"fmt"
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
// the ones that fail, and how many ran.
func (p *Policy) CheckExamples(ctx Context) (failures []ExampleFailure, ran int) {
	for _, r := range p.Rules {
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
			if strings.HasPrefix(re.String(), "^(?:.*") || strings.HasPrefix(re.String(), "^(?:.+") {
				warnings = append(warnings, fmt.Sprintf("%s: command_regex %q starts with a wildcard and can match any program", r.Where(), strings.TrimSuffix(strings.TrimPrefix(re.String(), "^(?:"), ")$")))
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
		regexes = append(regexes, strings.TrimSuffix(strings.TrimPrefix(re.String(), "^(?:"), ")$"))
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
