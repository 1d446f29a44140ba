package rules

import (
	"bytes"
	"encoding/json"
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
	// Shape is what the request carried, "path" or "title" (neither a
	// command, a path, a URL nor an MCP call), for entries that hold the
	// request's Kind too: a remembered allow then covers only requests of
	// that kind and shape. Entries written before Shape existed have none;
	// a title entry without one is read as shape "title" of any kind.
	Shape string `toml:"shape,omitempty" json:"shape,omitempty"`
	Kind  string `toml:"kind,omitempty" json:"kind,omitempty"`

	// Where it came from.
	Agent     string `toml:"agent,omitempty" json:"agent,omitempty"`
	By        string `toml:"by,omitempty" json:"by,omitempty"`
	LearnedAt string `toml:"learned_at" json:"learned_at"`
	Request   string `toml:"request,omitempty" json:"request,omitempty"`
}

// Matches describes what the entry matches, for listings, the audit log and
// the prompts that offer "always".
func (e Entry) Matches() string {
	kind := ""
	if e.Shape != "" && e.Decision == Allow {
		kind = fmt.Sprintf(" (kind %q only)", e.Kind)
	}
	switch {
	case e.Command != "":
		prefix, ok := strings.CutSuffix(e.Command, " *")
		switch {
		case !ok || e.Decision != Allow:
			return "command " + e.Command
		case !prefixKnown(ParseShell(prefix).Commands):
			// Learned by an older broker: no longer a prefix it stands for.
			return "command " + e.Command + " (covers nothing: not a known subcommand)"
		}
		return "command " + e.Command + " (not options that run code or write elsewhere)"
	case e.Path != "":
		return "path " + e.Path + kind
	case e.MCP != "":
		return "mcp " + e.MCP
	case e.Domain != "":
		return "domain " + e.Domain
	}
	if e.Decision != Allow {
		return fmt.Sprintf("tool %q titled %q", e.Tool, e.Title)
	}
	return fmt.Sprintf("tool %q titled %q%s, with no command, path, URL or MCP call", e.Tool, e.Title, kind)
}

// key identifies what an entry decides, so duplicates merge.
func (e Entry) key() string {
	return strings.Join([]string{string(e.Decision), e.Scope, e.Project, e.Session, e.Command, e.Path, e.MCP, e.Domain, e.Tool, e.Title, e.Shape, e.Kind}, "\x00")
}

// commandPrefix derives the pattern remembered for one simple command: the
// program and its subcommand as a prefix (`git push origin main` → `git push
// *`, `npm run test -- --watch` → `npm run test *`) for the programs and
// subcommands of subcommandPrograms only, and only when nothing the user saw
// after the prefix runs code or writes elsewhere; else the exact command.
// It reports false for a command that cannot be remembered at all.
func commandPrefix(c SimpleCommand) (string, bool) {
	if len(c.Opaque) > 0 || len(c.Argv) == 0 || len(c.Assigns) > 0 || len(c.Redirects) > 0 {
		return "", false
	}
	exact := quoteWords(c.Argv)
	subs, ok := subcommandPrograms[c.Argv[0]]
	if !ok || len(c.Argv) < 2 {
		// A program given by path, a shell, an interpreter, a wrapper, a
		// file writer (`cp README.md *` would cover .git/hooks): exact.
		return exact, true
	}
	sub, ok := subs[c.Argv[1]]
	if !ok {
		// `git config user.email x`: `git config *` would also set
		// core.fsmonitor, which runs a program.
		return exact, true
	}
	words := 2
	if sub.runner {
		if len(c.Argv) < 3 || !plainWord(c.Argv[2]) {
			return exact, true
		}
		words = 3
	}
	if words == len(c.Argv) || !prefixCovers(c.Argv, words) {
		// The user saw nothing after the subcommand (`git status` stays
		// `git status`), or saw an option a prefix must not stand for.
		return exact, true
	}
	return quoteWords(c.Argv[:words]) + " *", true
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
			out = append(out, Entry{Decision: decision, Path: p.Abs, Shape: "path", Kind: req.Kind})
		}
	case len(req.Paths) > 0:
		// A read or search of a path: the title would stand for any path.
		return nil, fmt.Sprintf("a %q request is remembered only for edits, moves and deletes of a path", req.Kind)
	default:
		if req.ToolName == "" && req.Title == "" {
			return nil, "the request names no tool and has no title"
		}
		out = append(out, Entry{Decision: decision, Tool: req.ToolName, Title: req.Title, Shape: "title", Kind: req.Kind})
	}
	return slices.CompactFunc(out, func(a, b Entry) bool { return a.key() == b.key() }), ""
}

// SameRequest reports whether two readings of a tool call ask the same
// thing: kind, tool, title, commands, paths (as given, absolute and
// resolved), URLs, MCP tool, and what could not be read. "Always" is
// remembered only when the tool call the human answered is the one the
// decision was made on.
func SameRequest(a, b *Request) bool {
	fa, errA := a.fingerprint()
	fb, errB := b.fingerprint()
	return errA == nil && errB == nil && bytes.Equal(fa, fb)
}

func (r *Request) fingerprint() ([]byte, error) {
	urls := make([]string, len(r.URLs))
	for i, u := range r.URLs {
		urls[i] = u.Raw
	}
	return json.Marshal(struct {
		Kind, ToolName, Title string
		Script                *Script
		Paths                 []PathAccess
		URLs                  []string
		MCP                   *MCPTool
		NotUnderstood         []string
		Conflicts             []string
	}{r.Kind, r.ToolName, r.Title, r.Script, r.Paths, urls, r.MCP, r.NotUnderstood, r.Conflicts})
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
		if prefix, ok := strings.CutSuffix(e.Command, " *"); ok && e.Decision == Allow {
			// What the prefix stands for is checked on every command it
			// matches, by the programs table.
			// A prefix that is not one simple command covers nothing.
			r.prefixWords = 1
			if words := ParseShell(prefix).Commands; len(words) == 1 && len(words[0].Argv) > 1 {
				r.prefixWords = len(words[0].Argv)
			}
		}
	case e.Path != "":
		if !filepath.IsAbs(e.Path) {
			return nil, fmt.Errorf("entry %s: path %q is not absolute", e.ID, e.Path)
		}
		p, err := compilePathPattern(escapeGlob(filepath.Clean(e.Path)))
		if err != nil {
			return nil, fmt.Errorf("entry %s: %v", e.ID, err)
		}
		r.Paths = []*pathPattern{p}
		if e.Shape != "" && e.Decision == Allow {
			r.Kinds = []string{e.Kind}
		}
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
		if e.Decision == Allow {
			// Only requests that carry nothing but a tool and a title: not
			// a fetch or an MCP call that happens to have the same title.
			r.toolOnly = true
			if e.Shape != "" {
				r.Kinds = []string{e.Kind}
			}
		}
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
