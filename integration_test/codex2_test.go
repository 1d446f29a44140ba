//go:build linux

package integration

import (
	"fmt"
	"strings"
	"testing"
)

// The tests in this file pin the broker against codex-acp 2.x's permission
// requests, in the exact shapes @agentclientprotocol/codex-acp 2.6.0 builds
// for a client that is not JetBrains AIR (dist/index.js: CommandReporter
// .permission, commandDecisionOptions, fileChangeDecisionOptions,
// permissionProfileOptions): commands as rawInput {command: the command with
// its shell prefix stripped, cwd}, options with ids allow_once,
// allow_for_session, accept_execpolicy_amendment, decline, cancel,
// apply_network_policy_amendment:<i>, and no _meta on request or options.
// codex-acp maps an option id it did not offer, and a cancelled answer, to
// "cancel".

// codexCommand is a command approval for a command item not yet started.
func codexCommand(id, command string) string {
	return fmt.Sprintf(`{"toolCallId":"call_%s","kind":"execute","status":"pending","title":%q,"rawInput":{"command":%q,"cwd":"$CWD"}}`, id, command, command)
}

// codexAmendment is the accept_execpolicy_amendment option for a proposed
// prefix rule, named as codex-acp names it.
func codexAmendment(prefix string) string {
	return fmt.Sprintf(`{"optionId":"accept_execpolicy_amendment","name":%q,"kind":"allow_always"}`, "Yes, and don't ask again for commands that start with `"+prefix+"`")
}

const (
	codexAllowOnce       = `{"optionId":"allow_once","name":"Yes, proceed","kind":"allow_once"}`
	codexAllowForSession = `{"optionId":"allow_for_session","name":"Yes, and don't ask again for this command in this session","kind":"allow_always"}`
	codexDecline         = `{"optionId":"decline","name":"No, continue without running it","kind":"reject_once"}`
	codexCancel          = `{"optionId":"cancel","name":"No, and tell Codex what to do differently","kind":"reject_once"}`
)

// codex2Options is the option list of a command approval: what 2.6.0 with
// Codex 0.166 offers (availableDecisions accept, the amendment, cancel), or
// the whole default list (no availableDecisions).
func codex2Options(prefix string, full bool) string {
	if full {
		return "[" + strings.Join([]string{codexAllowOnce, codexAllowForSession, codexAmendment(prefix), codexDecline, codexCancel}, ",") + "]"
	}
	return "[" + strings.Join([]string{codexAllowOnce, codexAmendment(prefix), codexCancel}, ",") + "]"
}

// codexNetworkOptions is a network approval's list: once, for the
// conversation, the amendments (allow, and block as reject_always), decline,
// cancel.
const codexNetworkOptions = `[{"optionId":"allow_once","name":"Yes, just this once","kind":"allow_once"},{"optionId":"allow_for_session","name":"Yes, and allow this host for this conversation","kind":"allow_always"},{"optionId":"apply_network_policy_amendment:0","name":"Yes, and allow this host in the future","kind":"allow_always"},{"optionId":"apply_network_policy_amendment:1","name":"No, and block this host in the future","kind":"reject_always"},` + codexDecline + `,` + codexCancel + `]`

// codexNetwork is a network approval of a command reaching a host.
func codexNetwork(id, command, host string) string {
	return fmt.Sprintf(`{"toolCallId":"call_%s","kind":"execute","status":"pending","title":"https network access to %s","rawInput":{"command":%q,"cwd":"$CWD","url":"https://%s"},"content":[{"type":"content","content":{"type":"text","text":"https access to %s"}}]}`, id, host, command, host, host)
}

