package rules

import "golang.org/x/sys/unix"

// walkFree reports whether the kernel walks a clean absolute path without
// meeting a symbolic link (free), and whether it reached the path's last
// name (exists). openat2's RESOLVE_NO_SYMLINKS refuses a link anywhere on
// the way, the last name included, so when it opens the path, or stops
// where a name is missing or is not a directory, every name it passed is
// no link: what resolvePath would find with one lstat per name. Any other
// answer (a link, an unsearchable directory, a kernel without openat2)
// says nothing, and the caller walks.
func walkFree(path string) (free, exists bool) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS}
	for {
		fd, err := unix.Openat2(unix.AT_FDCWD, path, &how)
		switch err {
		case nil:
			unix.Close(fd)
			return true, true
		case unix.ENOENT, unix.ENOTDIR:
			return true, false
		case unix.EINTR:
			continue
		}
		return false, false
	}
}
