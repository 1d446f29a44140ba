package rules

import "path/filepath"

// ForSubagent is the context of a subagent's session of the session ctx
// describes: it has that session's rules and remembered answers, and works
// in workDir with the additional directories workDirs (as the agent
// announced them). A workDir inside the session's directories, by its path
// and through its links, and not in a directory git takes for a repository,
// is what `./` means for the subagent, and those of workDirs inside them
// are its additional directories (a subagent in a worktree of the project
// is not also in the project's own directory). A workDir anywhere
// else is a place of its own (Dir): `./` stays the session's, and the
// subagent's paths there are outside the project. So announcing a subagent
// somewhere gains an agent nothing that the session's rules did not give.
func (ctx Context) ForSubagent(workDir string, workDirs []string) Context {
	roots := append([]string{ctx.Cwd}, ctx.Roots...)
	out := ctx
	if workDir == "" || filepath.Clean(workDir) == filepath.Clean(ctx.Cwd) {
		workDir = ctx.Cwd
	} else if !withinRoots(workDir, roots) {
		out.Dir = workDir
		return out
	}
	// The subagent's own directories, as ACP gives a child its root set:
	// its cwd and its additional directories (the session's, unless the
	// agent announced others).
	out.Cwd, out.Roots = workDir, nil
	for _, dir := range workDirs {
		if withinRoots(dir, roots) {
			out.Roots = append(out.Roots, dir)
		}
	}
	return out
}

// withinRoots reports whether an absolute directory lies in one of roots,
// as given and with the symbolic links of both followed, and is not in a
// directory git takes for a repository (its config runs programs).
func withinRoots(dir string, roots []string) bool {
	if !filepath.IsAbs(dir) {
		return false
	}
	dir = filepath.Clean(dir)
	resolvedRoots := make([]string, 0, len(roots))
	for _, root := range roots {
		if filepath.IsAbs(root) {
			resolvedRoots = append(resolvedRoots, resolvePath(filepath.Clean(root)))
		}
	}
	inside := func(d string) bool { return under(d, roots) || under(d, resolvedRoots) }
	resolved := resolvePath(dir)
	_, inRepository := gitDirectoryAt(resolved)
	return inside(dir) && inside(resolved) && !inRepository
}
