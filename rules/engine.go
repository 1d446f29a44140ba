package rules

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Policy is every layer's rules and settings, ready to decide requests.
type Policy struct {
	Files []*File
	// Rules are the rules that apply, managed first, then user, then
	// project; Inactive ones (an untrusted project's allow rules) are kept
	// for listing but never match.
	Rules []*Rule
	// ReadOnly is the effective read_only setting: "ask" if any layer asks
	// for it, since asking is never a loosening.
	ReadOnly string
	Mode     string
	Remember string
	mcpRO    map[string][]*glob
	mcpTrust map[string]bool
	// mcpProxy is each server's proxy setting, with "" for [mcp] proxy;
	// the first layer that sets one wins, managed first.
	mcpProxy    map[string]bool
	agent       agentSettings
	protected   *protectedPaths
	home        string
	brokerFiles []string

	// ProjectError, when not nil, is why the session directory's project
	// file is not in force (it cannot be read safely, or does not parse):
	// every request is then asked, and denied where a deny rule says so.
	ProjectError *ConfigError
	// ProjectNotes are the warnings about the project file that also go to
	// the audit log: settings it may not set, which were ignored, and
	// ProjectError.
	ProjectNotes []string

	// byProgram indexes rules by the literal program of their command
	// patterns; other rules are checked for every command.
	byProgram map[string][]*Rule
	anyCmd    []*Rule
	nonCmd    []*Rule
}

// NewPolicy combines parsed files. home is the user's home directory and
// brokerFiles the broker's own config, trust and state locations, which are
// protected paths.
func NewPolicy(files []*File, home string, brokerFiles []string) *Policy {
	p := &Policy{Files: files, ReadOnly: "allow", mcpRO: map[string][]*glob{}, mcpTrust: map[string]bool{}, mcpProxy: map[string]bool{}, home: home, brokerFiles: brokerFiles, byProgram: map[string][]*Rule{}}
	order := []Layer{Managed, User, Project, Remembered}
	var modeFromProject, rememberFromProject bool
	for _, layer := range order {
		for _, f := range files {
			if f.Layer != layer {
				continue
			}
			for _, r := range f.Rules {
				// Only fresh rules are marked: rules of files shared with a
				// policy in use are never written.
				if f.Layer == Project && !f.Trusted && r.Decision == Allow {
					r.Inactive = true
				}
				p.Rules = append(p.Rules, r)
			}
			if f.ReadOnly == "ask" {
				p.ReadOnly = "ask"
			}
			p.addAgentSettings(f)
			if _, set := p.mcpProxy[""]; !set && f.MCPProxy != nil {
				p.mcpProxy[""] = *f.MCPProxy
			}
			for name, s := range f.MCP {
				if _, set := p.mcpProxy[name]; !set && s.Proxy != nil {
					p.mcpProxy[name] = *s.Proxy
				}
			}
			if !f.loosens() {
				continue
			}
			for name, s := range f.MCP {
				p.mcpRO[name] = append(p.mcpRO[name], s.ReadOnlyTools...)
				p.mcpTrust[name] = p.mcpTrust[name] || s.TrustAnnotations
			}
			// The first layer that sets one wins, managed first; among
			// project files the strictest: a file nearer the session (one
			// an agent may write) cannot loosen the repository's.
			if f.Remember != "" && (p.Remember == "" || rememberFromProject && stricter(RememberScopes, f.Remember, p.Remember)) {
				p.Remember, rememberFromProject = f.Remember, f.Layer == Project
			}
			if f.Mode != "" && (p.Mode == "" || modeFromProject && stricter(modesByStrictness, f.Mode, p.Mode)) {
				p.Mode, modeFromProject = f.Mode, f.Layer == Project
			}
		}
	}
	p.protected = newProtectedPaths(home, brokerFiles)
	for _, r := range p.Rules {
		if r.Inactive {
			continue
		}
		indexed := len(r.Commands) > 0
		var programs []string
		for _, c := range r.Commands {
			prog, ok := c.program()
			if !ok {
				indexed = false
				break
			}
			programs = append(programs, prog)
		}
		switch {
		case indexed:
			for _, prog := range slices.Compact(slices.Sorted(slices.Values(programs))) {
				p.byProgram[prog] = append(p.byProgram[prog], r)
			}
		case len(r.Commands) > 0 || len(r.CommandRegex) > 0 || !r.hasActionMatcher():
			p.anyCmd = append(p.anyCmd, r)
		}
		if !(len(r.Commands) > 0 || len(r.CommandRegex) > 0) || len(r.Paths)+len(r.URLs)+len(r.MCP) > 0 {
			p.nonCmd = append(p.nonCmd, r)
		}
	}
	return p
}

