package rules

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/acp-broker/acp-broker/internal/shellwrap"
	"github.com/acp-broker/acp-broker/jsonrpc"
)

// Context is what the broker knows of the session a request belongs to.
type Context struct {
	// Cwd and Roots are the session's own directories, its cwd and
	// additionalDirectories from session/new, load, resume or fork: what
	// `./` and accept-edits mean. A request's own cwd never moves them.
	Cwd   string
	Roots []string
	// Dir, when not empty, is where the session's agent works instead of
	// Cwd: a subagent the agent placed outside its root session's
	// directories (see ForSubagent). Relative paths are made absolute
	// there, and, like a request's own rawInput.cwd outside the session's
	// directories, it is an access of its own in every request.
	Dir string
	// MCPServers are the names of the MCP servers the editor passed to the
	// session, used to tell server from tool in names like "github_get_issue".
	MCPServers []string
	Home       string // the user's home directory, for ~
	Mode       string // the broker's permission mode, for rules with modes
	// Session holds the answers remembered for this session only.
	Session []*Rule
	// MCPHints, if not nil, tells what the broker learned of an MCP tool
	// from its server (through the MCP proxy).
	MCPHints func(server, tool string) ToolHints
}

// ToolHints is what an MCP server said of one of its tools, checked against
// what it said the first time.
type ToolHints struct {
	Known bool // the server has listed the tool
	// ReadOnly is readOnlyHint true and destructiveHint not true, as pinned.
	ReadOnly bool
	// Changed says how the tool's annotations or description differ from
	// the pinned ones; empty when they do not.
	Changed string
}

// Request is a permission request read into everything it would do.
type Request struct {
	Kind     string // the kind the agent claims, "" when absent
	ToolName string
	Title    string

	// Script is the shell command the request carries, nil when none.
	Script        *Script
	CommandSource string // where the command was read from
	// Command is the command exactly as the request gave it, for telling
	// whether two requests run the same command.
	Command GivenCommand

	// Dir is the directory the request acts in: its relative paths and
	// command arguments are made absolute against it. It is the session's
	// directory unless the request names its own (Codex's rawInput.cwd,
	// terminal/create's cwd); a directory of its own outside the session's
	// directories is then one more access the rules must allow (a
	// PathAccess with WorkDir set).
	Dir string

	Paths []PathAccess
	URLs  []URLAccess
	MCP   *MCPTool

	// NotUnderstood lists what could not be read. Such a request is never
	// allowed: it goes to the human, unless a deny rule matches what was read.
	NotUnderstood []string
	// Conflicts lists where the request's sources disagree (its title and
	// its input, or two names for its tool). Such a request is never allowed.
	Conflicts []string
	// UnreadPaths are rawInput members the broker does not read whose name
	// and value look like a path (a move's "destination", "target_dir"):
	// what the request writes may be there, so accept-edits does not allow
	// it.
	UnreadPaths []string

	ctx Context
	// reading is what the reading sees of the file system, while it reads;
	// a Request kept for later holds none (see fileView).
	reading *fileView
}

// PathAccess is one file the request would read or write.
type PathAccess struct {
	Given    string // as the agent wrote it
	Abs      string // absolute and clean
	Resolved string // Abs with symbolic links followed
	Write    bool
	From     string // which field named it
	// WorkDir marks the directory a request says it runs in, when it is
	// outside the session's directories: a command there may write
	// whatever it likes below it, so it counts as a write.
	WorkDir bool
	// onlyLocations is set when only the tool call's locations name the
	// path: then it may be one of the command's own arguments (see
	// coveredByCommand).
	onlyLocations bool
}

// GivenCommand is a command as a request gave it: one shell string (Line)
// or an argv (Argv).
type GivenCommand struct {
	Line string
	Argv []string
}

// URLAccess is one URL the request would fetch.
type URLAccess struct {
	Raw string
	URL *url.URL // nil when it does not parse
}

// MCPTool is the MCP server and tool a request calls.
type MCPTool struct{ Server, Tool string }

func (m *MCPTool) String() string { return m.Server + "/" + m.Tool }

// ReadToolCall reads a tool call (the merged view of a permission request's
// toolCall and the session/update notifications about it) into a Request.
// Decoding is exact: a duplicated key, keys that differ only in case, or a
// field of the wrong type make the request not understood.
func ReadToolCall(fields map[string]json.RawMessage, ctx Context) *Request {
	return readToolCall(fields, ctx, false)
}