// TestDecideCodex2Options: the broker answers an allow with the allow_once
// option and never with an option that reaches further (whatever its kind,
// where the option says so), and a deny with "decline" (the turn goes on, the
// model is told the command was not run) where it is offered, in whichever
// order, else "cancel"
// (2.6.0 with Codex 0.166 offers no decline: the turn ends).
func TestDecideCodex2Options(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules})
	metaOption := func(id, kind, changes string) string {
		return fmt.Sprintf(`{"optionId":%q,"name":"Yes","kind":%q,"_meta":{"permission":{"version":1,"changes":%s}}}`, id, kind, changes)
	}
	d.play(t, []decideCase{
		{
			name:   "allowed_with_the_2.6.0_list_gets_allow_once",
			req:    permission(`"c1"`, codexCommand("1", "git status"), codex2Options("git status", false)),
			option: "allow_once",
		},
		{
			name:   "allowed_with_the_default_list_gets_allow_once",
			req:    permission(`"c2"`, codexCommand("2", "git log --oneline"), codex2Options("git log", true)),
			option: "allow_once",
		},
		{
			name:   "denied_with_the_2.6.0_list_gets_cancel",
			req:    permission(`"c3"`, codexCommand("3", "npm install left-pad"), codex2Options("npm install", false)),
			option: "cancel",
		},
		{
			name:   "denied_with_the_default_list_gets_decline",
			req:    permission(`"c4"`, codexCommand("4", "npm install left-pad"), codex2Options("npm install", true)),
			option: "decline",
		},
		{
			// Whichever order availableDecisions gives them in: decline
			// keeps the turn going, cancel ends it.
			name:   "denied_with_cancel_listed_before_decline_gets_decline",
			req:    permission(`"c4b"`, codexCommand("4b", "npm install left-pad"), "["+strings.Join([]string{codexAllowOnce, codexAllowForSession, codexAmendment("npm install"), codexCancel, codexDecline}, ",")+"]"),
			option: "decline",
		},
		{
			name:   "a_compound_command_with_a_denied_part_gets_decline",
			req:    permission(`"c5"`, codexCommand("5", "git status && pip install requests"), codex2Options("pip install", true)),
			option: "decline",
		},
		{
			// The title is not the command: never allowed; a deny rule on
			// the command still denies, with decline, not the reject_always
			// that blocks the host for good.
			name:   "network_approval_of_a_denied_command_gets_decline",
			req:    permission(`"c6"`, codexNetwork("6", "npm install left-pad", "registry.npmjs.org"), codexNetworkOptions),
			option: "decline",
		},
		{
			name:   "network_approval_asked",
			req:    permission(`"c7"`, codexNetwork("7", "git status", "github.com"), codexNetworkOptions),
			answer: answer(`"c7"`, "decline"),
		},
		{
			name: "patch_in_src_gets_allow_once",
			req: permission(`"c8"`, `{"toolCallId":"call_8","title":"Edit files","kind":"edit","status":"pending","locations":[{"path":"$CWD/src/x.go"}]}`,
				`[{"optionId":"allow_once","name":"Yes, proceed","kind":"allow_once"},{"optionId":"allow_for_session","name":"Yes, and don't ask again for these files","kind":"allow_always"},`+codexCancel+`]`),
			option: "allow_once",
		},
		{
			name:   "an_allow_once_option_that_writes_a_policy_rule_is_not_once",
			req:    permission(`"c9"`, codexCommand("9", "git status"), "["+metaOption("allow_once", "allow_once", `[{"type":"policy_rule","targets":["git status"]}]`)+","+codexDecline+"]"),
			answer: answer(`"c9"`, "decline"),
		},
		{
			name:   "an_allow_once_option_for_the_turn_is_not_once",
			req:    permission(`"c10"`, codexCommand("10", "git status"), "["+metaOption("allow_once", "allow_once", `[{"type":"grant","lifetime":{"scope":"turn"},"targets":[]}]`)+","+codexDecline+"]"),
			answer: answer(`"c10"`, "decline"),
		},
		{
			name:   "an_allow_once_option_with_an_unknown_change_is_not_once",
			req:    permission(`"c11"`, codexCommand("11", "git status"), "["+metaOption("allow_once", "allow_once", `[{"type":"sandbox_widening"}]`)+","+codexDecline+"]"),
			answer: answer(`"c11"`, "decline"),
		},
		{
			name:   "the_broader_allow_once_is_passed_over_for_the_one_that_is_once",
			req:    permission(`"c12"`, codexCommand("12", "git status"), "["+metaOption("allow_turn", "allow_once", `[{"type":"grant","lifetime":{"scope":"session"}}]`)+","+metaOption("allow_this", "allow_once", `[{"type":"grant","targets":[]}]`)+","+codexDecline+"]"),
			option: "allow_this",
		},
		{
			name:   "an_allow_once_option_that_changes_nothing_is_once",
			req:    permission(`"c13"`, codexCommand("13", "git status"), "["+metaOption("allow_once", "allow_once", `[]`)+","+codexDecline+"]"),
			option: "allow_once",
		},
		{
			name:   "a_deny_passes_over_a_reject_once_that_writes_a_rule",
			req:    permission(`"c14"`, codexCommand("14", "npm install x"), "["+codexAllowOnce+","+metaOption("decline", "reject_once", `[{"type":"policy_rule"}]`)+","+codexCancel+"]"),
			option: "cancel",
		},
	})
}

