package rules

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFileViewSeesWhatTheFileSystemSays checks that one view asked about
// many paths (answering some from what it saw above them, resolving some in
// one openat2) answers as lstat does, and resolves and finds git
// directories as a walk with one lstat per name does.
func TestFileViewSeesWhatTheFileSystemSays(t *testing.T) {
	root := t.TempDir()
	for _, dir := range []string{"home/.ssh", "project/src", "project/bare/objects", "elsewhere"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, file := range []string{"home/.ssh/id_rsa", "project/src/main.go", "project/bare/HEAD"} {
		if err := os.WriteFile(filepath.Join(root, file), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"project/key":      "../home/.ssh/id_rsa",
		"project/sub":      filepath.Join(root, "home"),
		"project/dangling": "../elsewhere/new/file",
		"project/loop":     "loop",
		"project/src/up":   "..",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	var paths []string
	for _, rel := range []string{
		"project", "project/src/main.go", "project/src/main.go/x", "project/missing", "project/missing/a/b",
		"project/key", "project/key/x", "project/sub/.ssh/id_rsa", "project/sub/missing/x", "project/dangling",
		"project/dangling/x", "project/loop", "project/loop/x", "project/src/up/key", "project/src/up/bare/refs/x",
		"project/bare/HEAD", "project/bare/x/y", "home/.ssh/id_rsa/z", "elsewhere/new/file",
	} {
		paths = append(paths, filepath.Join(root, rel))
	}
	shared := new(fileView)
	for round := range 2 {
		for _, p := range paths {
			if got, want := shared.resolve(p), walkResolve(p); got != want {
				t.Errorf("round %d: resolve(%s) = %s, a walk gives %s", round, p, got, want)
			}
			exists, link := shared.lstat(p)
			fi, err := os.Lstat(p)
			if exists != (err == nil) || link != (err == nil && fi.Mode()&os.ModeSymlink != 0) {
				t.Errorf("round %d: lstat(%s) = exists %v link %v, os.Lstat says %v, %v", round, p, exists, link, fi, err)
			}
			gotDir, gotOK := shared.gitDirectoryAt(p)
			wantDir, wantOK := new(fileView).gitDirectoryAt(p)
			if gotDir != wantDir || gotOK != wantOK {
				t.Errorf("round %d: gitDirectoryAt(%s) = %q %v, a fresh view says %q %v", round, p, gotDir, gotOK, wantDir, wantOK)
			}
		}
	}
}

// walkResolve is resolvePath with no view: one os.Lstat per name, nothing
// inferred, no openat2.
func walkResolve(p string) string {
	resolved, rest, links := "/", splitPath(p), 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		if name == ".." {
			resolved = filepath.Dir(resolved)
			continue
		}
		next := filepath.Join(resolved, name)
		fi, err := os.Lstat(next)
		if err != nil {
			return filepath.Join(append([]string{next}, rest...)...)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			resolved = next
			continue
		}
		if links++; links > maxLinks {
			return filepath.Join(append([]string{next}, rest...)...)
		}
		target, err := os.Readlink(next)
		if err != nil {
			resolved = next
			continue
		}
		if filepath.IsAbs(target) {
			resolved = "/"
		}
		rest = append(splitPath(target), rest...)
	}
	return resolved
}

// splitPath splits a path into its names, leaving out empty ones and ".".
func splitPath(p string) []string {
	var out []string
	for _, name := range strings.Split(p, "/") {
		if name != "" && name != "." {
			out = append(out, name)
		}
	}
	return out
}

// FuzzPathShortcuts holds the path helpers that stand in for filepath.Clean
// and filepath.Join on the per-word path to what those would say.
func FuzzPathShortcuts(f *testing.F) {
	for _, s := range []string{"/", "//", "/a", "/a/", "/a/./b", "/a/../b", "/a//b", "/..", "/.", "a", ".", "..", "", "/a/.b", "/a/b..", "/a/..b"} {
		f.Add(s, "x")
	}
	f.Add("/home/u/src", "-la")
	f.Add(".", "..")
	f.Fuzz(func(t *testing.T, dir, name string) {
		if got, want := isCleanAbs(dir), filepath.IsAbs(dir) && filepath.Clean(dir) == dir; got != want {
			t.Fatalf("isCleanAbs(%q) = %v, want %v", dir, got, want)
		}
		if filepath.Clean(dir) == dir && isName(name) {
			if got, want := childPath(dir, name), filepath.Join(dir, name); got != want {
				t.Fatalf("childPath(%q, %q) = %q, want %q", dir, name, got, want)
			}
		}
	})
}
