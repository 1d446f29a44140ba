package rules

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// MaxProjectFileSize bounds what is read of a project file: a rule file is
// a few kilobytes, and a repository must not make the broker read without
// end.
const MaxProjectFileSize = 1 << 20

// projectLayer is what Load made of the project files that apply to the
// session's directory (see ProjectFiles).
type projectLayer struct {
	// files are the files in force, nearest the session first.
	files []*File
	// problem is why a file, which exists, is not in force: it cannot be
	// read safely or does not parse (the nearest such file).
	problem *ConfigError
	// notes are the warnings that also go to the audit log: settings
	// ignored, and the problem.
	notes    []string
	warnings []string
}

// ProjectFiles are the project files that apply to a session in dir, nearest
// first: dir's own and one in each directory above it, and never above:
//
//   - inside the user's home, up to and including home, past any .git on
//     the way: a .git is what an agent makes with one `git init` or `git
//     clone URL .`, and ending the walk there would take the repository's
//     denies away. A file found above can only add denies and asks; its
//     allows still need the user's trust.
//   - outside home, up to and including the repository's root (the nearest
//     directory holding a .git, directory or file), if that directory and
//     every one walked to reach it is the user's own (see ownDir): in a
//     shared directory (/tmp) anyone can make a .git and a project file.
//     Otherwise, and with no .git on the way, only dir's own file applies,
//     and none in / without a .git.
//
// The walk is lexical, on the cleaned path: no link on the way is followed
// to find a parent, so neither a linked directory nor ".." leads it
// elsewhere.
//
// All of them apply together, each trusted or not by itself, deny beating
// ask beating allow as across layers: a file closer to the session (one a
// checkout or an agent put in a subdirectory) adds its denies and, once
// trusted, its allows, and takes nothing away from the others.
func ProjectFiles(dir, home string) []string {
	if dir == "" {
		return nil
	}
	dir = filepath.Clean(dir)
	if home != "" {
		home = filepath.Clean(home)
	}
	if !filepath.IsAbs(dir) {
		return []string{filepath.Join(dir, ProjectFileName)}
	}
	inHome := home != "" && home != "/" && under(dir, []string{home})
	var files []string
	for d := dir; ; d = filepath.Dir(d) {
		files = append(files, filepath.Join(d, ProjectFileName))
		if inHome {
			if d == home {
				return files
			}
		} else {
			if !ownDir(d) {
				break
			}
			if holdsGit(d) {
				return files
			}
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	if dir == "/" {
		return nil
	}
	return files[:1]
}

// holdsGit reports whether dir is a repository's root: it holds a .git, a
// directory or (a worktree's, a submodule's) a file.
func holdsGit(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, ".git"))
	return err == nil
}

// ownDir reports whether only the user (or root) can change what dir holds:
// it is owned by the user or by root and is writable by neither group nor
// others. Outside home, only such a directory can be a repository's root
// whose project file applies to the directories below.
func ownDir(dir string) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && (int(st.Uid) == os.Getuid() || st.Uid == 0)
}

// loadProject reads the project layer; it never fails. A file that cannot
// be read safely or does not parse leaves, of that file, only the deny and
// ask rules of its version that was in force before (in opts.LastProject),
// and makes the policy ask for everything. A file that was in force before
// but is no longer looked up (a .git or a writable directory appeared on
// the way) keeps its deny and ask rules too, until the broker restarts:
// what the agent can do to the file system must not take a deny away.
func loadProject(opts LoadOptions) projectLayer {
	var l projectLayer
	paths := ProjectFiles(opts.ProjectDir, opts.Home)
	for _, path := range paths {
		l.load(opts, path)
	}
	for _, last := range opts.LastProject {
		if slices.Contains(paths, last.Path) {
			continue
		}
		l.files = append(l.files, last.strictOnly())
		note := fmt.Sprintf("%s is no longer looked up for a session in %s (a .git or a directory others may write is now on the way): its deny and ask rules stay in force until the broker restarts", last.Path, opts.ProjectDir)
		l.notes = append(l.notes, note)
		l.warnings = append(l.warnings, note)
	}
	return l
}