// stricter reports whether a comes before b in order, strictest first.
func stricter(order []string, a, b string) bool {
	return slices.Index(order, a) < slices.Index(order, b)
}

// loosens reports whether a file's loosening content applies: any file but
// an untrusted project file.
func (f *File) loosens() bool { return f.Layer != Project || f.Trusted }

// Verdict is the engine's decision on a request, with why.
type Verdict struct {
	Decision Decision
	// Source is "rule", "default", "protected", "not understood",
	// "not see-through" or "conflict".
	Source string
	Rule   *Rule // the deciding rule, when a rule decided
	Reason string
	Parts  []PartVerdict
}

// PartVerdict is the decision on one action of a request.
type PartVerdict struct {
	Action   string // "command: git push", "write: /repo/x", ...
	Decision Decision
	Source   string
	Rule     *Rule
	Reason   string

	act action
}

type actionKind int

const (
	actCommand actionKind = iota
	actPath
	actURL
	actMCP
	actTool
)

type action struct {
	kind actionKind
	cmd  *SimpleCommand
	// normalized is cmd.Normalized(), which every deny rule a command is
	// matched against needs: made once.
	normalized []string
	path       *PathAccess
	url        *URLAccess
	mcp        string // the MCP tool as rules name it, server/tool
}

func (a action) String() string {
	switch a.kind {
	case actCommand:
		return "command: " + strings.Join(a.cmd.Argv, " ")
	case actPath:
		if a.path.WorkDir {
			return "runs in: " + a.path.Abs
		}
		if a.path.Write {
			return "write: " + a.path.Abs
		}
		return "read: " + a.path.Abs
	case actURL:
		return "fetch: " + a.url.Raw
	case actMCP:
		return "mcp tool"
	}
	return "tool"
}

// actions lists everything a request would do. A request that carries none
// of commands, paths, URLs or an MCP tool is one "tool" action.
func (req *Request) actions() []action {
	var acts []action
	if req.Script != nil {
		for i := range req.Script.Commands {
			c := &req.Script.Commands[i]
			acts = append(acts, action{kind: actCommand, cmd: c, normalized: c.Normalized()})
		}
	}
	for i := range req.Paths {
		acts = append(acts, action{kind: actPath, path: &req.Paths[i]})
	}
	for i := range req.URLs {
		acts = append(acts, action{kind: actURL, url: &req.URLs[i]})
	}
	if req.MCP != nil {
		acts = append(acts, action{kind: actMCP, mcp: req.MCP.String()})
	}
	if len(acts) == 0 {
		acts = append(acts, action{kind: actTool})
	}
	return acts
}