// readToolCall is ReadToolCall; checked says the fields are the members of
// an object that checkStrict passed, so that each is strict and valid
// already.
func readToolCall(fields map[string]json.RawMessage, ctx Context, checked bool) *Request {
	r := &Request{ctx: ctx, reading: new(fileView)}
	defer func() { r.reading = nil }()
	if !checked {
		for k, v := range fields {
			if err := checkStrict(v); err != nil {
				r.notUnderstood("%s: %v", k, err)
			}
		}
	}
	r.Kind = r.stringField(fields, "kind")
	r.Title = r.stringField(fields, "title")
	r.readToolName(fields)

	var input map[string]json.RawMessage
	if raw, ok := fields["rawInput"]; ok && !jsonrpc.IsNull(raw) {
		var err error
		if input, err = objectMembers(raw, checked); err != nil {
			r.notUnderstood("rawInput is not an object")
		}
	}
	r.Dir = ctx.Cwd
	ownDir, dirFrom := false, "rawInput.cwd"
	if ctx.Dir != "" {
		if !filepath.IsAbs(ctx.Dir) {
			r.notUnderstood("the subagent's cwd is not an absolute path")
		}
		r.Dir, ownDir, dirFrom = filepath.Clean(ctx.Dir), true, "the subagent's cwd"
	}
	if raw, ok := input["cwd"]; ok {
		var dir string
		if json.Unmarshal(raw, &dir) != nil || !filepath.IsAbs(dir) {
			r.notUnderstood("rawInput.cwd is not an absolute path")
		} else {
			// Codex runs the command in the directory it names: its
			// relative paths are there, but `./` stays the session's.
			r.Dir, ownDir, dirFrom = filepath.Clean(dir), true, "rawInput.cwd"
		}
	}

	r.readCommand(input)
	if given := r.Dir; r.CommandSource == "title" && r.readStatedDir(fields) {
		// Gemini CLI's dir_path, stated in the content.
		if ownDir && r.Dir != given {
			r.conflict("rawInput.cwd is %s but the content says %s", given, r.Dir)
		}
		ownDir, dirFrom = true, statedDirFrom
	}
	r.readPaths(fields, input)
	r.readURL(input)
	r.readMCP(input)
	if ownDir {
		r.addWorkDir(dirFrom)
	}
	r.UnreadPaths = unreadPaths(input)
	return r
}

// readInputMembers are the rawInput members ReadToolCall reads.
var readInputMembers = []string{"command", "cwd", "file_path", "path", "notebook_path", "changes", "url", "server", "tool"}

// pathWords are the words of a member name that say it names a file.
var pathWords = []string{"path", "paths", "file", "files", "filename", "dest", "destination", "target", "source", "src",
	"dir", "directory", "folder", "location", "to", "from", "output", "out"}

// unreadPaths lists the rawInput members not read whose name has a path
// word (destination_path, newName, to) and whose value, or an element of
// it, is one line that looks like a path ("/x", "~/x", "./x", "a/b").
func unreadPaths(input map[string]json.RawMessage) []string {
	var out []string
	for key, raw := range input {
		if slices.Contains(readInputMembers, key) || !hasPathWord(key) {
			continue
		}
		var values []string
		var one string
		if json.Unmarshal(raw, &one) == nil {
			values = []string{one}
		} else {
			_ = json.Unmarshal(raw, &values)
		}
		if slices.ContainsFunc(values, looksLikePath) {
			out = append(out, "rawInput."+key)
		}
	}
	slices.Sort(out)
	return out
}

func hasPathWord(key string) bool {
	var words []string
	start := 0
	for i, c := range key {
		switch {
		case c == '_' || c == '-':
			words = append(words, key[start:i])
			start = i + 1
		case c >= 'A' && c <= 'Z' && i > start:
			words = append(words, key[start:i])
			start = i
		}
	}
	words = append(words, key[start:])
	return slices.ContainsFunc(words, func(w string) bool { return slices.Contains(pathWords, strings.ToLower(w)) })
}

func looksLikePath(v string) bool {
	if v == "" || strings.ContainsAny(v, "\n\r") {
		return false
	}
	return strings.HasPrefix(v, "/") || strings.HasPrefix(v, "~") || strings.HasPrefix(v, ".") ||
		(strings.Contains(v, "/") && !strings.ContainsAny(v, " \t"))
}

