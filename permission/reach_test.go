package permission

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestOptionReach(t *testing.T) {
	withChanges := func(changes string) json.RawMessage {
		return json.RawMessage(`{"permission":{"version":1,"changes":` + changes + `}}`)
	}
	cases := []struct {
		name  string
		o     option
		scope string
		once  bool
	}{
		{"allow_once without _meta", option{OptionID: "allow_once", Kind: "allow_once"}, "once", true},
		{"allow_always without _meta", option{OptionID: "allow-with-updates", Kind: "allow_always"}, "persistent", false},
		{"codex for the session", option{OptionID: "allow_for_session", Kind: "allow_always"}, "session", false},
		{"codex sandbox grant for the turn", option{OptionID: "allow_permissions_turn", Kind: "allow_once"}, "turn", false},
		{"codex network amendment", option{OptionID: "apply_network_policy_amendment:1", Kind: "reject_always"}, "persistent", false},
		{"_meta without changes says nothing", option{OptionID: "allow_once", Kind: "allow_once", Meta: json.RawMessage(`{"permission":{"version":1,"description":"Run it"}}`)}, "once", true},
		{"no changes", option{OptionID: "x", Kind: "allow_once", Meta: withChanges(`[]`)}, "once", true},
		{"a grant without lifetime", option{OptionID: "x", Kind: "allow_once", Meta: withChanges(`[{"type":"grant"}]`)}, "once", true},
		{"a policy rule without lifetime is persistent", option{OptionID: "x", Kind: "allow_once", Meta: withChanges(`[{"type":"policy_rule"}]`)}, "once", false},
		{"a grant for the turn", option{OptionID: "x", Kind: "allow_once", Meta: withChanges(`[{"type":"grant","lifetime":{"scope":"turn"}}]`)}, "once", false},
		{"an always for the session", option{OptionID: "x", Kind: "allow_always", Meta: withChanges(`[{"type":"policy_rule","lifetime":{"scope":"session"}}]`)}, "session", false},
		{"the broadest change counts, the narrower of id and _meta is remembered", option{OptionID: "x", Kind: "allow_always", Meta: withChanges(`[{"type":"grant"},{"type":"grant","lifetime":{"scope":"turn"}}]`)}, "turn", false},
		{"an unknown type", option{OptionID: "x", Kind: "allow_always", Meta: withChanges(`[{"type":"sandbox"}]`)}, "", false},
		{"an unknown lifetime", option{OptionID: "x", Kind: "allow_always", Meta: withChanges(`[{"type":"grant","lifetime":{"scope":"workspace"}}]`)}, "", false},
		{"unreadable changes", option{OptionID: "x", Kind: "allow_once", Meta: withChanges(`{"type":"grant"}`)}, "", false},
		{"a member in another case", option{OptionID: "x", Kind: "allow_always", Meta: withChanges(`[{"type":"policy_rule","Lifetime":{"scope":"session"}}]`)}, "", false},
		{"a type that is not a string", option{OptionID: "x", Kind: "allow_once", Meta: withChanges(`[{"type":1}]`)}, "", false},
		{"a change without a type", option{OptionID: "x", Kind: "allow_once", Meta: withChanges(`[{}]`)}, "", false},
		{"Permission in another case", option{OptionID: "x", Kind: "allow_once", Meta: json.RawMessage(`{"Permission":{"changes":[]}}`)}, "", false},
	}
	for _, c := range cases {
		r := optionReach(c.o)
		if r.scope != c.scope || answersOnlyThis(c.o) != c.once {
			t.Errorf("%s: scope %q (%s), once %v; want %q, %v", c.name, r.scope, r.why, answersOnlyThis(c.o), c.scope, c.once)
		}
	}
}

func TestExecPolicyPrefix(t *testing.T) {
	name := func(prefix string) string { return execPolicyNamePrefix + prefix + "`" }
	cases := []struct {
		name   string
		want   []string
		unread bool
	}{
		{name("git push"), []string{"git", "push"}, false},
		{name("npm run 'build prod'"), []string{"npm", "run", "build prod"}, false},
		{name("cd x && rm -rf y"), nil, true},
		{name("make $(evil)"), nil, true},
		{name("X=1 make"), nil, true},
		{name("a`b"), nil, true},
		{"Yes, and don't ask again for commands that start with git", nil, true},
		{"Always", nil, true},
	}
	for _, c := range cases {
		got, unread := execPolicyPrefix(c.name)
		if !slices.Equal(got, c.want) || unread != c.unread {
			t.Errorf("%q: %q, unread %v; want %q, %v", c.name, got, unread, c.want, c.unread)
		}
	}
}
