package demo

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestReadTrace pins how the broker's trace becomes the transcript: a
// request the broker intercepted and passed on is shown once, as the editor
// received it; one it answered itself is shown as agent → broker with the
// broker's answer; the trace's own notes and non-JSON lines are kept; and
// the audit log's reasons become the notes of the permission requests.
func TestReadTrace(t *testing.T) {
	const (
		ask1     = `{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"c1"},"options":[]}}`
		answer1  = `{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected","optionId":"a"}}}`
		write    = `{"jsonrpc":"2.0","id":1,"method":"fs/write_text_file","params":{"sessionId":"s","path":"/w/x","content":""}}`
		written  = `{"jsonrpc":"2.0","id":1,"result":null}`
		ask2     = `{"jsonrpc":"2.0","id":2,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"c2"},"options":[]}}`
		answer2  = `{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"selected","optionId":"r"}}}`
		prompt   = `{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`
		spurious = `{"jsonrpc":"2.0","id":9,"result":{}}`
	)
	trace := strings.Join([]string{
		`{"time":"t","dir":"editor->agent","message":` + prompt + `}`,
		`{"time":"t","dir":"agent->broker","note":"intercepted","message":` + ask1 + `}`,
		`{"time":"t","dir":"broker->agent","message":` + answer1 + `}`,
		`{"time":"t","dir":"agent->broker","note":"intercepted","message":` + write + `}`,
		`{"time":"t","dir":"agent->editor","message":` + write + `}`,
		`{"time":"t","dir":"editor->agent","message":` + written + `}`,
		`{"time":"t","dir":"agent->broker","note":"intercepted","message":` + ask2 + `}`,
		`{"time":"t","dir":"agent->editor","message":` + ask2 + `}`,
		`{"time":"t","dir":"editor->agent","message":` + answer2 + `}`,
		`{"time":"t","dir":"agent->broker","note":"dropped: not JSON-RPC","text":"Starting…"}`,
		`{"time":"t","dir":"editor->broker","note":"dropped: not a request the editor was sent","message":` + spurious + `}`,
	}, "\n") + "\n"
	audit := strings.Join([]string{
		`{"time":"t","session":"s","tool_call_id":"c1","agent":"a","method":"session/request_permission","decision":"allow","source":"rule","rule":"r.toml:3","rule_id":"ok","reason":"fine","option":"a","option_kind":"allow_once","latency_ms":0.1}`,
		`{"time":"t","session":"s","agent":"a","method":"fs/write_text_file","decision":"forwarded","source":"no deny rule","latency_ms":0.1}`,
		`{"time":"t","session":"s","tool_call_id":"c2","agent":"a","method":"session/request_permission","decision":"deny","source":"editor","asked":"default","reason":"no rule allows this command","option":"r","option_kind":"reject_once","latency_ms":3}`,
	}, "\n") + "\n"
	dir := t.TempDir()
	for name, text := range map[string]string{"trace.jsonl": trace, "audit.jsonl": audit} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	entries, err := readTrace(filepath.Join(dir, "trace.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	records, err := readAudit(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	annotate(entries, records)
	want := []Entry{
		{From: Editor, To: Agent, Raw: []byte(prompt)},
		{From: Agent, To: Broker, Raw: []byte(ask1)},
		{From: Broker, To: Agent, Raw: []byte(answer1), Note: "allowed by rule ok: fine"},
		{From: Agent, To: Editor, Raw: []byte(write)},
		{From: Editor, To: Agent, Raw: []byte(written)},
		{From: Agent, To: Editor, Raw: []byte(ask2), Note: "asked: no rule allows this command"},
		{From: Editor, To: Agent, Raw: []byte(answer2)},
		{From: Agent, To: Broker, Raw: []byte("Starting…"), Note: "dropped: not JSON-RPC"},
		{From: Editor, To: Broker, Raw: []byte(spurious), Note: "dropped: not a request the editor was sent"},
	}
	if len(entries) != len(want) {
		t.Fatalf("%d entries, want %d:\n%s", len(entries), len(want), rawLines(entries))
	}
	for i := range want {
		// The message is the trace's bytes exactly, not a re-encoding.
		if g, w := entries[i], want[i]; g.From != w.From || g.To != w.To || string(g.Raw) != string(w.Raw) || g.Note != w.Note {
			t.Errorf("entry %d:\n got %s → %s %s (%s)\nwant %s → %s %s (%s)", i+1, g.From, g.To, g.Raw, g.Note, w.From, w.To, w.Raw, w.Note)
		}
	}
}

func TestReadTraceRefusesUnknownDirections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(path, []byte(`{"dir":"agent->moon","message":{}}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readTrace(path); err == nil || !strings.Contains(err.Error(), `"agent->moon"`) {
		t.Errorf("readTrace: %v, want an error naming the direction", err)
	}
}

func TestDecisionNote(t *testing.T) {
	for _, tt := range []struct {
		r    AuditRecord
		want string
	}{
		{AuditRecord{Decision: "allow", Source: "rule", RuleID: "git-status", Rule: "x.toml:3", Reason: "harmless"}, "allowed by rule git-status: harmless"},
		{AuditRecord{Decision: "deny", Source: "rule", Rule: "x.toml:9"}, "denied by rule x.toml:9"},
		{AuditRecord{Decision: "allow", Source: "default", Reason: `kind "read" only reads`}, `allowed by default: kind "read" only reads`},
		{AuditRecord{Decision: "allow", Source: "mode accept-edits", Reason: "edits in the project"}, "allowed by mode accept-edits: edits in the project"},
		{AuditRecord{Decision: "deny", Source: "editor", Reason: "no rule allows writing here"}, "asked: no rule allows writing here"},
		{AuditRecord{Decision: "unanswered", Source: "editor"}, "asked"},
	} {
		if got := decisionNote(tt.r); got != tt.want {
			t.Errorf("decisionNote(%+v) = %q, want %q", tt.r, got, tt.want)
		}
	}
}

// TestBrokerArgs pins the broker's command line and environment: the
// demo's own files, all in its temporary directory.
func TestBrokerArgs(t *testing.T) {
	dir := t.TempDir()
	f, err := newBrokerFiles(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"acp-broker", "--log-level", "warn",
		"--config", filepath.Join(dir, "demo-rules.toml"), "--audit", filepath.Join(dir, "audit.jsonl"), "--trace", filepath.Join(dir, "trace.jsonl"),
		"--", "/bin/acp-broker", "example-agent"}
	if got := f.args("/bin/acp-broker"); !reflect.DeepEqual(got, want) {
		t.Errorf("args:\n%q\nwant:\n%q", got, want)
	}
	env := f.env()
	if got := env[len(env)-3:]; !reflect.DeepEqual(got, []string{"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "XDG_STATE_HOME=" + filepath.Join(dir, "state"), "XDG_RUNTIME_DIR=" + filepath.Join(dir, "run")}) {
		t.Errorf("the environment ends with %q, want the XDG directories in %s", got, dir)
	}
	b, err := os.ReadFile(f.rules)
	if err != nil || string(b) != demoRules {
		t.Errorf("the rule file holds %q (%v), want the demo's rules", b, err)
	}
}