// AddEnvironment gives the request's commands an environment of NAME=value
// variables (terminal/create's env), as if each had them as VAR=x prefixes:
// no allow rule matches a command with one, and a variable that changes
// which program runs or makes it run code (PATH, LD_PRELOAD, BASH_ENV, …),
// or a name no shell would take, makes the command opaque.
func (r *Request) AddEnvironment(vars []string) {
	if r.Script == nil {
		return
	}
	for i := range r.Script.Commands {
		c := &r.Script.Commands[i]
		for _, v := range vars {
			name, _, _ := strings.Cut(v, "=")
			c.Assigns = append(c.Assigns, v)
			c.Opaque = appendUnique(c.Opaque, dangerousVariable(name)...)
			if !validName(name) {
				c.Opaque = appendUnique(c.Opaque, fmt.Sprintf("an environment variable named %q", name))
			}
		}
	}
}

// validName reports whether a shell takes name as a variable's name.
func validName(name string) bool {
	for i, ch := range name {
		if !(ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || i > 0 && ch >= '0' && ch <= '9') {
			return false
		}
	}
	return name != ""
}

// addWorkDir makes a directory of the request's own outside the session's
// directories an access of its own, so that only a rule naming it can allow
// the request to act there. Inside them, it is the session's own place.
func (r *Request) addWorkDir(from string) {
	roots := append([]string{r.ctx.Cwd}, r.ctx.Roots...)
	resolvedRoots := make([]string, 0, len(roots))
	for _, root := range roots {
		if filepath.IsAbs(root) {
			resolvedRoots = append(resolvedRoots, r.view().resolve(filepath.Clean(root)))
		}
	}
	// The session's directories as given or as their links resolve: an
	// agent may name either.
	inside := func(dir string) bool { return under(dir, roots) || under(dir, resolvedRoots) }
	resolved := r.view().resolve(r.Dir)
	// A directory git takes for a repository (gitDirectoryAt) is a place of
	// its own even inside the session's: its config runs programs.
	_, inRepository := r.view().gitDirectoryAt(resolved)
	if inside(r.Dir) && inside(resolved) && !inRepository {
		return
	}
	for i, have := range r.Paths {
		if have.Abs == r.Dir {
			r.Paths[i].Write, r.Paths[i].WorkDir, r.Paths[i].onlyLocations = true, true, false
			return
		}
	}
	r.Paths = append(r.Paths, PathAccess{Given: r.Dir, Abs: r.Dir, Resolved: resolved, Write: true, From: from, WorkDir: true})
}

// ResolvedDir is the request's directory with its symbolic links followed
// as they are now.
func (r *Request) ResolvedDir() string {
	if !filepath.IsAbs(r.Dir) {
		return r.Dir
	}
	return resolvePath(filepath.Clean(r.Dir))
}

// ReadToolCallJSON is ReadToolCall on a tool call object as sent, so that a
// duplicated top-level key is caught too.
func ReadToolCallJSON(obj json.RawMessage, ctx Context) *Request {
	strictErr := checkStrict(obj)
	fields, err := objectMembers(obj, strictErr == nil)
	if err != nil || fields == nil {
		r := &Request{ctx: ctx}
		r.notUnderstood("the tool call is not an object")
		return r
	}
	r := readToolCall(fields, ctx, strictErr == nil)
	if strictErr != nil {
		r.notUnderstood("the tool call: %v", strictErr)
	}
	return r
}

// ReadMCPCall reads an MCP tools/call the broker's proxy holds into a
// Request: the server and tool are known exactly, and the arguments are read
// as a tool's input is, so that command, path and URL rules apply to them.
func ReadMCPCall(server, tool string, arguments json.RawMessage, ctx Context) *Request {
	r := &Request{ctx: ctx, Dir: ctx.Cwd, Kind: "other", ToolName: tool, Title: server + "/" + tool, MCP: &MCPTool{server, tool}, reading: new(fileView)}
	defer func() { r.reading = nil }()
	var input map[string]json.RawMessage
	if len(arguments) > 0 && !jsonrpc.IsNull(arguments) {
		strictErr := checkStrict(arguments)
		if strictErr != nil {
			r.notUnderstood("arguments: %v", strictErr)
		}
		var err error
		if input, err = objectMembers(arguments, strictErr == nil); err != nil {
			r.notUnderstood("the arguments are not an object")
		}
	}
	r.readCommand(input)
	r.readPaths(nil, input)
	r.readURL(input)
	return r
}

