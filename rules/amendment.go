package rules

import (
	"slices"
	"strings"
)

// DeriveWithin is Derive for an "always" whose option agreed to commands
// that start with prefix: Codex's accept_execpolicy_amendment, whose prefix
// the model proposed. The proposal is not taken on trust: each part of the
// command is remembered as Derive would remember it (so no prefix the
// programs table does not stand for), only a part the proposal covers, and
// never more broadly than the proposal (`git push *` stays the exact
// command when the proposal was `git push origin`). A part the proposal
// does not cover was never agreed to, and is not remembered.
func DeriveWithin(req *Request, decision Decision, prefix []string) ([]Entry, string) {
	entries, why := Derive(req, decision)
	if len(entries) == 0 {
		return nil, why
	}
	if req.Script == nil || len(prefix) == 0 {
		return nil, "the option's rule is for commands that start with a prefix, and the request has no command it covers"
	}
	var out []Entry
	for _, c := range req.Script.Commands {
		if len(c.Argv) < len(prefix) || !slices.Equal(c.Argv[:len(prefix)], prefix) {
			continue
		}
		pattern, ok := commandPrefix(c)
		if !ok {
			return nil, "a command cannot be seen through"
		}
		if fixed, isPrefix := strings.CutSuffix(pattern, " *"); isPrefix {
			if words := ParseShell(fixed).Commands; len(words) != 1 || len(words[0].Argv) < len(prefix) {
				pattern = quoteWords(c.Argv)
			}
		}
		out = append(out, Entry{Decision: decision, Command: pattern})
	}
	if len(out) == 0 {
		return nil, "the option's rule (commands that start with " + quoteWords(prefix) + ") covers no part of the command"
	}
	return slices.CompactFunc(out, func(a, b Entry) bool { return a.key() == b.key() }), ""
}