// TestDecideCodex2SandboxGrantForTheTurn: codex-acp's request for more
// sandbox permissions offers, as its allow_once options, grants for the
// rest of the turn: an allow rule for the paths it lists must not answer it.
func TestDecideCodex2SandboxGrantForTheTurn(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: "[[rule]]\ndecision = \"allow\"\npath = \"./src/**\"\n"})
	d.play(t, []decideCase{{
		name: "asked",
		req: permission(`"p1"`, `{"toolCallId":"call_p1","name":"request_permissions","kind":"other","status":"pending","title":"Additional sandbox permissions","rawInput":{"permissions":{"fileSystem":{"write":["$CWD/src/out"],"entries":[{"path":{"type":"glob_pattern","pattern":"/**"},"access":"write"}]}},"cwd":"$CWD","environmentId":null},"locations":[{"path":"$CWD/src/out"}],"content":[{"type":"content","content":{"type":"text","text":"write filesystem pattern /**"}}]}`,
			`[{"optionId":"allow_permissions_turn","name":"Yes, grant these permissions for this turn","kind":"allow_once"},{"optionId":"allow_permissions_turn_strict_auto_review","name":"Yes, grant for this turn with strict auto review","kind":"allow_once"},{"optionId":"allow_permissions_session","name":"Yes, grant these permissions for this session","kind":"allow_always"},{"optionId":"reject_permissions","name":"No, continue without permissions","kind":"reject_once"}]`),
		answer: answer(`"p1"`, "reject_permissions"),
	}})
}