// load reads one project file into the layer.
func (l *projectLayer) load(opts LoadOptions, path string) {
	dir := filepath.Dir(path)
	_, data, exists, err := readProjectFile(dir)
	if !exists {
		return
	}
	var f *File
	if err == nil {
		f, err = Parse(path, Project, string(data))
	} else {
		err = &ConfigError{File: path, Msg: "not read: " + err.Error(),
			Hint: fmt.Sprintf("a project file must be a regular file of at most %d KiB in the project, not a link out of it, a device or a pipe", MaxProjectFileSize>>10)}
	}
	if err != nil {
		var ce *ConfigError
		if !errors.As(err, &ce) {
			ce = &ConfigError{File: path, Msg: err.Error()}
		}
		if l.problem == nil {
			l.problem = ce
		}
		note := fmt.Sprintf("%v: every request of a session in %s is asked until the file is fixed", ce, opts.ProjectDir)
		for _, last := range opts.LastProject {
			if last.Path == path {
				l.files = append(l.files, last.strictOnly())
				note += "; the deny and ask rules of its last readable version stay in force"
				break
			}
		}
		l.notes = append(l.notes, note)
		l.warnings = append(l.warnings, note)
		return
	}
	l.notes = append(l.notes, f.Ignored...)
	l.warnings = append(l.warnings, f.Ignored...)
	trusted, changed, err := isTrusted(opts.StateDir, path, data)
	if err != nil {
		l.warnings = append(l.warnings, fmt.Sprintf("cannot read the trust store (%v): %s is untrusted", err, path))
	}
	f.Trusted = trusted
	switch {
	case changed:
		l.warnings = append(l.warnings, fmt.Sprintf("%s changed since you trusted it: its allow rules are off until you run 'acp-broker trust %s' again", path, dir))
	case !trusted && hasLoosening(f):
		l.warnings = append(l.warnings, fmt.Sprintf("%s is not trusted: its ask and deny rules apply, its allow rules and loosening settings do not ('acp-broker trust %s' after reading it)", path, dir))
	}
	if dir != filepath.Clean(opts.ProjectDir) {
		// Its ./ is the directory its author wrote it in: a repository's
		// deny ./secrets/** denies repo/secrets to a session in repo/sub.
		for _, r := range f.Rules {
			r.Base = dir
		}
	}
	l.files = append(l.files, f)
}

// readProjectFile reads dir's project file if it is a regular file of at
// most MaxProjectFileSize bytes. A symbolic link is followed only to a file
// inside dir. The file is opened without following a link and without
// blocking, and checked on the open descriptor, so that swapping it for a
// device, a pipe or a link between the check and the read is caught: the
// broker never reads its own stdin, /dev/zero or a FIFO as rules. exists is
// false only when there is no file (nor link) of that name.
func readProjectFile(dir string) (path string, data []byte, exists bool, err error) {
	path = filepath.Join(dir, ProjectFileName)
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return path, nil, false, nil
	}
	if err != nil {
		return path, nil, true, err
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return path, nil, true, err
	}
	inside := func(p string) bool { return strings.HasPrefix(p, root+string(filepath.Separator)) }
	target := path
	if fi.Mode()&fs.ModeSymlink != 0 {
		resolved, err := filepath.EvalSymlinks(path)
		if err != nil {
			return path, nil, true, fmt.Errorf("it is a symbolic link that does not lead to a file: %w", err)
		}
		if !inside(resolved) {
			return path, nil, true, fmt.Errorf("it is a symbolic link to %s, outside the project", resolved)
		}
		target = resolved
	}
	f, err := os.OpenFile(target, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return path, nil, true, errors.New("it became a symbolic link while it was read")
		}
		return path, nil, true, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return path, nil, true, err
	}
	if !st.Mode().IsRegular() {
		return path, nil, true, fmt.Errorf("it is not a regular file (%s)", fileType(st.Mode()))
	}
	if opened, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd())); err == nil && !inside(opened) {
		// A directory on the way was swapped for a link after the check
		// (Linux tells what was opened; elsewhere the checks above stand).
		return path, nil, true, fmt.Errorf("it was moved out of the project (to %s) while it was read", opened)
	}
	if st.Size() > MaxProjectFileSize {
		return path, nil, true, fmt.Errorf("it is %d bytes, more than %d", st.Size(), MaxProjectFileSize)
	}
	data, err = io.ReadAll(io.LimitReader(f, MaxProjectFileSize+1))
	if err != nil {
		return path, nil, true, err
	}
	if len(data) > MaxProjectFileSize {
		return path, nil, true, fmt.Errorf("it grew past %d bytes while it was read", MaxProjectFileSize)
	}
	return path, data, true, nil
}

func fileType(m fs.FileMode) string {
	switch {
	case m&fs.ModeDevice != 0 || m&fs.ModeCharDevice != 0:
		return "a device"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return m.Type().String()
}

// strictOnly is a copy of a project file with only what makes things
// stricter: its deny and ask rules and read_only = "ask". Rules are copied,
// since NewPolicy marks them and policies in use still read the originals.
func (f *File) strictOnly() *File {
	c := &File{Path: f.Path, Layer: Project, MCP: map[string]*MCPServer{}}
	if f.ReadOnly == "ask" {
		c.ReadOnly = "ask"
	}
	for _, r := range f.Rules {
		if r.Decision != Allow {
			rc := *r
			c.Rules = append(c.Rules, &rc)
		}
	}
	return c
}

// ProjectFiles returns the project layer's files in force, nearest the
// session first.
func (p *Policy) ProjectFiles() []*File {
	var files []*File
	for _, f := range p.Files {
		if f.Layer == Project {
			files = append(files, f)
		}
	}
	return files
}

// WithoutProjectAllows is the policy with its project file cut to its deny
// and ask rules: what stays in force when the project file changed but the
// other layers cannot be reloaded. A change, even one that cannot be read,
// ends the trust in a project file at once.
func (p *Policy) WithoutProjectAllows() *Policy {
	files := make([]*File, 0, len(p.Files))
	for _, f := range p.Files {
		if f.Layer == Project {
			f = f.strictOnly()
		}
		files = append(files, f)
	}
	q := NewPolicy(files, p.home, p.brokerFiles)
	q.ProjectError, q.ProjectNotes = p.ProjectError, p.ProjectNotes
	return q
}