func (r *Request) notUnderstood(format string, args ...any) {
	r.NotUnderstood = append(r.NotUnderstood, fmt.Sprintf(format, args...))
}

func (r *Request) conflict(format string, args ...any) {
	r.Conflicts = append(r.Conflicts, fmt.Sprintf(format, args...))
}

func (r *Request) stringField(obj map[string]json.RawMessage, key string) string {
	raw, ok := obj[key]
	if !ok || jsonrpc.IsNull(raw) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		r.notUnderstood("%s is not a string", key)
	}
	return s
}

// readToolName takes the tool's name from the newer `name` field and from
// Claude Code's _meta.claudeCode.toolName; two different names are a
// conflict.
func (r *Request) readToolName(fields map[string]json.RawMessage) {
	r.ToolName = r.stringField(fields, "name")
	var meta struct {
		ClaudeCode struct {
			ToolName *string `json:"toolName"`
		} `json:"claudeCode"`
	}
	if raw, ok := fields["_meta"]; ok && !jsonrpc.IsNull(raw) {
		if json.Unmarshal(raw, &meta) != nil {
			r.notUnderstood("_meta is not an object")
		}
	}
	if n := meta.ClaudeCode.ToolName; n != nil {
		if r.ToolName != "" && r.ToolName != *n {
			r.conflict("the tool is named both %q and %q", r.ToolName, *n)
		}
		if r.ToolName == "" {
			r.ToolName = *n
		}
	}
}

// readCommand reads the shell command: rawInput.command as a string (Claude
// Code) or an argv array (Codex), else the title of an execute request
// (Gemini CLI sends no rawInput: its title is the command).
func (r *Request) readCommand(input map[string]json.RawMessage) {
	raw, ok := input["command"]
	switch {
	case ok && !jsonrpc.IsNull(raw):
		var s string
		var argv []string
		switch {
		case json.Unmarshal(raw, &s) == nil:
			sc := ParseShell(s)
			r.Script, r.CommandSource, r.Command = &sc, "rawInput.command", GivenCommand{Line: s}
			// Claude Code titles a shell call with the command itself; a
			// title that is another command is a disagreement.
			if r.Title != "" && strings.TrimSpace(r.Title) != strings.TrimSpace(s) && r.Kind == "execute" && looksLikeOtherCommand(r.Title, s) {
				r.conflict("the title %q is not the command %q", r.Title, s)
			}
		case json.Unmarshal(raw, &argv) == nil && len(argv) > 0:
			sc := ParseArgv(argv)
			r.Script, r.CommandSource, r.Command = &sc, "rawInput.command (argv)", GivenCommand{Argv: argv}
		default:
			r.notUnderstood("rawInput.command is neither a string nor a list of strings")
		}
	case r.Kind == "execute" && r.Title != "":
		sc := ParseShell(r.Title)
		r.Script, r.CommandSource, r.Command = &sc, "title", GivenCommand{Line: r.Title}
	case r.Kind == "execute":
		r.notUnderstood("an execute request with no command")
	}
}

// looksLikeOtherCommand reports whether a title that differs from the
// command names a different command (rather than describing this one, as in
// "Run `git status`", or being the script of a command that only starts a
// shell on it, as codex-acp 2.6 titles `/bin/bash -lc 'git status'`).
func looksLikeOtherCommand(title, command string) bool {
	if script, ok := shellwrap.StringScript(command); ok && script == title {
		return false
	}
	return !strings.Contains(title, command)
}

// writeKinds are the kinds whose paths are written. A path in a request of
// any other kind than read or search is taken as written too: an unknown
// access is the more dangerous one.
var readKinds = []string{"read", "search"}

