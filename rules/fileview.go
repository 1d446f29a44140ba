package rules

import (
	"errors"
	"os"
	"strings"
	"syscall"
)

// fileView is what one reading or one decision of a request sees of the
// file system. The checks of one request walk the same directories again
// and again (every argument is looked up in the request's directory, every
// written path's ancestors are searched for a git directory), and each
// lookup is a system call, the dearest part of a decision: the view asks
// the file system once per name, and answers for the names below one that
// does not exist or is not a directory without asking, as the kernel would
// (nothing is found below it). A view is made for one reading or decision
// and dropped after it, so the next request looks again: nothing the file
// system says is kept from one request to the next.
type fileView struct {
	names    map[string]nameLookup
	resolved map[string]string
	gitDirs  map[string]bool
}

// nameLookup is what lstat said of a path.
type nameLookup struct {
	exists bool
	link   bool
	// empty is set when nothing can be found below the path: it does not
	// exist, its directory part is not a directory, or it is a file that is
	// neither a directory nor a symbolic link.
	empty bool
}

// lstat reports whether path exists and whether it is a symbolic link, as
// os.Lstat would.
func (v *fileView) lstat(path string) (exists, link bool) {
	if l, ok := v.names[path]; ok {
		return l.exists, l.link
	}
	var l nameLookup
	if !v.belowEmpty(path) {
		l = lstatNow(path)
	} else {
		l.empty = true
	}
	v.note(path, l)
	return l.exists, l.link
}

func (v *fileView) note(path string, l nameLookup) {
	if v.names == nil {
		v.names = map[string]nameLookup{}
	}
	v.names[path] = l
}

// belowEmpty reports whether a directory above a clean absolute path was
// seen to hold nothing: then the path does not exist either.
func (v *fileView) belowEmpty(path string) bool {
	if len(v.names) == 0 || !isCleanAbs(path) {
		return false
	}
	for dir := parentDir(path); ; dir = parentDir(dir) {
		if l, ok := v.names[dir]; ok && l.empty {
			return true
		}
		if dir == "/" {
			return false
		}
	}
}

// parentDir is filepath.Dir of a clean absolute path, without allocating.
func parentDir(path string) string {
	i := strings.LastIndexByte(path, '/')
	if i <= 0 {
		return "/"
	}
	return path[:i]
}

// childPath is filepath.Join of a clean directory and a name (isName),
// without cleaning the result again.
func childPath(dir, name string) string {
	switch dir {
	case "", ".":
		return name
	case "/":
		return "/" + name
	}
	return dir + "/" + name
}

// isCleanAbs reports whether path is absolute and filepath.Clean leaves it
// as it is: no empty, . or .. name and no trailing slash. It is asked of
// every path the view looks up, where Clean would copy it to compare.
func isCleanAbs(path string) bool {
	if path == "/" {
		return true
	}
	if len(path) < 2 || path[0] != '/' || path[len(path)-1] == '/' {
		return false
	}
	start := 1
	for i := 1; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		if name := path[start:i]; name == "" || name == "." || name == ".." {
			return false
		}
		start = i + 1
	}
	return true
}

// lstatNow asks the file system. Only a name that is not there, or a
// directory part that is not a directory, makes the path empty: any other
// failure (a directory that cannot be searched, an I/O error) says nothing
// of the names below it.
func lstatNow(path string) nameLookup {
	var st syscall.Stat_t
	err := syscall.Lstat(path, &st)
	for errors.Is(err, syscall.EINTR) {
		err = syscall.Lstat(path, &st)
	}
	if err != nil {
		return nameLookup{empty: errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR)}
	}
	kind := uint32(st.Mode) & syscall.S_IFMT
	return nameLookup{exists: true, link: kind == syscall.S_IFLNK, empty: kind != syscall.S_IFLNK && kind != syscall.S_IFDIR}
}

// isDir reports whether path, its links followed, is a directory, as
// os.Stat would. It is asked only where a git directory may be, rarely,
// so it is not remembered.
func (v *fileView) isDir(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.IsDir()
}