// TestCodex2AlwaysIsAsNarrowAsTheOption: what the broker remembers when the
// human picks a Codex "always" option is no broader than the option says,
// and no broader than the broker itself would remember.
func TestCodex2AlwaysIsAsNarrowAsTheOption(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{})
	learn := func(id, command, options, optionID string) {
		d.t.Helper()
		d.asked(permission(`"`+id+`"`, codexCommand(id, command), options), answer(`"`+id+`"`, optionID))
	}
	steps := []struct {
		name string
		run  func()
	}{
		{"for_the_session_is_remembered_for_the_session", func() {
			learn("s1", "cargo test --release", codex2Options("cargo test", true), "allow_for_session")
			d.liveOnly("an answer remembered for this session only")
			d.decided(permission(`"s2"`, codexCommand("s2", "cargo test --workspace"), codex2Options("cargo test", true)), "allow_once")
			if line := auditLine(t, d.audit, "call_s1"); !strings.Contains(fmt.Sprint(line["always"]), "for this session") {
				d.t.Errorf("the audit line's always does not say it is for the session: %v", line["always"])
			}
		}},
		{"the_older_adapters_for_the_session_is_remembered_for_the_session", func() {
			d.asked(permission(`"r1"`, `{"toolCallId":"call_r1","title":"go build ./...","kind":"execute","status":"pending","rawInput":{"command":["/bin/bash","-lc","go build ./..."],"cwd":"$CWD"}}`, codexOptions), answer(`"r1"`, "approved-for-session"))
			d.liveOnly("an answer remembered for this session only")
			d.decided(permission(`"r2"`, `{"toolCallId":"call_r2","title":"go build ./cmd","kind":"execute","status":"pending","rawInput":{"command":["/bin/bash","-lc","go build ./cmd"],"cwd":"$CWD"}}`, codexOptions), "approved")
		}},
		{"an_amendment_broader_than_the_broker_would_remember_is_narrowed", func() {
			learn("a1", "git push origin main", codex2Options("git", false), "accept_execpolicy_amendment")
			d.decided(permission(`"a2"`, codexCommand("a2", "git push origin feature"), codex2Options("git push", false)), "allow_once")
			d.asked(permission(`"a3"`, codexCommand("a3", "git config core.pager x"), codex2Options("git config", false)), answer(`"a3"`, "cancel"))
		}},
		{"an_amendment_narrower_than_the_broker_would_remember_keeps_the_command_exact", func() {
			learn("n1", "npm run build -- --prod", codex2Options("npm run build -- --prod", false), "accept_execpolicy_amendment")
			d.decided(permission(`"n2"`, codexCommand("n2", "npm run build -- --prod"), codex2Options("npm run build", false)), "allow_once")
			d.asked(permission(`"n3"`, codexCommand("n3", "npm run build -- --dev"), codex2Options("npm run build", false)), answer(`"n3"`, "cancel"))
		}},
		{"an_amendment_covers_only_the_parts_it_names", func() {
			learn("m1", "go vet ./... && make deploy", codex2Options("go vet", false), "accept_execpolicy_amendment")
			d.decided(permission(`"m2"`, codexCommand("m2", "go vet ./cmd/..."), codex2Options("go vet", false)), "allow_once")
			d.asked(permission(`"m3"`, codexCommand("m3", "make deploy"), codex2Options("make deploy", false)), answer(`"m3"`, "cancel"))
		}},
		{"an_amendment_for_another_command_remembers_nothing", func() {
			learn("o1", "make deploy", codex2Options("rm -rf", false), "accept_execpolicy_amendment")
			d.asked(permission(`"o2"`, codexCommand("o2", "make deploy"), codex2Options("make deploy", false)), answer(`"o2"`, "cancel"))
			if r := fmt.Sprint(auditLine(t, d.audit, "call_o1")["remembered"]); !strings.HasPrefix(r, "nothing: ") {
				d.t.Errorf("remembered %q, want nothing", r)
			}
		}},
		{"an_amendment_the_broker_cannot_read_remembers_nothing", func() {
			learn("u1", "make lint", codex2Options("make $(evil)", false), "accept_execpolicy_amendment")
			d.asked(permission(`"u2"`, codexCommand("u2", "make lint"), codex2Options("make lint", false)), answer(`"u2"`, "cancel"))
		}},
		{"an_always_option_for_the_turn_remembers_nothing", func() {
			opts := `[` + codexAllowOnce + `,{"optionId":"allow_turn","name":"Yes, for this turn","kind":"allow_always","_meta":{"permission":{"version":1,"changes":[{"type":"grant","lifetime":{"scope":"turn"}}]}}},` + codexCancel + `]`
			learn("t1", "make test", opts, "allow_turn")
			d.asked(permission(`"t2"`, codexCommand("t2", "make test"), opts), answer(`"t2"`, "cancel"))
		}},
		{"an_always_option_with_an_unknown_change_remembers_nothing", func() {
			opts := `[` + codexAllowOnce + `,{"optionId":"allow_widely","name":"Yes, always","kind":"allow_always","_meta":{"permission":{"version":1,"changes":[{"type":"sandbox_profile","lifetime":{"scope":"session"}}]}}},` + codexCancel + `]`
			learn("w1", "make check", opts, "allow_widely")
			d.asked(permission(`"w2"`, codexCommand("w2", "make check"), opts), answer(`"w2"`, "cancel"))
		}},
		{"a_network_amendment_never_remembers_the_command", func() {
			d.asked(permission(`"h1"`, codexNetwork("h1", "curl https://example.com", "example.com"), codexNetworkOptions), answer(`"h1"`, "apply_network_policy_amendment:0"))
			d.asked(permission(`"h2"`, codexCommand("h2", "curl https://example.com"), codex2Options("curl", false)), answer(`"h2"`, "cancel"))
			d.asked(permission(`"h3"`, codexNetwork("h3", "curl https://example.com", "example.com"), codexNetworkOptions), answer(`"h3"`, "allow_for_session"))
			d.asked(permission(`"h4"`, codexCommand("h4", "curl https://example.com"), codex2Options("curl", false)), answer(`"h4"`, "cancel"))
		}},
	}
	for _, s := range steps {
		if !d.step(t, s.name, s.run) {
			return
		}
	}
	d.finish()
	var got []string
	for _, e := range rememberedEntries(t, d.state) {
		got = append(got, e["scope"]+" "+e["command"]+e["domain"])
	}
	want := []string{"project git push *", "project npm run build -- --prod", "project go vet *"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("remembered %q, want %q (the session's answer is not stored)", got, want)
	}
}