// Decide decides a request: deny if any action is denied, ask if any is
// asked, allow only if every action is allowed; and never allow a request
// that is not understood, cannot be seen through, or contradicts itself.
func (p *Policy) Decide(req *Request) Verdict {
	var v Verdict
	fv := new(fileView)
	for _, a := range req.actions() {
		pv := p.decideAction(req, a, fv)
		if a.kind == actPath {
			pv = p.coveredByCommand(req, pv, v.Parts, fv)
		}
		v.Parts = append(v.Parts, pv)
		if pv.Decision.rank() > v.Decision.rank() {
			v.Decision, v.Source, v.Rule, v.Reason = pv.Decision, pv.Source, pv.Rule, pv.Reason
		}
	}
	if req.Script != nil && len(req.Script.Opaque) > 0 {
		p.capAtAsk(&v, "not see-through", "the command cannot be read: "+strings.Join(req.Script.Opaque, "; "))
	}
	if moved, ok := p.changesDirectory(req); ok {
		p.capAtAsk(&v, "not see-through", moved+" moves the commands after it to a directory their paths are not judged in")
	}
	if len(req.NotUnderstood) > 0 {
		p.capAtAsk(&v, "not understood", "the request cannot be read exactly: "+strings.Join(req.NotUnderstood, "; "))
	}
	if req.MCP != nil {
		if other, ok := MCPNameCollision(req.MCP.Server, req.ctx.MCPServers); ok {
			p.capAtAsk(&v, "ambiguous MCP server", fmt.Sprintf("the session has MCP servers named %q and %q, which an agent may confuse: a call to one may go to the other, so no rule, hint or remembered answer for the name decides it", req.MCP.Server, other))
		}
	}
	if p.ProjectError != nil {
		p.capAtAsk(&v, "project file", "the project file is not in force, so every request is asked: "+p.ProjectError.Error())
	}
	if req.Kind == "switch_mode" {
		// Leaving plan mode can switch the agent into accepting edits or
		// bypassing permissions: only a human may agree to that, and only a
		// human may refuse it, whatever the rules say.
		v.Decision, v.Source, v.Rule, v.Reason = Ask, "switch_mode", nil, "a mode switch always goes to the human"
	}
	if len(req.Conflicts) > 0 {
		p.capAtAsk(&v, "conflict", "the request contradicts itself: "+strings.Join(req.Conflicts, "; "))
	}
	return v
}

// changesDirectory finds a cd, pushd or popd that other commands follow and
// that does not stay in the request's directory: `cd ~ && cat .ssh/id_rsa`
// reads ~/.ssh/id_rsa, which the paths judged against the request's
// directory never show. Staying (`cd /the/project && make`, `cd .`) is fine.
func (p *Policy) changesDirectory(req *Request) (string, bool) {
	if req.Script == nil {
		return "", false
	}
	cmds := req.Script.Commands
	for i := range cmds {
		argv := cmds[i].Normalized()
		if len(argv) == 0 || i == len(cmds)-1 {
			continue
		}
		switch programKey(argv[0]) {
		case "cd", "pushd", "popd", "chdir":
		default:
			continue
		}
		var operands []string
		for _, arg := range argv[1:] {
			if !strings.HasPrefix(arg, "-") || arg == "-" {
				operands = append(operands, arg)
			}
		}
		stays := false
		if len(operands) == 1 && programKey(argv[0]) != "popd" && (filepath.IsAbs(operands[0]) || operands[0] == "." || operands[0] == "./") {
			if abs, ok := absPath(operands[0], req.Dir, p.home); ok {
				stays = abs == filepath.Clean(req.Dir)
			}
		}
		if !stays {
			return strings.Join(cmds[i].Argv, " "), true
		}
	}
	return "", false
}

// capAtAsk makes a request that is not denied an ask for this reason, so
// that no mode can turn it into an allow either; a deny stands.
func (p *Policy) capAtAsk(v *Verdict, source, reason string) {
	if v.Decision != Deny {
		v.Decision, v.Source, v.Rule, v.Reason = Ask, source, nil, reason
	}
}

