package permission

import (
	"github.com/acp-broker/acp-broker/rules"
	"github.com/acp-broker/acp-broker/session"
)

// A subagent's `./` is its cwd when that lies in its root's directories
// (rules.Context.ForSubagent), so that `./src/**` covers a child's
// worktree. Anchored there, though, the root's own `./` deny and ask rules
// no longer name the root's paths: a child announced in ./gen would escape
// `deny ./gen/**`, and the root's `allow ./src/**` would cover gen/src. So
// a child's request is read once more as its root's, run at the child's
// cwd, and a deny the root's rules make of it there, or an ask a rule makes
// of what the child's reading allows, stands.

// rootReading is the context a subagent's request is read in as its
// root's: the root's directories, with the child's cwd as where it runs.
// It reports false when the child's `./` is its root's anyway (the same
// cwd, or a place of its own outside the root's directories).
func rootReading(ctx rules.Context, info session.Info) (rules.Context, bool) {
	if info.Parent == "" || ctx.Dir != "" || ctx.Cwd == info.Cwd {
		return ctx, false
	}
	root := ctx
	root.Cwd, root.Roots, root.Dir = info.Cwd, info.AdditionalDirectories, ctx.Cwd
	return root, true
}

// stricterAtRoot returns v, or the root's verdict on the same request where
// that is stricter: a deny, or a rule's ask of what v allows. read reads
// the request in a context.
func stricterAtRoot(p *rules.Policy, v rules.Verdict, ctx rules.Context, info session.Info, read func(rules.Context) *rules.Request) rules.Verdict {
	root, ok := rootReading(ctx, info)
	if !ok || v.Decision == rules.Deny {
		return v
	}
	rv := p.Decide(read(root))
	if rv.Decision == rules.Deny || (rv.Decision == rules.Ask && rv.Source == "rule" && v.Decision == rules.Allow) {
		rv.Reason += " (read at the session's directory " + info.Cwd + ", of which the subagent's cwd " + ctx.Cwd + " is a part)"
		return rv
	}
	return v
}
