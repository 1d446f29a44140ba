package rules

import (
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
)

// Remembered is the layer of answers the human gave with an "always"
// option. Its allow rules rank below every written ask or deny, never open a
// protected path and never answer a switch_mode request; its rejects act as
// deny rules.
const Remembered Layer = "remembered"

// Entry is one remembered decision: narrow and explicit, one matcher each.
type Entry struct {
	ID       string   `toml:"id" json:"id"`
	Decision Decision `toml:"decision" json:"decision"`
	// Scope is "session", "project" or "user"; Project is the project root
	// a project entry applies to.
	Scope   string `toml:"scope" json:"scope"`
	Project string `toml:"project,omitempty" json:"project,omitempty"`
	Session string `toml:"session,omitempty" json:"session,omitempty"`

	// Exactly one of these describes what the entry matches (Tool and Title
	// go together).
	Command string `toml:"command,omitempty" json:"command,omitempty"`
	Path    string `toml:"path,omitempty" json:"path,omitempty"`
	MCP     string `toml:"mcp,omitempty" json:"mcp,omitempty"`
	Domain  string `toml:"domain,omitempty" json:"domain,omitempty"`
	Tool    string `toml:"tool,omitempty" json:"tool,omitempty"`
	Title   string `toml:"title,omitempty" json:"title,omitempty"`

	// Where it came from.
	Agent     string `toml:"agent,omitempty" json:"agent,omitempty"`
	By        string `toml:"by,omitempty" json:"by,omitempty"`
	LearnedAt string `toml:"learned_at" json:"learned_at"`
	Request   string `toml:"request,omitempty" json:"request,omitempty"`
}

// Matches describes what the entry matches, for listings.
func (e Entry) Matches() string {
	switch {
	case e.Command != "":
		return "command " + e.Command
	case e.Path != "":
		return "path " + e.Path
	case e.MCP != "":
		return "mcp " + e.MCP
	case e.Domain != "":
		return "domain " + e.Domain
	}
	return fmt.Sprintf("tool %q titled %q", e.Tool, e.Title)
}

// key identifies what an entry decides, so duplicates merge.
func (e Entry) key() string {
	return strings.Join([]string{string(e.Decision), e.Scope, e.Project, e.Session, e.Command, e.Path, e.MCP, e.Domain, e.Tool, e.Title}, "\x00")
}

// exactPrograms are programs for which a prefix would mean "anything":
// shells, interpreters and programs that run other programs. Only the exact
// command is remembered for them.
var exactPrograms = []string{
	"sh", "bash", "zsh", "dash", "ksh", "fish", "python", "python2", "python3", "node", "nodejs", "deno", "bun",
	"ruby", "perl", "php", "lua", "env", "sudo", "doas", "su", "xargs", "npx", "pnpx", "bunx", "eval", "exec",
	"source", ".", "command", "builtin", "nohup", "nice", "timeout", "time", "watch", "ssh", "docker", "kubectl",
}

// runners are programs whose subcommand takes a name that matters as much:
// `npm run test` is remembered as `npm run test *`, not `npm run *`.
var runners = map[string][]string{
	"npm": {"run", "exec"}, "pnpm": {"run", "exec"}, "yarn": {"run", "exec"}, "bun": {"run"},
	"cargo": {"run"}, "go": {"run", "tool"}, "uv": {"run"}, "poetry": {"run"}, "make": nil,
}

// commandPrefix derives the pattern remembered for one simple command: the
// program and its subcommand as a prefix (`git push origin main` → `git push
// *`), or the exact command where a prefix would allow more than the user
// saw. It reports false for a command that cannot be remembered at all.
func commandPrefix(c SimpleCommand) (string, bool) {
	if len(c.Opaque) > 0 || len(c.Argv) == 0 || len(c.Assigns) > 0 || len(c.Redirects) > 0 {
		return "", false
	}
	prog := c.Argv[0]
	exact := quoteWords(c.Argv)
	if strings.Contains(prog, "/") || slices.Contains(exactPrograms, strings.ToLower(prog)) || len(c.Argv) == 1 || isPythonVersion(prog) {
		return exact, true
	}
	sub := c.Argv[1]
	if !plainWord(sub) {
		// `ls -la`, `git -c x status`: no subcommand to stand for the rest.
		return exact, true
	}
	words := []string{prog, sub}
	if names, ok := runners[prog]; ok && slices.Contains(names, sub) {
		if len(c.Argv) < 3 || !plainWord(c.Argv[2]) {
			return exact, true
		}
		words = append(words, c.Argv[2])
	}
	if len(words) == len(c.Argv) {
		// The user saw nothing after the subcommand: `git status` stays
		// `git status`, not `git status *`.
		return exact, true
	}
	return quoteWords(words) + " *", true
}

func isPythonVersion(prog string) bool {
	return strings.HasPrefix(prog, "python") || strings.HasPrefix(prog, "pypy")
}