func (p *Policy) decideAction(req *Request, a action, fv *fileView) PartVerdict {
	pv := PartVerdict{Action: a.String(), act: a}
	if a.kind == actMCP {
		pv.Action = "mcp: " + req.MCP.String()
	}
	var allow, ask *Rule
	for _, r := range p.candidates(a, req.ctx.Session) {
		if r.Inactive || !p.requestMatches(r, req) {
			continue
		}
		switch r.Decision {
		case Deny:
			if p.covers(r, req, a, true) {
				pv.Decision, pv.Source, pv.Rule, pv.Reason = Deny, sourceOf(r), r, r.Reason
				return pv
			}
		case Ask:
			if ask == nil && p.covers(r, req, a, true) {
				ask = r
			}
		case Allow:
			if allow == nil && p.covers(r, req, a, false) {
				allow = r
			}
		}
	}
	if ask != nil {
		pv.Decision, pv.Source, pv.Rule, pv.Reason = Ask, sourceOf(ask), ask, ask.Reason
		return pv
	}
	if a.kind == actCommand {
		if n := a.normalized; len(n) > 0 && n[0] == "acp-broker" {
			// The broker's own CLI trusts project files and edits remembered
			// answers: an agent running it could grant itself permissions.
			pv.Decision, pv.Source = Ask, "protected"
			pv.Reason = "acp-broker's own commands change what agents may do"
			return pv
		}
	}
	if a.kind == actCommand && len(a.cmd.Opaque) > 0 {
		pv.Decision, pv.Source = Ask, "not see-through"
		pv.Reason = "cannot be seen through: " + strings.Join(a.cmd.Opaque, "; ")
		return pv
	}
	if a.kind == actPath {
		if pat, ok := p.protectedPathIn(fv, a.path); ok {
			if allow != nil && allow.UnlockProtected && (allow.Layer == User || allow.Layer == Managed) {
				pv.Decision, pv.Source, pv.Rule, pv.Reason = Allow, sourceOf(allow), allow, allow.Reason
				return pv
			}
			pv.Decision, pv.Source = Ask, "protected"
			pv.Reason = fmt.Sprintf("%s is a protected path (%s)", a.path.Abs, pat)
			return pv
		}
	}
	if a.kind == actCommand {
		// Checked whatever allows the command, so that no rule, default or
		// mode lets a command name a protected path.
		if arg, pat, ok := p.protectedArgumentIn(fv, req, a.cmd); ok {
			pv.Decision, pv.Source = Ask, "protected"
			pv.Reason = fmt.Sprintf("argument %q names a protected path (%s)", arg, pat)
			return pv
		}
	}
	if allow != nil {
		pv.Decision, pv.Source, pv.Rule, pv.Reason = Allow, sourceOf(allow), allow, allow.Reason
		return pv
	}
	pv.Decision, pv.Source = p.defaultFor(req, a), "default"
	pv.Reason = p.defaultReason(req, a, pv.Decision)
	return pv
}

// sourceOf names who decided through a rule: the rule files, or a
// remembered answer.
func sourceOf(r *Rule) string {
	if r.Layer == Remembered {
		return "remembered"
	}
	return "rule"
}

// candidates returns the rules that may cover an action: the policy's, by
// index, and the session's own remembered answers.
func (p *Policy) candidates(a action, session []*Rule) []*Rule {
	base := p.indexed(a)
	if len(session) == 0 {
		return base
	}
	// Clip, so the shared index is never appended to.
	return append(slices.Clip(base), session...)
}

func (p *Policy) indexed(a action) []*Rule {
	if a.kind != actCommand {
		return p.nonCmd
	}
	literal := ""
	if len(a.cmd.Argv) > 0 {
		literal = a.cmd.Argv[0]
	}
	normalized := ""
	if n := a.normalized; len(n) > 0 {
		normalized = n[0]
	}
	out := append([]*Rule(nil), p.byProgram[literal]...)
	if normalized != literal {
		out = append(out, p.byProgram[normalized]...)
	}
	return append(out, p.anyCmd...)
}