func (r *Request) readPaths(fields, input map[string]json.RawMessage) {
	write := !slices.Contains(readKinds, r.Kind)
	for _, key := range []string{"file_path", "path", "notebook_path"} {
		if raw, ok := input[key]; ok && !jsonrpc.IsNull(raw) {
			var p string
			if json.Unmarshal(raw, &p) != nil {
				r.notUnderstood("rawInput.%s is not a string", key)
				continue
			}
			r.addPath(p, write, "rawInput."+key)
		}
	}
	if raw, ok := fields["locations"]; ok && !jsonrpc.IsNull(raw) {
		var locs []struct {
			Path *string `json:"path"`
		}
		if json.Unmarshal(raw, &locs) != nil {
			r.notUnderstood("locations is not a list of locations")
		}
		for _, l := range locs {
			if l.Path == nil {
				r.notUnderstood("a location has no path")
				continue
			}
			r.addPath(*l.Path, write, "locations")
		}
	}
	if raw, ok := fields["content"]; ok && !jsonrpc.IsNull(raw) {
		var content []struct {
			Type string  `json:"type"`
			Path *string `json:"path"`
			// ACP v2's diff names its files in changes instead.
			Changes *[]v2DiffChange `json:"changes"`
		}
		if json.Unmarshal(raw, &content) != nil {
			r.notUnderstood("content is not a list of content items")
		}
		for _, c := range content {
			if c.Type == "diff" && c.Path == nil && c.Changes != nil {
				r.readV2Diff(*c.Changes)
				continue
			}
			if c.Type == "diff" {
				if c.Path == nil {
					r.notUnderstood("a diff has no path")
					continue
				}
				// A diff is a write, whatever the request's kind says.
				r.addPath(*c.Path, true, "diff")
			}
		}
	}
	// Codex patch approvals list their changes by path; a move names its
	// destination too.
	if raw, ok := input["changes"]; ok && !jsonrpc.IsNull(raw) {
		var changes map[string]json.RawMessage
		if json.Unmarshal(raw, &changes) != nil {
			r.notUnderstood("rawInput.changes is not an object")
		}
		for p, change := range changes {
			r.addPath(p, true, "rawInput.changes")
			var c struct {
				MovePath *string `json:"move_path"`
			}
			if json.Unmarshal(change, &c) == nil && c.MovePath != nil {
				r.addPath(*c.MovePath, true, "rawInput.changes.move_path")
			}
		}
	}
	if r.Script != nil {
		for _, c := range r.Script.Commands {
			for _, rd := range c.Redirects {
				if rd.Static {
					r.addPath(rd.Target, rd.Write, "redirection")
				}
			}
		}
	}
}

func (r *Request) addPath(p string, write bool, from string) {
	abs, ok := absPath(p, r.Dir, r.ctx.Home)
	if !ok {
		r.notUnderstood("path %q cannot be made absolute", p)
		return
	}
	for i, have := range r.Paths {
		if have.Abs == abs {
			r.Paths[i].Write = have.Write || write
			r.Paths[i].onlyLocations = have.onlyLocations && from == "locations"
			return
		}
	}
	r.Paths = append(r.Paths, PathAccess{Given: p, Abs: abs, Resolved: r.view().resolve(abs), Write: write, From: from, onlyLocations: from == "locations"})
}

// view is what the reading sees of the file system; outside a reading, a
// fresh look.
func (r *Request) view() *fileView {
	if r.reading == nil {
		return new(fileView)
	}
	return r.reading
}

// readURL reads the URL a fetch acts on, from rawInput.url or a
// "Fetch <url>" title; two different URLs are a conflict.
func (r *Request) readURL(input map[string]json.RawMessage) {
	var fromInput string
	if raw, ok := input["url"]; ok && !jsonrpc.IsNull(raw) {
		if json.Unmarshal(raw, &fromInput) != nil {
			r.notUnderstood("rawInput.url is not a string")
		}
	}
	fromTitle, hasTitleURL := strings.CutPrefix(r.Title, "Fetch ")
	fromTitle = strings.TrimSpace(fromTitle)
	hasTitleURL = hasTitleURL && strings.Contains(fromTitle, "://")
	switch {
	case fromInput != "" && hasTitleURL && fromTitle != fromInput:
		r.conflict("the title fetches %q but the input fetches %q", fromTitle, fromInput)
		r.addURL(fromInput)
		r.addURL(fromTitle)
	case fromInput != "":
		r.addURL(fromInput)
	case hasTitleURL && r.Kind == "fetch":
		r.addURL(fromTitle)
	}
}

func (r *Request) addURL(raw string) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		r.notUnderstood("url %q does not parse", raw)
		u = nil
	} else {
		u.Scheme = strings.ToLower(u.Scheme)
		u.Host = strings.ToLower(u.Host)
	}
	r.URLs = append(r.URLs, URLAccess{Raw: raw, URL: u})
}