// plainWord is a subcommand-looking word: no flag, no path, no glob.
func plainWord(w string) bool {
	return w != "" && !strings.HasPrefix(w, "-") && !strings.ContainsAny(w, "/=*?[]{}~$`\\'\"") && !strings.HasPrefix(w, ".")
}

// quoteWords writes argv as a command pattern that matches exactly it.
func quoteWords(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		if w != "" && !strings.ContainsAny(w, " \t\n'\"\\*?[]") {
			out[i] = w
			continue
		}
		out[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}

// Derive works out what to remember when the human answers a request
// "always": one entry per simple command, the exact path of an edit, move or
// delete, the MCP server and tool, the domain of a fetch, or else the tool
// name and exact title. It returns no entries, and why, for a request it
// cannot see through.
func Derive(req *Request, decision Decision) ([]Entry, string) {
	if len(req.NotUnderstood) > 0 || len(req.Conflicts) > 0 {
		return nil, "the request cannot be read exactly"
	}
	if req.Kind == "switch_mode" {
		return nil, "mode switches are never remembered"
	}
	var out []Entry
	switch {
	case req.Script != nil:
		if len(req.Script.Opaque) > 0 {
			return nil, "the command cannot be seen through: " + strings.Join(req.Script.Opaque, "; ")
		}
		for _, c := range req.Script.Commands {
			pattern, ok := commandPrefix(c)
			if !ok {
				return nil, fmt.Sprintf("%q cannot be seen through", strings.Join(c.Argv, " "))
			}
			out = append(out, Entry{Decision: decision, Command: pattern})
		}
	case req.MCP != nil:
		out = append(out, Entry{Decision: decision, MCP: req.MCP.String()})
	case len(req.URLs) > 0:
		for _, u := range req.URLs {
			if u.URL == nil || u.URL.User != nil {
				return nil, fmt.Sprintf("the URL %q cannot be remembered", u.Raw)
			}
			out = append(out, Entry{Decision: decision, Domain: u.URL.Hostname()})
		}
	case len(req.Paths) > 0 && slices.Contains([]string{"edit", "move", "delete"}, req.Kind):
		for _, p := range req.Paths {
			out = append(out, Entry{Decision: decision, Path: p.Abs})
		}
	default:
		if req.ToolName == "" && req.Title == "" {
			return nil, "the request names no tool and has no title"
		}
		out = append(out, Entry{Decision: decision, Tool: req.ToolName, Title: req.Title})
	}
	return slices.CompactFunc(out, func(a, b Entry) bool { return a.key() == b.key() }), ""
}

// rule turns an entry into the rule it stands for.
func (e Entry) rule(file string) (*Rule, error) {
	r := &Rule{ID: e.ID, Decision: e.Decision, Layer: Remembered, File: file,
		Reason: fmt.Sprintf("remembered from %q (%s)", e.Request, e.LearnedAt)}
	if e.Decision != Allow && e.Decision != Deny {
		return nil, fmt.Errorf("entry %s: decision %q", e.ID, e.Decision)
	}
	switch {
	case e.Command != "":
		p, err := compileCommandPattern(e.Command)
		if err != nil {
			return nil, fmt.Errorf("entry %s: %v", e.ID, err)
		}
		r.Commands = []*commandPattern{p}
	case e.Path != "":
		if !filepath.IsAbs(e.Path) {
			return nil, fmt.Errorf("entry %s: path %q is not absolute", e.ID, e.Path)
		}
		p, err := compilePathPattern(escapeGlob(filepath.Clean(e.Path)))
		if err != nil {
			return nil, fmt.Errorf("entry %s: %v", e.ID, err)
		}
		r.Paths = []*pathPattern{p}
	case e.MCP != "":
		g, err := compileGlob(escapeGlob(e.MCP))
		if err != nil {
			return nil, fmt.Errorf("entry %s: %v", e.ID, err)
		}
		r.MCP = []*glob{g}
	case e.Domain != "":
		if _, err := url.Parse("https://" + e.Domain + "/"); err != nil {
			return nil, fmt.Errorf("entry %s: domain %q", e.ID, e.Domain)
		}
		p, err := compileURLPattern("domain:" + e.Domain)
		if err != nil {
			return nil, fmt.Errorf("entry %s: %v", e.ID, err)
		}
		// A remembered domain is that host only, not its subdomains.
		p.exactHost = true
		r.URLs = []*urlPattern{p}
	default:
		tool, err := compileGlob(escapeGlob(e.Tool))
		if err != nil {
			return nil, err
		}
		title, err := compileGlob(escapeGlob(e.Title))
		if err != nil {
			return nil, err
		}
		r.Tools, r.Titles = []*glob{tool}, []*glob{title}
	}
	return r, nil
}

// appliesTo reports whether an entry applies in a project directory.
func (e Entry) appliesTo(projectDir string) bool {
	switch e.Scope {
	case "user":
		return true
	case "project":
		return projectDir != "" && filepath.Clean(e.Project) == filepath.Clean(projectDir)
	}
	return false
}