// protectedArgumentIn finds a command argument that, read as a path, is a
// protected one, so that an allow rule such as "cat *" does not hand out
// ~/.ssh/id_rsa, nor a file linked to it. For a program not known to only
// read (programs.go readers), an argument naming a write-protected path
// (.git/hooks/pre-commit, ~/.config/zed/settings.json) is one too. And what
// a program writes (programs.go destinations: cp's target, tar -C, rm's
// operands, any -C/--directory) must not be a protected path nor a
// directory holding one: `cp -r x .`, `tar xf p.tar -C ~`, `rm -rf ~/.config`.
// Paths a program finds on its own (grep -r ~, the members of an archive)
// remain a blind spot.
//
// fv is the request's one view of the file system.
func (p *Policy) protectedArgumentIn(fv *fileView, req *Request, c *SimpleCommand) (string, string, bool) {
	if len(c.Argv) == 0 {
		return "", "", false
	}
	// What the program is, past wrappers: `nice cp -r x .` is cp.
	argv := c.Normalized()
	if len(argv) == 0 {
		argv = c.Argv
	}
	writes := !readsOnly(argv)
	for _, arg := range c.Argv[1:] {
		for _, cand := range pathCandidates(arg) {
			abs, ok := absPath(cand, req.Dir, p.home)
			if !ok {
				continue
			}
			if pat, ok := p.protected.protects(abs, writes); ok {
				return arg, pat, true
			}
			// Only an existing file can be read through a link; most
			// arguments are words, not paths, and cost one lstat. Asked
			// first, it also answers for what the git check below looks up
			// inside a path that does not exist.
			exists, _ := fv.lstat(abs)
			// A program that may write (`sort -o bare/config`) must not name
			// a file inside a git repository of another name; only words
			// that look like paths are looked up.
			if writes && strings.Contains(cand, "/") {
				if dir, ok := fv.gitDirectoryAt(abs); ok {
					return arg, "inside the git repository " + dir, true
				}
			}
			if !exists {
				continue
			}
			// A path with no link on it was asked above.
			if resolved := fv.resolve(abs); resolved != abs {
				if pat, ok := p.protected.protects(resolved, writes); ok {
					return arg, pat, true
				}
			}
		}
	}
	if !writes {
		return "", "", false
	}
	// A program that writes may write where it runs without naming it
	// (`unzip p.zip`, `tar xf p.tar`, `curl -O URL`): in a protected
	// directory (.git/hooks, ~/.ssh), what it creates there is protected.
	if filepath.IsAbs(req.Dir) {
		for _, dir := range []string{req.Dir, fv.resolve(req.Dir)} {
			if pat, ok := p.protected.protects(filepath.Join(dir, "created-here"), true); ok {
				return req.Dir, pat, true
			}
		}
	}
	sessionDirs := append([]string{req.ctx.Cwd}, req.ctx.Roots...)
	// What a program writes, relative to the request's directory (and the
	// session's); and what a symbolic link it makes points at, relative to
	// the link's directory too: `ln -s ~ h` makes h/.ssh/id_rsa a path no
	// check sees before the link exists.
	type written struct{ arg, base string }
	var checks []written
	for _, dest := range destinations(argv) {
		checks = append(checks, written{dest, req.Dir}, written{dest, req.ctx.Cwd})
	}
	targets, linkDirs := linkTargets(argv)
	for _, target := range targets {
		checks = append(checks, written{target, req.Dir})
		for _, dir := range linkDirs {
			if abs, ok := absPath(dir, req.Dir, p.home); ok {
				checks = append(checks, written{target, abs})
			}
		}
	}
	for _, c := range checks {
		dest := c.arg
		abs, ok := absPath(dest, c.base, p.home)
		if !ok {
			continue
		}
		for i, path := range []string{abs, fv.resolve(abs)} {
			if i == 1 && path == abs {
				// No link on the way: asked already, and the view answers
				// as it did.
				break
			}
			if pat, ok := p.protected.protects(path, true); ok {
				return dest, pat, true
			}
			if dir, ok := fv.gitDirectoryAt(path); ok {
				return dest, "inside the git repository " + dir, true
			}
			if held, ok := p.protected.holdsProtected(fv, path, sessionDirs); ok {
				return dest, "a directory holding " + held, true
			}
		}
	}
	return "", "", false
}

// pathCandidates lists what one argument may name as a file: itself, what
// follows an `=` (`--file=~/.aws/credentials`, dd's `if=~/.ssh/id_rsa`), the
// value of a short option written against it (`-o.git/hooks/x`), and each
// of these without a leading `@` (curl's `-d @.env`, `-F f=@.env`, response
// files).
func pathCandidates(arg string) []string {
	out := []string{arg}
	if len(arg) > 2 && arg[0] == '-' && arg[1] != '-' {
		out = append(out, arg[2:])
	}
	for i := 0; i < len(arg); i++ {
		if arg[i] == '=' {
			out = append(out, arg[i+1:])
		}
	}
	// range reads out as it is before the loop: what it appends is not
	// visited again.
	for _, c := range out {
		if rest, ok := strings.CutPrefix(c, "@"); ok {
			out = append(out, rest)
		}
	}
	return out
}

