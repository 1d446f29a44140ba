package rules

import "strings"

// MCPNameCollision returns a server of the session whose name an agent may
// confuse with server's, if there is one: the same name twice, the same
// name in another case, or names that the agents' mangling makes one.
// Claude Code names a tool mcp__<server>__<tool> and Gemini CLI
// <server>_<tool>, both with the characters a function name cannot hold
// replaced by "_"; so "a_b" with tool "c" and "a" with tool "b_c" are one
// name, and "my.docs" is "my_docs". A call to such a server may go to
// either, so nothing the broker knows of one (its hints, its name in a rule)
// may decide a call to the other.
func MCPNameCollision(server string, servers []string) (string, bool) {
	key := mcpNameKey(server)
	seen := 0
	other := ""
	for _, s := range servers {
		k := mcpNameKey(s)
		if k == key || strings.HasPrefix(k, key+"_") || strings.HasPrefix(key, k+"_") {
			seen++
			if s != server || other == "" {
				other = s
			}
		}
	}
	// server itself is usually in the list; a second match is the collision.
	if seen >= 2 || (seen == 1 && other != server) {
		return other, true
	}
	return "", false
}

// MCPNameCollisions lists, once each, the pairs of a session's servers
// whose names collide.
func MCPNameCollisions(servers []string) [][2]string {
	var out [][2]string
	for i, a := range servers {
		for _, b := range servers[i+1:] {
			if other, ok := MCPNameCollision(a, []string{a, b}); ok && other == b {
				out = append(out, [2]string{a, b})
			}
		}
	}
	return out
}

// mcpNameKey is a server name as an agent may see it: lower case, with
// every character but a letter or a digit as "_".
func mcpNameKey(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '_'
	}, s)
}
