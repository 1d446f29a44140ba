//go:build linux

package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// auditRecord is one line of the audit log, as the README describes it.
type auditRecord struct {
	Time       time.Time `json:"time"`
	Session    string    `json:"session"`
	ToolCallID string    `json:"tool_call_id"`
	Agent      string    `json:"agent"`
	Method     string    `json:"method"`
	Kind       string    `json:"kind"`
	Title      string    `json:"title"`
	Commands   []string  `json:"commands"`
	Paths      []string  `json:"paths"`
	URLs       []string  `json:"urls"`
	MCP        string    `json:"mcp"`
	Decision   string    `json:"decision"`
	Source     string    `json:"source"`
	Rule       string    `json:"rule"`
	RuleID     string    `json:"rule_id"`
	Reason     string    `json:"reason"`
	Option     string    `json:"option"`
	OptionKind string    `json:"option_kind"`
	Latency    *float64  `json:"latency_ms"`
}

// readAudit returns the complete lines of the audit log so far.
func readAudit(t testing.TB, path string) []auditRecord {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []auditRecord
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break // a line still being written
		}
		var r auditRecord
		if err := json.Unmarshal(data[:i], &r); err != nil {
			t.Fatalf("audit line is not a JSON record: %v: %s", err, data[:i])
		}
		out = append(out, r)
		data = data[i+1:]
	}
	return out
}

// waitAudit polls the audit log until a record satisfies match, and returns
// it; it fails after waitTimeout.
func waitAudit(t testing.TB, path, what string, match func(auditRecord) bool) auditRecord {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, r := range readAudit(t, path) {
			if match(r) {
				return r
			}
		}
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(path)
			t.Fatalf("no audit record for %s within %v; the log:\n%s", what, waitTimeout, data)
		}
		<-tick.C
	}
}

func byToolCall(id string) func(auditRecord) bool {
	return func(r auditRecord) bool { return r.ToolCallID == id }
}

// checkRecord compares the fields of got that want sets; Time and Latency
// must be set.
func checkRecord(t testing.TB, got, want auditRecord) {
	t.Helper()
	type field struct{ name, got, want string }
	fields := []field{
		{"session", got.Session, want.Session},
		{"tool_call_id", got.ToolCallID, want.ToolCallID},
		{"agent", got.Agent, want.Agent},
		{"method", got.Method, want.Method},
		{"kind", got.Kind, want.Kind},
		{"title", got.Title, want.Title},
		{"mcp", got.MCP, want.MCP},
		{"decision", got.Decision, want.Decision},
		{"source", got.Source, want.Source},
		{"rule", got.Rule, want.Rule},
		{"rule_id", got.RuleID, want.RuleID},
		{"reason", got.Reason, want.Reason},
		{"option", got.Option, want.Option},
		{"option_kind", got.OptionKind, want.OptionKind},
	}
	for _, f := range fields {
		if f.got != f.want {
			t.Errorf("audit %s = %q, want %q\nrecord: %+v", f.name, f.got, f.want, got)
		}
	}
	if want.Commands != nil && !slices.Equal(got.Commands, want.Commands) {
		t.Errorf("audit commands = %q, want %q", got.Commands, want.Commands)
	}
	if want.Paths != nil && !slices.Equal(got.Paths, want.Paths) {
		t.Errorf("audit paths = %q, want %q", got.Paths, want.Paths)
	}
	if got.Time.IsZero() || time.Since(got.Time) > time.Hour || got.Time.Location() != time.UTC {
		t.Errorf("audit time = %v, want a recent UTC time", got.Time)
	}
	if got.Latency == nil || *got.Latency < 0 {
		t.Errorf("audit latency_ms missing or negative: %v", got.Latency)
	}
}