// protectedPathIn reports which protected pattern, or git repository for a
// write, covers a path the request accesses, as given or resolved.
// fv is the request's one view of the file system.
func (p *Policy) protectedPathIn(fv *fileView, pa *PathAccess) (string, bool) {
	for i, path := range []string{pa.Abs, pa.Resolved} {
		if i == 1 && path == pa.Abs {
			break
		}
		if pat, ok := p.protected.protects(path, pa.Write); ok {
			return pat, true
		}
		if !pa.Write {
			continue
		}
		if dir, ok := fv.gitDirectoryAt(path); ok {
			return "inside the git repository " + dir, true
		}
	}
	return "", false
}

// requestMatches checks the matchers that describe the whole request.
func (p *Policy) requestMatches(r *Rule, req *Request) bool {
	if len(r.Kinds) > 0 && !slices.Contains(r.Kinds, req.Kind) {
		return false
	}
	if len(r.Modes) > 0 && !slices.Contains(r.Modes, modeOrDefault(req.ctx.Mode)) {
		return false
	}
	if len(r.Tools) > 0 && !anyGlob(r.Tools, req.ToolName) {
		return false
	}
	if len(r.Titles) > 0 && !anyGlob(r.Titles, req.Title) {
		return false
	}
	return true
}

func modeOrDefault(m string) string {
	if m == "" {
		return "default"
	}
	return m
}

// covers reports whether a rule whose request matchers match speaks for one
// action. A deny or ask rule covers every action its matchers fit; an allow
// rule is held to more: a command is allowed only by a rule that names
// commands, a written path only by one that names paths, an MCP tool only by
// one that names MCP tools. A rule that names only kinds, tools or titles can
// allow reads, fetches and tool calls without content, never a command or a
// write.
func (p *Policy) covers(r *Rule, req *Request, a action, deny bool) bool {
	if r.toolOnly && a.kind != actTool {
		return false
	}
	switch a.kind {
	case actCommand:
		if len(r.Commands) == 0 && len(r.CommandRegex) == 0 {
			return deny && !r.hasActionMatcher()
		}
		argv := a.cmd.Argv
		if deny {
			argv = a.normalized
		} else if len(a.cmd.Assigns) > 0 {
			// VAR=x changes what a program does; allow rules match only what
			// is literally there.
			return false
		}
		if !matchCommand(r, argv) {
			return false
		}
		return r.prefixWords == 0 || deny || prefixCovers(argv, r.prefixWords)
	case actPath:
		if len(r.Paths) == 0 {
			return !r.hasActionMatcher() && (deny || !a.path.Write)
		}
		ctx := r.context(req.ctx)
		raw := anyPath(r.Paths, a.path.Abs, p.home, ctx)
		resolved := anyPath(r.Paths, a.path.Resolved, p.home, ctx)
		if deny {
			return raw || resolved
		}
		return raw && resolved
	case actURL:
		if len(r.URLs) == 0 {
			return !r.hasActionMatcher()
		}
		if a.url.URL == nil {
			return deny
		}
		for _, u := range r.URLs {
			if u.match(a.url.URL) {
				return true
			}
		}
		return false
	case actMCP:
		if len(r.MCP) == 0 {
			return !r.hasActionMatcher() && (deny || len(r.Tools) > 0)
		}
		return anyGlob(r.MCP, a.mcp)
	}
	return !r.hasActionMatcher()
}

// matchCommand matches a rule's command patterns or its command_regex: a
// rule has one or the other, never both (Parse refuses it).
func matchCommand(r *Rule, argv []string) bool {
	for _, c := range r.Commands {
		if c.match(argv) {
			return true
		}
	}
	if len(r.CommandRegex) > 0 {
		joined := strings.Join(argv, " ")
		for _, re := range r.CommandRegex {
			if re.MatchString(joined) {
				return true
			}
		}
	}
	return false
}

func anyGlob(globs []*glob, s string) bool {
	for _, g := range globs {
		if g.match(s) {
			return true
		}
	}
	return false
}

// anyPath matches a path against patterns; `./` patterns match the session's
// working directory (a rule's Base instead, see covers) and its additional
// directories (never a directory the request names itself).
func anyPath(patterns []*pathPattern, path, home string, ctx Context) bool {
	for _, pat := range patterns {
		if pat.match(path, home, ctx.Cwd) {
			return true
		}
		if pat.anchor == '.' {
			for _, root := range ctx.Roots {
				if pat.match(path, home, root) {
					return true
				}
			}
		}
	}
	return false
}

