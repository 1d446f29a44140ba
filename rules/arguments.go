package rules

import (
	"fmt"
	"strings"
)

// A shell request may list among its locations the files its command names:
// claude-agent-acp 0.101 sends `touch claude-marker.txt` with the location
// <cwd>/claude-marker.txt. Such a location says nothing the command does not
// say itself, so the rule that allows the command covers it: `command =
// "touch *"` keeps allowing `touch claude-marker.txt` whichever adapter
// version asks. Only a location that is exactly one of the command's own
// literal arguments, made absolute against the directory the command runs
// in, is covered; and only inside the session's directories (a file
// elsewhere is a place a rule must name). Deny and ask rules on the path,
// protected paths and git repositories are decided before and still
// decide; every other location needs an allowance of its own.

// coveredByCommand turns the default "ask" of a location into the allow of
// the command whose argument it is, when a rule or a remembered answer
// allowed that command. parts are the verdicts on the request's commands,
// decided before its paths.
func (p *Policy) coveredByCommand(req *Request, pv PartVerdict, parts []PartVerdict, fv *fileView) PartVerdict {
	pa := pv.act.path
	if pv.Decision != Ask || pv.Source != "default" || !pa.onlyLocations || pa.WorkDir || req.Script == nil || len(req.Script.Opaque) > 0 {
		return pv
	}
	if !req.insideSessionDirs(fv, pa.Abs) || !req.insideSessionDirs(fv, pa.Resolved) {
		return pv
	}
	for _, part := range parts {
		if part.act.kind != actCommand || part.Decision != Allow || (part.Source != "rule" && part.Source != "remembered") {
			continue
		}
		if !namesAsArgument(part.act.cmd, pa.Abs, req.Dir, p.home) {
			continue
		}
		pv.Decision, pv.Source, pv.Rule = Allow, part.Source, part.Rule
		pv.Reason = fmt.Sprintf("an argument of %q, which %s allows", strings.Join(part.act.cmd.Argv, " "), ruleLabel(part.Rule))
		return pv
	}
	return pv
}

// namesAsArgument reports whether one of the command's literal arguments,
// made absolute against dir and cleaned, is path: `touch x/` names dir/x,
// `touch ./sub/../x` names dir/x; another case, a link's target or another
// directory names something else.
func namesAsArgument(c *SimpleCommand, path, dir, home string) bool {
	if len(c.Opaque) > 0 || len(c.Argv) < 2 {
		return false
	}
	for _, arg := range c.Argv[1:] {
		if abs, ok := absPath(arg, dir, home); ok && abs == path {
			return true
		}
	}
	return false
}

// insideSessionDirs reports whether a path is in the session's cwd or one
// of its additionalDirectories, as given or as their links resolve.
func (r *Request) insideSessionDirs(fv *fileView, path string) bool {
	roots := append([]string{r.ctx.Cwd}, r.ctx.Roots...)
	var resolved []string
	for _, root := range roots {
		if root != "" {
			if abs, ok := absPath(root, "", ""); ok {
				resolved = append(resolved, fv.resolve(abs))
			}
		}
	}
	return under(path, roots) || under(path, resolved)
}

// ruleLabel names a rule for a reason: its id, else where it is written.
func ruleLabel(r *Rule) string {
	switch {
	case r == nil:
		return "a rule"
	case r.Layer == Remembered:
		return "the remembered answer " + r.ID
	case r.ID != "":
		return "rule " + r.ID
	}
	return "the rule at " + r.Where()
}