// TestAuditLog: every intercepted request is one line of the --audit file.
// A request the broker decides is logged with its source, rule and the
// option sent; one forwarded to the editor is logged only once the editor
// answers, with source "editor" and the option chosen; fs and terminal
// checks are logged too.
func TestAuditLog(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules})
	rule := func(id string) string { return ruleWhere(t, d.config, decideRules, id) }
	base := auditRecord{Session: "sess_1", Agent: "fakeagent", Method: "session/request_permission"}
	with := func(f func(r *auditRecord)) auditRecord { r := base; f(&r); return r }

	steps := []struct {
		name string
		run  func()
	}{
		{"allowed_by_rule", func() {
			d.decided(reqGitStatus("1"), "allow")
			checkRecord(d.t, waitAudit(d.t, d.audit, "m1", byToolCall("m1")), with(func(r *auditRecord) {
				r.ToolCallID, r.Kind, r.Title, r.Commands = "m1", "execute", "git status", []string{"git status"}
				r.Decision, r.Source, r.Rule, r.RuleID = "allow", "rule", rule("git-read"), "git-read"
				r.Option, r.OptionKind = "allow", "allow_once"
			}))
		}},
		{"denied_by_rule", func() {
			d.decided(reqForcePush("2"), "reject")
			checkRecord(d.t, waitAudit(d.t, d.audit, "m2", byToolCall("m2")), with(func(r *auditRecord) {
				r.ToolCallID, r.Kind, r.Title, r.Commands = "m2", "execute", "git push --force origin main", []string{"git push --force origin main"}
				r.Decision, r.Source, r.Rule, r.RuleID = "deny", "rule", rule("no-force-push"), "no-force-push"
				r.Reason = "force pushes rewrite shared history"
				r.Option, r.OptionKind = "reject", "reject_once"
			}))
		}},
		{"allowed_by_default", func() {
			d.decided(reqRead("3"), "allow")
			got := waitAudit(d.t, d.audit, "m3", byToolCall("m3"))
			checkRecord(d.t, got, with(func(r *auditRecord) {
				r.ToolCallID, r.Kind, r.Title, r.Paths = "m3", "read", "Read README.md", []string{d.cwd + "/README.md"}
				r.Decision, r.Source, r.Reason = "allow", "default", got.Reason
				r.Option, r.OptionKind = "allow", "allow_once"
			}))
			if got.Reason == "" {
				d.t.Errorf("a default decision has no reason: %+v", got)
			}
		}},
		{"mcp_tool", func() {
			d.decided(reqMCP("4"), "allow")
			checkRecord(d.t, waitAudit(d.t, d.audit, "m4", byToolCall("m4")), with(func(r *auditRecord) {
				r.ToolCallID, r.Kind, r.Title, r.MCP = "m4", "other", "mcp__github__get_issue", "github/get_issue"
				r.Decision, r.Source, r.Rule, r.RuleID = "allow", "rule", rule("github-read"), "github-read"
				r.Option, r.OptionKind = "allow", "allow_once"
			}))
		}},
		{"forwarded_logged_when_the_editor_answers", func() {
			req := d.expand(reqMake("5"))
			d.AgentToEditor(req)
			// A request decided after it is logged at once; the forwarded
			// one must not be logged yet.
			d.decided(reqGitStatus("6"), "allow")
			waitAudit(d.t, d.audit, "m6", byToolCall("m6"))
			for _, r := range readAudit(d.t, d.audit) {
				if r.ToolCallID == "m5" {
					d.t.Fatalf("the forwarded request was logged before the editor answered: %+v", r)
				}
			}
			d.EditorToAgent(answer("5", "allow"))
			got := waitAudit(d.t, d.audit, "m5", byToolCall("m5"))
			checkRecord(d.t, got, with(func(r *auditRecord) {
				r.ToolCallID, r.Kind, r.Title, r.Commands = "m5", "execute", "make", []string{"make"}
				r.Decision, r.Source, r.Reason = "allow", "editor", got.Reason
				r.Option, r.OptionKind = "allow", "allow_once"
			}))
		}},
		{"forwarded_and_rejected_by_the_editor", func() {
			d.asked(reqEdit("7", "$CWD/package.json"), answer("7", "reject"))
			got := waitAudit(d.t, d.audit, "m7", byToolCall("m7"))
			checkRecord(d.t, got, with(func(r *auditRecord) {
				r.ToolCallID, r.Kind, r.Title, r.Paths = "m7", "edit", "Edit", []string{d.cwd + "/package.json"}
				r.Decision, r.Source, r.Reason = "deny", "editor", got.Reason
				r.Option, r.OptionKind = "reject", "reject_once"
			}))
		}},
		{"forwarded_and_cancelled_by_the_editor", func() {
			d.asked(reqMake("8"), `{"jsonrpc":"2.0","id":8,"result":{"outcome":{"outcome":"cancelled"}}}`)
			got := waitAudit(d.t, d.audit, "m8", byToolCall("m8"))
			if got.Source != "editor" || got.Decision == "allow" || got.Option != "" {
				d.t.Errorf("a cancelled prompt is logged as %+v, want source editor, no option, not allow", got)
			}
		}},
		{"protected_read_forwarded", func() {
			d.asked(reqReadSSH("9"), answer("9", "reject"))
			got := waitAudit(d.t, d.audit, "m9", byToolCall("m9"))
			if got.Source != "editor" || got.Decision != "deny" || !strings.Contains(got.Reason, "protected") {
				d.t.Errorf("a protected read answered by the editor is logged as %+v, want source editor, decision deny, the protection in the reason", got)
			}
		}},
		{"fs_write_refused", func() {
			d.refused(`{"jsonrpc":"2.0","id":10,"method":"fs/write_text_file","params":{"sessionId":"sess_1","path":"$CWD/gen/x.go","content":"x"}}`)
			got := waitAudit(d.t, d.audit, "the refused write", func(r auditRecord) bool {
				return r.Method == "fs/write_text_file" && slices.Contains(r.Paths, d.cwd+"/gen/x.go")
			})
			checkRecord(d.t, got, auditRecord{Session: "sess_1", Agent: "fakeagent", Method: "fs/write_text_file", Kind: "edit",
				Decision: "deny", Source: "rule", Rule: rule("no-generated-edits"), RuleID: "no-generated-edits", Reason: "generated code is rebuilt, not edited"})
		}},
		{"fs_write_protected", func() {
			d.refused(`{"jsonrpc":"2.0","id":11,"method":"fs/write_text_file","params":{"sessionId":"sess_1","path":"$HOME/.ssh/config","content":"x"}}`)
			got := waitAudit(d.t, d.audit, "the protected write", func(r auditRecord) bool {
				return r.Method == "fs/write_text_file" && slices.Contains(r.Paths, homeDir+"/.ssh/config")
			})
			if got.Decision != "deny" || got.Source != "protected" {
				d.t.Errorf("a protected write is logged as %+v, want decision deny, source protected", got)
			}
		}},
		{"fs_write_allowed_by_a_rule", func() {
			d.asked(`{"jsonrpc":"2.0","id":12,"method":"fs/write_text_file","params":{"sessionId":"sess_1","path":"$CWD/src/NOTES.md","content":"x"}}`, `{"jsonrpc":"2.0","id":12,"result":null}`)
			got := waitAudit(d.t, d.audit, "the forwarded write", func(r auditRecord) bool {
				return r.Method == "fs/write_text_file" && slices.Contains(r.Paths, d.cwd+"/src/NOTES.md")
			})
			if got.Decision != "allow" || got.Source != "rule" || got.RuleID != "edit-src" {
				d.t.Errorf("a write a rule allows is logged as %+v, want decision allow by rule edit-src", got)
			}
		}},
		{"fs_write_asked_by_the_broker", func() {
			d.heldAsked(d.t, `{"jsonrpc":"2.0","id":"w-1","method":"fs/write_text_file","params":{"sessionId":"sess_1","path":"$CWD/NOTES.md","content":"x"}}`, d.cwd+"/NOTES.md", "reject_once", "")
			got := waitAudit(d.t, d.audit, "the held write", func(r auditRecord) bool {
				return r.Method == "fs/write_text_file" && slices.Contains(r.Paths, d.cwd+"/NOTES.md")
			})
			if got.Decision != "deny" || got.Source != "editor" || got.OptionKind != "reject_once" || !strings.HasPrefix(got.ToolCallID, "acp-broker-write-") {
				d.t.Errorf("a write asked with the broker's own prompt is logged as %+v, want decision deny by the editor, reject_once, the prompt's tool call id", got)
			}
		}},
		{"terminal_refused", func() {
			d.refused(`{"jsonrpc":"2.0","id":13,"method":"terminal/create","params":{"sessionId":"sess_1","command":"pip","args":["install","x"],"cwd":"$CWD"}}`)
			got := waitAudit(d.t, d.audit, "the refused terminal", func(r auditRecord) bool {
				return r.Method == "terminal/create" && r.Decision == "deny"
			})
			checkRecord(d.t, got, auditRecord{Session: "sess_1", Agent: "fakeagent", Method: "terminal/create", Kind: "execute", Commands: []string{"pip install x"},
				Decision: "deny", Source: "rule", Rule: rule("no-installs"), RuleID: "no-installs", Reason: "dependencies come from the lock file"})
		}},
		{"terminal_covered_by_a_permission_request", func() {
			d.asked(permission(`"p-14"`, `{"toolCallId":"m14","title":"go vet","kind":"execute","rawInput":{"command":"go vet"}}`, claudeOptions), answer(`"p-14"`, "allow"))
			d.asked(`{"jsonrpc":"2.0","id":14,"method":"terminal/create","params":{"sessionId":"sess_1","command":"go","args":["vet"],"cwd":"$CWD"}}`, `{"jsonrpc":"2.0","id":14,"result":{"terminalId":"t"}}`)
			got := waitAudit(d.t, d.audit, "the forwarded terminal", func(r auditRecord) bool {
				return r.Method == "terminal/create" && slices.Equal(r.Commands, []string{"go vet"})
			})
			if got.Decision != "allow" || got.Source != "asked in ACP" {
				d.t.Errorf("a terminal a permission request covered is logged as %+v, want decision allow, source asked in ACP", got)
			}
		}},
	}
	for _, s := range steps {
		if !d.step(t, s.name, s.run) {
			return
		}
	}
	d.finish()
	// One line per intercepted request: 10 permission requests (m1 to m9,
	// p-14), 4 writes, 2 terminals; and at most one warning that the test's
	// editor answers faster than a person can (whether it does depends on
	// how busy the machine is; quick_editor_test.go has the warning's tests).
	requests, warnings := 0, 0
	for _, r := range readAudit(t, d.audit) {
		if r.Method == "editor/answers" {
			warnings++
		} else {
			requests++
		}
	}
	if want := 10 + 4 + 2; requests != want || warnings > 1 {
		data, _ := os.ReadFile(d.audit)
		t.Errorf("the audit log has %d request lines and %d warnings, want %d and at most 1:\n%s", requests, warnings, want, data)
	}
	if fi, err := os.Stat(d.audit); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("audit log mode: %v %v, want 0600", fi.Mode(), err)
	}
}

// TestAuditLogModeSource: a decision a mode made is logged with source
// "mode <name>" and no rule.
func TestAuditLogModeSource(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules, args: []string{"--mode", "dont-ask"}})
	d.decided(reqMake("1"), "reject")
	got := waitAudit(t, d.audit, "m1", byToolCall("m1"))
	checkRecord(t, got, auditRecord{Session: "sess_1", ToolCallID: "m1", Agent: "fakeagent", Method: "session/request_permission",
		Kind: "execute", Title: "make", Commands: []string{"make"}, Decision: "deny", Source: "mode dont-ask", Reason: got.Reason,
		Option: "reject", OptionKind: "reject_once"})
	d.finish()
}

// TestAuditOff: --audit off writes no log, not even the default one.
func TestAuditOff(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules, args: []string{"--audit", "off"}})
	d.decided(reqGitStatus("1"), "allow")
	d.asked(reqMake("2"), answer("2", "allow"))
	d.finish()
	for _, p := range []string{d.audit, d.state + "/acp-broker/audit.jsonl"} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists with --audit off (%v)", p, err)
		}
	}
}