// readOnlyKinds are the kinds allowed by default, unless read_only = "ask".
var readOnlyKinds = []string{"read", "search", "think"}

// defaultFor decides an action no rule spoke for: what only reads is
// allowed (unless read_only = "ask"); commands, writes, fetches and
// everything else are asked. A command is never read-only by default, and
// an MCP tool is read-only only when the config lists it, or its server is
// trusted and annotates it read-only and not destructive, as first seen.
func (p *Policy) defaultFor(req *Request, a action) Decision {
	readOnly := Allow
	if p.ReadOnly == "ask" {
		readOnly = Ask
	}
	switch a.kind {
	case actCommand, actURL:
		return Ask
	case actPath:
		if ro, _ := p.mcpDefault(req); ro {
			// The paths a read-only tool names are paths it reads.
			return readOnly
		}
		if a.path.Write || !slices.Contains(readOnlyKinds, req.Kind) {
			return Ask
		}
		return readOnly
	case actMCP:
		if ro, _ := p.mcpDefault(req); ro {
			return readOnly
		}
		return Ask
	}
	if slices.Contains(readOnlyKinds, req.Kind) && req.MCP == nil {
		return readOnly
	}
	return Ask
}

// mcpDefault reports whether the request's MCP tool is read-only by the
// config or by its trusted server's pinned annotations, and why.
func (p *Policy) mcpDefault(req *Request) (bool, string) {
	if req.MCP == nil {
		return false, ""
	}
	if anyGlob(p.mcpRO[req.MCP.Server], req.MCP.Tool) {
		return true, fmt.Sprintf("%s is listed in read_only_tools", req.MCP.String())
	}
	if req.ctx.MCPHints == nil {
		return false, ""
	}
	h := req.ctx.MCPHints(req.MCP.Server, req.MCP.Tool)
	switch {
	case !h.Known:
		return false, ""
	case !p.mcpTrust[req.MCP.Server]:
		if h.ReadOnly {
			return false, fmt.Sprintf("%s says it is read-only, but its server's annotations are not trusted (trust_annotations)", req.MCP.String())
		}
		return false, ""
	case h.Changed != "":
		return false, fmt.Sprintf("%s changed since it was pinned (%s)", req.MCP.String(), h.Changed)
	case h.ReadOnly:
		return true, fmt.Sprintf("%s is annotated readOnlyHint by its trusted server", req.MCP.String())
	}
	return false, ""
}

// MCPProxy reports whether the broker proxies the stdio MCP server of this
// name: [mcp.<server>] proxy, else [mcp] proxy, else yes.
func (p *Policy) MCPProxy(server string) bool {
	if v, ok := p.mcpProxy[server]; ok {
		return v
	}
	if v, ok := p.mcpProxy[""]; ok {
		return v
	}
	return true
}

// TrustsAnnotations reports whether a server's annotations may relax the
// default (trust_annotations in a file that may loosen).
func (p *Policy) TrustsAnnotations(server string) bool { return p.mcpTrust[server] }

func (p *Policy) defaultReason(req *Request, a action, d Decision) string {
	switch {
	case req.MCP != nil && (a.kind == actMCP || a.kind == actPath) && d == Allow:
		_, why := p.mcpDefault(req)
		return why
	case d == Allow:
		return fmt.Sprintf("kind %q only reads", req.Kind)
	case a.kind == actCommand:
		return "no rule allows this command"
	case a.kind == actPath && a.path.WorkDir:
		return "it runs outside the session's directories and no rule allows acting there"
	case a.kind == actPath && a.path.Write:
		return "no rule allows writing here"
	case a.kind == actURL:
		return "no rule allows fetching this URL"
	case a.kind == actMCP:
		if _, why := p.mcpDefault(req); why != "" {
			return "no rule allows this MCP tool; " + why
		}
		return "no rule allows this MCP tool"
	case p.ReadOnly == "ask" && slices.Contains(readOnlyKinds, req.Kind):
		return `read_only = "ask"`
	}
	if req.Kind == "" {
		return "the request names no kind"
	}
	return fmt.Sprintf("kind %q changes things; no rule allows it", req.Kind)
}
