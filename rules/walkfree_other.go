//go:build !linux

package rules

// walkFree has no single system call to stand on here: the caller walks.
func walkFree(path string) (free, exists bool) { return false, false }
