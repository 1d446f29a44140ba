package rules

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// modesByStrictness are the modes, the one that allows least first: plan
// allows only what the rules allow and reads, dont-ask denies what default
// would ask, accept-edits allows some of what it asks, bypass most.
var modesByStrictness = []string{"plan", "dont-ask", "default", "accept-edits", "bypass"}

// ApplyMode turns the rules' verdict into the verdict of a permission mode:
//
//   - default: the verdict as it is.
//   - accept-edits: edits and moves inside the session's directories that
//     only a default asked about are allowed too; protected paths never
//     are, nor a request with a path-like rawInput member the broker does
//     not read (a move's "destination").
//   - plan: only what reads is allowed; everything else is denied without
//     asking.
//   - dont-ask: whatever would be asked is denied, for headless runs.
//   - bypass: whatever would be asked is allowed, except what a deny rule, a
//     protected path or a managed ask rule decided, commands that cannot be
//     seen through (they might hide what a deny rule forbids), requests
//     that are not understood or contradict themselves, everything while the
//     project file cannot be read, and calls to an MCP server whose name is
//     not unique in the session.
//
// A switch_mode request always goes to the human, whatever the mode.
func ApplyMode(v Verdict, req *Request, mode string) Verdict {
	if req.Kind == "switch_mode" {
		return v
	}
	switch mode {
	case "accept-edits":
		if v.Decision == Ask && slices.Contains([]string{"edit", "move"}, req.Kind) && editsInside(v, req) {
			return modeVerdict(v, Allow, mode, "accept-edits allows edits inside the session's directories")
		}
	case "plan":
		if v.Decision == Deny || (v.Decision == Allow && onlyReads(v, req)) {
			return v
		}
		return modeVerdict(v, Deny, mode, "plan mode allows only what reads")
	case "dont-ask":
		if v.Decision == Ask {
			return modeVerdict(v, Deny, mode, "dont-ask mode denies what it would ask")
		}
	case "bypass":
		if v.Decision == Ask && bypassable(v) {
			return modeVerdict(v, Allow, mode, "bypass mode allows what it would ask")
		}
	}
	return v
}

func modeVerdict(v Verdict, d Decision, mode, reason string) Verdict {
	v.Decision, v.Source, v.Rule, v.Reason = d, "mode "+mode, nil, reason
	return v
}

// editsInside reports whether every asked part is a write, asked only by a
// default, to a path inside the session's directory or its additional ones:
// the session's own, whatever directory the request says it runs in.
func editsInside(v Verdict, req *Request) bool {
	if v.Source != "default" || len(req.UnreadPaths) > 0 {
		// A path the broker did not read may be outside them.
		return false
	}
	roots := append([]string{req.ctx.Cwd}, req.ctx.Roots...)
	for _, p := range v.Parts {
		if p.Decision == Allow {
			continue
		}
		if p.Source != "default" || p.act.kind != actPath || !p.act.path.Write {
			return false
		}
		if !under(p.act.path.Abs, roots) || !under(p.act.path.Resolved, roots) {
			return false
		}
	}
	return true
}

func under(path string, roots []string) bool {
	for _, r := range roots {
		if r == "" {
			continue
		}
		r = filepath.Clean(r)
		if path == r || strings.HasPrefix(path, r+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// onlyReads reports whether every part of an allowed request reads: a read
// path, a read-only kind with no content, or an MCP tool the config calls
// read-only.
func onlyReads(v Verdict, req *Request) bool {
	for _, p := range v.Parts {
		switch p.act.kind {
		case actPath:
			if p.act.path.Write {
				return false
			}
		case actTool:
			if !slices.Contains(readOnlyKinds, req.Kind) {
				return false
			}
		case actMCP:
			if p.Source != "default" {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// bypassable reports whether bypass mode may allow an asked request.
func bypassable(v Verdict) bool {
	switch v.Source {
	case "not understood", "conflict", "switch_mode", "not see-through", "project file", "ambiguous MCP server":
		return false
	}
	for _, p := range v.Parts {
		if p.Decision != Ask {
			continue
		}
		// What cannot be seen through might hide what a deny rule forbids.
		if p.Source == "protected" || p.Source == "not see-through" || (p.Rule != nil && p.Rule.Layer == Managed) {
			return false
		}
	}
	return true
}

// Protected reports whether a request touches a protected path, names one
// as a command argument, or runs the broker's own command line: what the
// defense-in-depth checks of fs/write_text_file and terminal/create refuse
// outright.
func (p *Policy) Protected(req *Request) (string, bool) {
	// Arguments first: the one a command names says more than the
	// directory it runs in. One view of the file system for the whole
	// request, as Decide has.
	fv := new(fileView)
	if req.Script != nil {
		for i := range req.Script.Commands {
			c := &req.Script.Commands[i]
			if n := c.Normalized(); len(n) > 0 && n[0] == "acp-broker" {
				return "acp-broker's own commands change what agents may do", true
			}
			if arg, pat, ok := p.protectedArgumentIn(fv, req, c); ok {
				return fmt.Sprintf("argument %q names a protected path (%s)", arg, pat), true
			}
		}
	}
	for i := range req.Paths {
		if pat, ok := p.protectedPathIn(fv, &req.Paths[i]); ok {
			return fmt.Sprintf("%s is a protected path (%s)", req.Paths[i].Abs, pat), true
		}
	}
	return "", false
}
