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

// TestPickForRejectKeepsTheTurn: a broker deny answers with the reject that
// lets the agent go on with something else, on the option lists the real
// adapters send, in whichever order they come; never with one whose _meta
// says it writes a rule; else with the first reject_once.
func TestPickForRejectKeepsTheTurn(t *testing.T) {
	read := func(list string) []option {
		t.Helper()
		p, err := readPermissionParams(json.RawMessage(`{"toolCall":{"toolCallId":"t"},"options":` + list + `}`))
		if err != nil {
			t.Fatal(err)
		}
		return p.Options
	}
	const (
		codexAllowOnce = `{"optionId":"allow_once","name":"Yes, proceed","kind":"allow_once"}`
		codexDecline   = `{"optionId":"decline","name":"No, continue without running it","kind":"reject_once"}`
		codexCancel    = `{"optionId":"cancel","name":"No, and tell Codex what to do differently","kind":"reject_once"}`
		// codex-acp 2.x's options for JetBrains AIR carry a description.
		airDecline = `{"optionId":"decline","name":"Deny","kind":"reject_once","_meta":{"permission":{"version":1,"description":"Decline this request and continue."}}}`
		airCancel  = `{"optionId":"cancel","name":"Cancel","kind":"reject_once","_meta":{"permission":{"version":1,"description":"Cancel this request"}}}`
	)
	cases := []struct {
		name, list, want string
	}{
		// codex-acp 2.x (commandDecisionOptions) keeps availableDecisions' order among the rejects.
		{"codex-acp 2.x, decline first", `[` + codexAllowOnce + `,` + codexDecline + `,` + codexCancel + `]`, "decline"},
		{"codex-acp 2.x, cancel first", `[` + codexAllowOnce + `,` + codexCancel + `,` + codexDecline + `]`, "decline"},
		{"codex-acp 2.6.0 with Codex 0.166: no decline", `[` + codexAllowOnce + `,{"optionId":"accept_execpolicy_amendment","name":"Yes, and don't ask again for commands that start with ` + "`npm install`" + `","kind":"allow_always"},` + codexCancel + `]`, "cancel"},
		{"codex-acp 2.x network approval: the host block is passed over", `[{"optionId":"allow_once","name":"Yes, just this once","kind":"allow_once"},{"optionId":"apply_network_policy_amendment:1","name":"No, and block this host in the future","kind":"reject_always"},` + codexCancel + `,` + codexDecline + `]`, "decline"},
		{"codex-acp 2.x MCP question fallback for AIR", `[{"optionId":"accept","name":"Allow","kind":"allow_once"},` + airCancel + `,` + airDecline + `]`, "decline"},
		{"the Rust codex-acp: denied continues, abort stops", `[{"optionId":"approved","name":"Yes","kind":"allow_once"},{"optionId":"abort","name":"No, and tell Codex what to do differently","kind":"reject_once"},{"optionId":"denied","name":"No, continue without running it","kind":"reject_once"}]`, "denied"},
		{"claude-agent-acp 0.101", `[{"optionId":"allow-once","name":"Yes","kind":"allow_once"},{"optionId":"reject","name":"No","kind":"reject_once"}]`, "reject"},
		{"claude-agent-acp, reject first", `[{"optionId":"reject","name":"No","kind":"reject_once"},{"optionId":"allow-with-updates","name":"Yes, and don't ask again for these commands","kind":"allow_always"},{"optionId":"allow-once","name":"Yes","kind":"allow_once"}]`, "reject"},
		{"gemini-cli 0.61", `[{"optionId":"proceed_always","name":"Always Allow","kind":"allow_always"},{"optionId":"proceed_once","name":"Allow","kind":"allow_once"},{"optionId":"cancel","name":"Reject","kind":"reject_once"}]`, "cancel"},
		{"a decline whose _meta writes a rule is passed over", `[` + codexAllowOnce + `,{"optionId":"decline","name":"No, continue without running it","kind":"reject_once","_meta":{"permission":{"version":1,"changes":[{"type":"policy_rule"}]}}},` + codexCancel + `]`, "cancel"},
		{"discontinue is no continue", `[{"optionId":"a","name":"No, discontinue","kind":"reject_once"},{"optionId":"b","name":"No, continue","kind":"reject_once"}]`, "b"},
		{"do not try to continue", `[{"optionId":"a","name":"No, do not try to continue","kind":"reject_once"},{"optionId":"b","name":"Decline and continue","kind":"reject_once"}]`, "b"},
		{"continue? no, abort", `[{"optionId":"a","name":"Continue? No, abort","kind":"reject_once"},{"optionId":"b","name":"No, continue without it","kind":"reject_once"}]`, "b"},
		{"a listed id before a name", `[{"optionId":"a","name":"No, continue","kind":"reject_once"},{"optionId":"denied","name":"No","kind":"reject_once"}]`, "denied"},
		{"a name that says it does not continue", `[{"optionId":"stop","name":"No, do not continue","kind":"reject_once"},{"optionId":"no","name":"No","kind":"reject_once"}]`, "stop"},
	}
	for _, c := range cases {
		got, ok := pickFor(read(c.list), []string{"reject_once", "reject_always"})
		if !ok || got.OptionID != c.want {
			t.Errorf("%s: picked %q (%v), want %q", c.name, got.OptionID, ok, c.want)
		}
	}
}

// TestSaysContinue: a reject's words keep the turn only when "continue" is
// a word of its own, not negated, and nothing in them ends the turn.
func TestSaysContinue(t *testing.T) {
	for words, want := range map[string]bool{
		"No, continue without running it":    true,
		"Decline this request and continue.": true,
		"Skip it; CONTINUING with the rest":  true,
		"discontinue":                        false,
		"No, discontinue the task":           false,
		"do not try to continue":             false,
		"No, do not continue":                false,
		"Don't continue":                     false,
		"Don’t continue":                     false,
		"You cannot continue":                false,
		"Continue? No, abort":                false,
		"Stop, then continue later":          false,
		"Never continue":                     false,
		"Cancel and continue":                false,
		"End the turn; continue later":       false,
		"Halt, then continue":                false,
		"It aborts; it continues":            false,
		"continued":                          false,
		"":                                   false,
	} {
		if got := saysContinue(words); got != want {
			t.Errorf("saysContinue(%q) = %v, want %v", words, got, want)
		}
	}
}

// TestPickForListedIDsFirst: a reject whose id an agent is known to send
// for "go on" is picked before one whose words say so.
func TestPickForListedIDsFirst(t *testing.T) {
	p, err := readPermissionParams(json.RawMessage(`{"toolCall":{"toolCallId":"t"},"options":[{"optionId":"x","name":"No, continue","kind":"reject_once"},{"optionId":"decline","name":"No","kind":"reject_once"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := pickFor(p.Options, []string{"reject_once", "reject_always"}); !ok || got.OptionID != "decline" {
		t.Errorf("picked %q (%v), want decline", got.OptionID, ok)
	}
}
