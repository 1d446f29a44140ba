package rules

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/bmatcuk/doublestar/v4"
)

// pathPattern is a doublestar glob with an explicit anchor: `/abs/...`,
// `~/...` (the user's home), `./...` (the session's working directory) or
// `**/...` (anywhere).
type pathPattern struct {
	src    string
	anchor byte // '/', '~', '.', '*'
	rest   string
	// prefix is the literal start of rest, before any wildcard: a path that
	// does not start with it (after the anchor) cannot match, which is
	// checked before the glob is.
	prefix string
}

func compilePathPattern(src string) (*pathPattern, error) {
	p := &pathPattern{src: src}
	switch {
	case strings.HasPrefix(src, "/"):
		p.anchor, p.rest = '/', src
	case src == "~" || strings.HasPrefix(src, "~/"):
		p.anchor, p.rest = '~', strings.TrimPrefix(strings.TrimPrefix(src, "~"), "/")
	case src == "." || strings.HasPrefix(src, "./"):
		p.anchor, p.rest = '.', strings.TrimPrefix(strings.TrimPrefix(src, "."), "/")
	case strings.HasPrefix(src, "**/"):
		p.anchor, p.rest = '*', src
	default:
		return nil, fmt.Errorf("path pattern %q has no anchor", src)
	}
	if !doublestar.ValidatePattern(p.rest) && p.rest != "" {
		return nil, fmt.Errorf("path pattern %q is not a valid glob", src)
	}
	if strings.Contains(p.rest, "..") {
		return nil, fmt.Errorf("path pattern %q contains '..'", src)
	}
	if p.anchor != '*' {
		p.prefix = p.rest[:strings.IndexAny(p.rest+"*", `*?[{\`)]
	}
	return p, nil
}

// mayMatch is the cheap test before match: the path starts with the
// pattern's base directory and literal prefix.
func (p *pathPattern) mayMatch(path, home, cwd string) bool {
	switch p.anchor {
	case '~':
		return home != "" && strings.HasPrefix(path, home) && strings.HasPrefix(strings.TrimPrefix(path[len(home):], "/"), p.prefix)
	case '.':
		return cwd != "" && strings.HasPrefix(path, cwd) && strings.HasPrefix(strings.TrimPrefix(path[len(cwd):], "/"), p.prefix)
	case '/':
		return strings.HasPrefix(path, p.prefix)
	}
	return true
}

// match reports whether the absolute, clean path matches, with `~` and `.`
// standing for home and cwd.
func (p *pathPattern) match(path, home, cwd string) bool {
	if !p.mayMatch(path, home, cwd) {
		return false
	}
	var pattern string
	switch p.anchor {
	case '/', '*':
		pattern = p.rest
	case '~':
		if home == "" {
			return false
		}
		pattern = joinPattern(home, p.rest)
	case '.':
		if cwd == "" {
			return false
		}
		pattern = joinPattern(cwd, p.rest)
	}
	if p.anchor == '*' {
		// `**/x` matches x at any depth, the root included.
		ok, _ := doublestar.Match("/"+pattern, path)
		return ok
	}
	ok, _ := doublestar.Match(pattern, path)
	return ok
}

func joinPattern(dir, rest string) string {
	dir = escapeGlob(filepath.Clean(dir))
	if rest == "" {
		return dir
	}
	if dir == "/" {
		return "/" + rest
	}
	return dir + "/" + rest
}

// escapeGlob makes a directory name literal inside a pattern.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '{', '}', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// absPath makes a path absolute against cwd, expanding a leading `~`, and
// cleans it. It reports false for a relative path with no cwd to anchor it.
func absPath(p, cwd, home string) (string, bool) {
	switch {
	case p == "~" || strings.HasPrefix(p, "~/"):
		if home == "" {
			return "", false
		}
		// Join cleans what it joins.
		return filepath.Join(home, strings.TrimPrefix(p, "~")), true
	case strings.HasPrefix(p, "~"):
		// ~user: another user's home, which the broker cannot know.
		return "", false
	case !filepath.IsAbs(p):
		if cwd == "" || !filepath.IsAbs(cwd) {
			return "", false
		}
		if isName(p) && isCleanAbs(cwd) {
			// Most arguments are one word: what Join would make of it.
			return childPath(cwd, p), true
		}
		return filepath.Join(cwd, p), true
	}
	return filepath.Clean(p), true
}

// isName reports whether p is one name of a path: not empty, no slash,
// and not . or ..
func isName(p string) bool {
	return p != "" && p != "." && p != ".." && !strings.Contains(p, "/")
}

// maxLinks bounds symbolic-link resolution, as the kernel does.
const maxLinks = 40

// resolvePath follows symbolic links in an absolute, clean path, component
// by component with lstat, so a link whose target does not exist (yet) still
// resolves to that target: writing through a dangling link creates its
// target. Components that do not exist are kept as they are.
func resolvePath(p string) string { return new(fileView).resolve(p) }

// resolve is resolvePath as the view sees the file system.
func (v *fileView) resolve(p string) string {
	if r, ok := v.resolved[p]; ok {
		return r
	}
	r := v.followLinks(p)
	if v.resolved == nil {
		v.resolved = map[string]string{}
	}
	v.resolved[p] = r
	return r
}

func (v *fileView) followLinks(p string) string {
	if isCleanAbs(p) && v.unseen(p) > 2 {
		// One system call can tell that no name on the way is a link, where
		// the walk below asks one per name.
		if free, exists := walkFree(p); free {
			if exists {
				v.noteWalked(p)
			}
			return p
		}
	}
	links := 0
	resolved := "/"
	rest := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		if name == "" || name == "." {
			continue
		}
		if name == ".." {
			resolved = filepath.Dir(resolved)
			continue
		}
		// resolved is clean and name a name: Join would not change it.
		next := childPath(resolved, name)
		exists, link := v.lstat(next)
		if !exists || !link {
			resolved = next
			if !exists {
				// Nothing below a missing component can be a link.
				return filepath.Clean(filepath.Join(append([]string{resolved}, rest...)...))
			}
			continue
		}
		links++
		if links > maxLinks {
			return filepath.Clean(filepath.Join(append([]string{next}, rest...)...))
		}
		target, err := os.Readlink(next)
		if err != nil {
			resolved = next
			continue
		}
		if filepath.IsAbs(target) {
			resolved = "/"
		}
		rest = append(strings.Split(strings.Trim(target, "/"), "/"), rest...)
	}
	return resolved
}

// unseen counts the names of a clean absolute path, from the root down,
// that the view has not looked up.
func (v *fileView) unseen(p string) int {
	n := 0
	for dir := p; dir != "/"; dir = parentDir(dir) {
		if _, ok := v.names[dir]; !ok {
			n++
		}
	}
	return n
}

// noteWalked notes what a walk without links that reached p showed: every
// directory on the way exists and is no link, and so does p, of a kind not
// known.
func (v *fileView) noteWalked(p string) {
	v.note(p, nameLookup{exists: true})
	for dir := parentDir(p); dir != "/"; dir = parentDir(dir) {
		v.note(dir, nameLookup{exists: true})
	}
}

// protectedPaths are never allowed by a default, a mode or a rule that does
// not name them and unlock them: secrets an agent must not read, history it
// must not rewrite, and the broker's own configuration and state, so that an
// agent cannot edit its way to more permissions.
type protectedPaths struct {
	readWrite []*pathPattern
	write     []*pathPattern
	home      string
	// markers are substrings every protected path contains; a path with none
	// of them is passed over without matching every pattern.
	markers []string
	// bases are the literal directories (lower case) of the protected
	// patterns anchored at / or ~: a directory above one of them (~,
	// ~/.config, /) holds protected paths.
	bases []string
}

// editorConfigs are where editors keep the agent servers they start, the
// broker among them: an agent rewriting them removes the broker from the next
// session. Writes are protected, reads are not (`cat ~/.config/zed/settings.json`
// is how an agent helps with the editor). Each is under ~/.config and, when
// set, under $XDG_CONFIG_HOME.
var editorConfigs = []string{"zed", "nvim", "emacs"}

// editorHomeConfigs are the editors' agent configuration files directly in
// the home directory.
var editorHomeConfigs = []string{"~/.jetbrains", "~/.jetbrains/**", "~/.emacs", "~/.emacs.el", "~/.emacs.d", "~/.emacs.d/**"}

// shellStartupFiles set the environment the editor, launched from a login
// shell or reading one (Zed does), starts the broker with: a PATH entry or
// an alias there puts another program in the broker's place.
var shellStartupFiles = []string{"~/.profile", "~/.bash_profile", "~/.bash_login", "~/.bashrc",
	"~/.zshenv", "~/.zprofile", "~/.zshrc", "~/.zlogin", "~/.pam_environment"}

// agentPermissionFiles are where the agents keep their own permission settings, in
// a project or the home directory: Claude Code's permissions.allow rules,
// defaultMode and hooks, its subagents' permissionMode, Gemini CLI's
// allowed tools, Codex's config and exec-policy rules. Written there, the
// agent runs what it likes without asking, as in a blind mode (see
// KnownAgents), and the broker never sees it.
var agentPermissionFiles = []string{"**/.claude/settings.json", "**/.claude/settings.local.json", "**/.claude/agents/**",
	"**/.gemini/settings.json", "**/.codex", "**/.codex/**"}

// shellConfigs are the same, as directories under ~/.config (and
// $XDG_CONFIG_HOME).
var shellConfigs = []string{"fish", "environment.d"}

// launchNames are the program names the editor starts the broker by: a file
// of that name in a directory of $PATH shadows the broker (or stands in for
// it), wherever the broker itself is installed.
func launchNames() []string {
	names := []string{"acp-broker"}
	for _, exe := range brokerExecutable() {
		names = append(names, filepath.Base(exe))
	}
	var out []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if !filepath.IsAbs(dir) {
			continue
		}
		for _, name := range slices.Compact(slices.Sorted(slices.Values(names))) {
			out = append(out, escapeGlob(filepath.Join(filepath.Clean(dir), name)))
		}
	}
	return out
}

// newProtectedPaths builds the protected set; brokerFiles are the broker's
// own config, trust and state locations (directories protect everything
// below them).
func newProtectedPaths(home string, brokerFiles []string) *protectedPaths {
	pp := &protectedPaths{home: home, markers: []string{".ssh", ".gnupg", ".aws", "gcloud", ".env", ".git", "acp-broker", "zed", "nvim", "emacs", ".jetbrains"}}
	for _, src := range []string{
		"~/.ssh", "~/.ssh/**", "~/.gnupg", "~/.gnupg/**", "~/.aws", "~/.aws/**",
		"~/.config/gcloud", "~/.config/gcloud/**",
		"**/.env", "**/.env.*",
		"**/.acp-broker.toml",
	} {
		p, _ := compilePathPattern(src)
		pp.readWrite = append(pp.readWrite, p)
	}
	for _, f := range brokerFiles {
		if f == "" || !filepath.IsAbs(f) {
			continue
		}
		pp.markers = append(pp.markers, strings.ToLower(filepath.Base(f)))
		for _, src := range []string{escapeGlob(filepath.Clean(f)), escapeGlob(filepath.Clean(f)) + "/**"} {
			if p, err := compilePathPattern(strings.ToLower(src)); err == nil {
				pp.readWrite = append(pp.readWrite, p)
			}
		}
	}
	// A file named HEAD makes its directory a git repository (with objects/
	// beside it), whose config can run programs (gitDirectoryAt).
	writeOnly := append([]string{"**/.git", "**/.git/**", "**/HEAD"}, editorHomeConfigs...)
	writeOnly = append(writeOnly, shellStartupFiles...)
	writeOnly = append(writeOnly, agentPermissionFiles...)
	pp.markers = append(pp.markers, ".claude", ".gemini", ".codex")
	writeOnly = append(writeOnly, launchNames()...)
	pp.markers = append(pp.markers, "head", ".profile", ".bash", ".zsh", "fish", "environment")
	for _, exe := range brokerExecutable() {
		writeOnly = append(writeOnly, escapeGlob(exe))
		pp.markers = append(pp.markers, strings.ToLower(filepath.Base(exe)))
	}
	configDirs := []string{"~/.config"}
	if xdg := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(xdg) {
		configDirs = append(configDirs, escapeGlob(filepath.Clean(xdg)))
	}
	for _, dir := range configDirs {
		for _, editor := range append(slices.Clone(editorConfigs), shellConfigs...) {
			writeOnly = append(writeOnly, dir+"/"+editor, dir+"/"+editor+"/**")
		}
	}
	for _, src := range writeOnly {
		if p, err := compilePathPattern(strings.ToLower(src)); err == nil {
			pp.write = append(pp.write, p)
		}
	}
	for _, p := range append(slices.Clone(pp.readWrite), pp.write...) {
		var base string
		switch p.anchor {
		case '~':
			if home == "" {
				continue
			}
			base = filepath.Join(strings.ToLower(home), p.prefix)
		case '/':
			base = p.prefix
		default:
			continue
		}
		if p.prefix != p.rest {
			// The literal part ends inside a name with a wildcard.
			base = filepath.Dir(base + "x")
		}
		pp.bases = append(pp.bases, filepath.Clean(base))
	}
	return pp
}

// brokerExecutable is the running broker's executable, as started and with
// links resolved: rewriting it changes what every later session runs.
var brokerExecutable = sync.OnceValue(func() []string {
	exe, err := os.Executable()
	if err != nil || !filepath.IsAbs(exe) {
		return nil
	}
	exe = filepath.Clean(exe)
	out := []string{exe}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil && resolved != exe {
		out = append(out, resolved)
	}
	return out
})

// holdsProtected reports whether a directory is one a protected path is in,
// or above one: the directory of a protected pattern or one above it (~,
// ~/.config, /), a directory of the session (which holds .git and
// .acp-broker.toml) or one above it, or a directory that holds a .git or a
// .acp-broker.toml. Writing into it, or removing it, can reach them.
func (pp *protectedPaths) holdsProtected(v *fileView, dir string, sessionDirs []string) (string, bool) {
	// Cleaned once here, and the bases when built, rather than both in
	// isAncestor for every base.
	dir = filepath.Clean(dir)
	lower := strings.ToLower(dir)
	for _, base := range pp.bases {
		if isCleanAncestor(lower, base) {
			return base, true
		}
	}
	for _, d := range sessionDirs {
		if d != "" && isAncestor(lower, strings.ToLower(d)) {
			return "the session's directory " + d, true
		}
	}
	for _, name := range []string{".git", ProjectFileName} {
		if exists, _ := v.lstat(childPath(dir, name)); exists {
			return childPath(dir, name), true
		}
	}
	return "", false
}

// protects reports which protected pattern, if any, covers a path. Names
// are compared without regard to case: on a case-insensitive file system
// ~/.SSH is ~/.ssh.
func (pp *protectedPaths) protects(path string, write bool) (string, bool) {
	lower := strings.ToLower(path)
	if !slices.ContainsFunc(pp.markers, func(m string) bool { return strings.Contains(lower, m) }) {
		return "", false
	}
	home := strings.ToLower(pp.home)
	for _, p := range pp.readWrite {
		if p.match(lower, home, "") {
			return p.src, true
		}
	}
	if write {
		for _, p := range pp.write {
			if p.match(lower, home, "") {
				return p.src, true
			}
		}
	}
	return "", false
}

// gitDirectoryAt finds a directory at or above path that git takes for a
// repository (a HEAD file beside an objects directory, as git's
// is_git_directory checks), whatever it is called. Its config and hooks run
// programs at the next git command there: `evil/` with core.worktree and
// core.fsmonitor in evil/config makes `git status` run in evil, or `git -C
// evil status`, run a program. What a request writes (an edit, a
// redirection, a command's destination) must not be inside one, as for .git.
func gitDirectoryAt(path string) (string, bool) { return new(fileView).gitDirectoryAt(path) }

// gitDirectoryAt is the package function as the view sees the file system.
func (v *fileView) gitDirectoryAt(path string) (string, bool) {
	if !filepath.IsAbs(path) {
		return "", false
	}
	for dir := filepath.Clean(path); ; dir = parentDir(dir) {
		if v.isGitDirectory(dir) {
			return dir, true
		}
		if dir == "/" {
			return "", false
		}
	}
}

// isGitDirectory reports whether dir has a HEAD beside an objects
// directory.
func (v *fileView) isGitDirectory(dir string) bool {
	if is, ok := v.gitDirs[dir]; ok {
		return is
	}
	head, _ := v.lstat(childPath(dir, "HEAD"))
	is := head && v.isDir(childPath(dir, "objects"))
	if v.gitDirs == nil {
		v.gitDirs = map[string]bool{}
	}
	v.gitDirs[dir] = is
	return is
}