// readMCP finds the MCP server and tool, whatever the agent's naming:
// Claude Code's "mcp__server__tool", Codex's rawInput {server, tool} and
// "Tool: server/tool" title, Gemini CLI's "tool (server MCP Server)" title
// and "server_tool" names.
func (r *Request) readMCP(input map[string]json.RawMessage) {
	var found []MCPTool
	if s, t, ok := strings.Cut(strings.TrimPrefix(r.ToolName, "mcp__"), "__"); ok && strings.HasPrefix(r.ToolName, "mcp__") && s != "" && t != "" {
		found = append(found, MCPTool{s, t})
	}
	var server, tool string
	_, hasServer := input["server"]
	_, hasTool := input["tool"]
	if hasServer && hasTool {
		if json.Unmarshal(input["server"], &server) != nil || json.Unmarshal(input["tool"], &tool) != nil {
			r.notUnderstood("rawInput.server or rawInput.tool is not a string")
		} else {
			found = append(found, MCPTool{server, tool})
		}
	}
	if rest, ok := strings.CutPrefix(r.Title, "Tool: "); ok {
		if s, t, ok := strings.Cut(rest, "/"); ok {
			found = append(found, MCPTool{strings.TrimSpace(s), strings.TrimSpace(t)})
		}
	}
	if t, s, ok := strings.Cut(r.Title, " ("); ok && strings.HasSuffix(s, " MCP Server)") {
		found = append(found, MCPTool{strings.TrimSuffix(s, " MCP Server)"), t})
	}
	if len(found) == 0 && r.ToolName != "" {
		for _, s := range r.ctx.MCPServers {
			if t, ok := strings.CutPrefix(r.ToolName, s+"_"); ok && t != "" {
				found = append(found, MCPTool{s, t})
			}
		}
	}
	if len(found) == 0 {
		return
	}
	// Rules name a tool as server/tool, and Claude Code as
	// mcp__server__tool: a server name holding "/", or a name that splits
	// in two places, may be another server's (`github/evil` is not
	// `github`; mcp__a__b__c is a's b__c or a__b's c), so it decides
	// nothing.
	for _, f := range found {
		if strings.Contains(f.Server, "/") {
			r.notUnderstood("the MCP server name %q holds a '/', so it cannot be told from another server's tool", f.Server)
		}
	}
	if strings.HasPrefix(r.ToolName, "mcp__") && strings.Contains(found[0].Tool, "__") {
		r.notUnderstood("the MCP tool name %q splits into a server and a tool in more than one way", r.ToolName)
	}
	if rest, ok := strings.CutPrefix(r.Title, "Tool: "); ok && strings.Count(rest, "/") > 1 {
		r.notUnderstood("the MCP title %q splits into a server and a tool in more than one way", r.Title)
	}
	r.MCP = &found[0]
	for _, f := range found[1:] {
		if f != found[0] {
			r.conflict("the MCP tool is named both %s and %s", found[0].String(), f.String())
		}
	}
}

// objectMembers decodes a JSON object into its members, as json.Unmarshal
// into a map of raw values does. checked says checkStrict passed the
// object: valid, and no member repeated at any depth, so one pass that only
// finds where each member ends (jsonrpc.Members) reads it the same, and
// encoding/json's validating and decoding passes over every byte (the
// diff of an edit, the text of a write) are not needed. Names are taken
// from that pass only when they are plain ASCII, with nothing an escape or
// a decoder's repair of bad UTF-8 could make differ.
func objectMembers(obj json.RawMessage, checked bool) (map[string]json.RawMessage, error) {
	if checked {
		if members, err := jsonrpc.Members(obj); err == nil && plainNames(members) {
			return members, nil
		}
	}
	var members map[string]json.RawMessage
	err := json.Unmarshal(obj, &members)
	return members, err
}

// plainNames reports whether every member name is printable ASCII without
// a quote or a backslash.
func plainNames(members map[string]json.RawMessage) bool {
	for name := range members {
		for i := 0; i < len(name); i++ {
			if c := name[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
				return false
			}
		}
	}
	return true
}

// checkStrict refuses a JSON value with a duplicated key or keys that differ
// only in case, at any depth: decoders disagree on which one counts, so the
// agent could show the user one thing and the broker another.
func checkStrict(raw json.RawMessage) error {
	if err := jsonrpc.Strict(raw); err != nil {
		return err
	}
	if !json.Valid(raw) {
		return fmt.Errorf("not valid JSON")
	}
	return nil
}
