package demo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// demoRules is the rule file the demo gives the broker: it allows git status,
// denies force pushes, and says nothing of edits, which therefore go to the
// editor.
const demoRules = `# The demo's rules. A request no rule decides goes to the editor.

[[rule]]
id = "git-status"
decision = "allow"
command = "git status"
reason = "reading the repository's state is harmless"

[[rule]]
id = "no-force-push"
decision = "deny"
command = "git push --force *"
reason = "force pushes rewrite shared history"
`

// noRules is the rule file of a run with Options.NoRules.
const noRules = "# No rules: every request goes to the editor, but for what an \"always\" answer taught the broker.\n"

// brokerFiles are the files a brokered run gives the broker and reads back,
// all inside the run's temporary directory, so that the user's own rules,
// trust and audit log play no part and are left alone.
type brokerFiles struct {
	rules  string // --config
	audit  string // --audit
	trace  string // --trace
	config string // XDG_CONFIG_HOME
	state  string // XDG_STATE_HOME
	run    string // XDG_RUNTIME_DIR, where the broker's answer socket goes
	text   string // the rule file's text
}

// newBrokerFiles writes the rule file into dir and names the others.
func newBrokerFiles(dir string, noRulesAtAll bool) (*brokerFiles, error) {
	f := &brokerFiles{
		rules:  filepath.Join(dir, "demo-rules.toml"),
		audit:  filepath.Join(dir, "audit.jsonl"),
		trace:  filepath.Join(dir, "trace.jsonl"),
		config: filepath.Join(dir, "config"),
		state:  filepath.Join(dir, "state"),
		run:    filepath.Join(dir, "run"),
		text:   demoRules,
	}
	if noRulesAtAll {
		f.text = noRules
	}
	if err := os.WriteFile(f.rules, []byte(f.text), 0o600); err != nil {
		return nil, fmt.Errorf("writing the demo's rules: %w", err)
	}
	if err := os.Mkdir(f.run, 0o700); err != nil {
		return nil, err
	}
	return f, nil
}

// args returns the broker's argv, starting the example agent as self.
func (f *brokerFiles) args(self string) []string {
	return []string{"acp-broker", "--log-level", "warn",
		"--config", f.rules, "--audit", f.audit, "--trace", f.trace,
		"--", self, "example-agent"}
}

// env returns the broker's environment: this process's, with the XDG
// directories (config, state, and the runtime directory of its answer
// socket) moved into the run's temporary directory.
func (f *brokerFiles) env() []string {
	return append(os.Environ(), "XDG_CONFIG_HOME="+f.config, "XDG_STATE_HOME="+f.state, "XDG_RUNTIME_DIR="+f.run)
}

// traceRecord is one line of the broker's --trace file.
type traceRecord struct {
	Dir     string          `json:"dir"` // "agent->editor", "agent->broker", ...
	Note    string          `json:"note"`
	Message json.RawMessage `json:"message"` // exactly as it passed
	Text    *string         `json:"text"`    // instead of message, for a line that was not JSON-RPC
}

// readTrace returns the messages of the broker's trace in the order the
// broker handled them. A request the broker intercepted and then passed to
// the editor is traced twice, as "agent->broker" and as "agent->editor"; it
// is shown once, as the editor received it.
func readTrace(path string) ([]Entry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var records []traceRecord
	forwarded := make(map[string]int) // how many times the broker sent these bytes to the editor
	for i, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r traceRecord
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		if r.Dir == "agent->editor" {
			forwarded[string(r.Message)]++
		}
		records = append(records, r)
	}
	var entries []Entry
	for i, r := range records {
		if r.Dir == "agent->broker" && r.Note == "intercepted" && forwarded[string(r.Message)] > 0 {
			forwarded[string(r.Message)]--
			continue
		}
		from, to, ok := strings.Cut(r.Dir, "->")
		if !ok || !knownParty(from) || !knownParty(to) {
			return nil, fmt.Errorf("%s: record %d has the unknown direction %q", path, i+1, r.Dir)
		}
		e := Entry{From: Party(from), To: Party(to), Raw: r.Message}
		if r.Text != nil {
			e.Raw = []byte(*r.Text)
		}
		if r.Note != "intercepted" { // shown by the answer's note instead
			e.Note = r.Note
		}
		entries = append(entries, e)
	}
	return entries, nil
}

func knownParty(p string) bool {
	return p == string(Editor) || p == string(Broker) || p == string(Agent)
}

// AuditRecord is what the demo reads of one line of the broker's audit log:
// one intercepted request and what became of it.
type AuditRecord struct {
	Session    string `json:"session"`
	ToolCallID string `json:"tool_call_id"`
	Method     string `json:"method"`
	Kind       string `json:"kind"`
	Title      string `json:"title"`
	Decision   string `json:"decision"` // allow, deny, ask; for what the editor answered, its choice
	Source     string `json:"source"`   // who decided: "rule", "remembered", "default", "editor", ...
	Rule       string `json:"rule"`     // file:line, or "remembered:<id>"
	RuleID     string `json:"rule_id"`
	Reason     string `json:"reason"`
	Option     string `json:"option"`
	OptionKind string `json:"option_kind"`
	// ChosenKind is the kind of the option the human chose when the agent
	// was sent another (an "always" sent as once).
	ChosenKind string `json:"chosen_kind"`
	// Remembered lists the entries an "always" answer was remembered as,
	// or says why it was not ("nothing: ...").
	Remembered string `json:"remembered"`
}

func readAudit(path string) ([]AuditRecord, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var records []AuditRecord
	for i, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r AuditRecord
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		records = append(records, r)
	}
	return records, nil
}

// permissionAudit returns the audit records of permission requests by tool
// call id. The demo's conversation has one session.
func permissionAudit(records []AuditRecord) map[string]AuditRecord {
	m := make(map[string]AuditRecord)
	for _, r := range records {
		if r.Method == "session/request_permission" && r.ToolCallID != "" {
			m[r.ToolCallID] = r
		}
	}
	return m
}

// annotate sets the note of each permission request's line from the audit
// log: on the broker's own answer, what it decided and why; on a request
// passed to the editor, why it was asked; and on the editor's answer to
// it, what an "always" answer was remembered as.
func annotate(entries []Entry, audit []AuditRecord) {
	byCall := permissionAudit(audit)
	held := make(map[string]string)      // request id → tool call id, of requests the broker decided
	forwarded := make(map[string]string) // request id → tool call id, of requests passed to the editor
	for i := range entries {
		e := &entries[i]
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ToolCall struct {
					ToolCallID string `json:"toolCallId"`
				} `json:"toolCall"`
			} `json:"params"`
		}
		if json.Unmarshal(e.Raw, &m) != nil {
			continue
		}
		id := string(bytes.TrimSpace(m.ID))
		switch {
		case e.From == Agent && m.Method == "session/request_permission":
			tc := m.Params.ToolCall.ToolCallID
			if e.To == Broker {
				held[id] = tc
			} else {
				forwarded[id] = tc
				if r, ok := byCall[tc]; ok && e.Note == "" {
					e.Note = decisionNote(r)
				}
			}
		case e.From == Broker && e.To == Agent && m.Method == "":
			tc, ok := held[id]
			delete(held, id)
			if r, found := byCall[tc]; ok && found && e.Note == "" {
				e.Note = decisionNote(r)
			}
		case e.From == Editor && m.Method == "":
			// The editor's answer (to the agent, or to the broker that
			// answers the agent in its place) is where "always" was said.
			tc, ok := forwarded[id]
			delete(forwarded, id)
			if r := byCall[tc]; ok && r.Remembered != "" {
				e.Note = strings.TrimPrefix(e.Note+"; remembered as "+r.Remembered, "; ")
			}
		}
	}
}

// decisionNote says in a few words what an audit record says: "allowed by
// rule git-status: reading the repository's state is harmless", or, for a
// request the editor was asked, "asked: no rule allows writing here".
func decisionNote(r AuditRecord) string {
	if r.Source == "editor" {
		note := "asked"
		if r.Reason != "" {
			note += ": " + r.Reason
		}
		return note
	}
	verb := map[string]string{"allow": "allowed", "deny": "denied", "ask": "asked"}[r.Decision]
	if verb == "" {
		verb = r.Decision
	}
	note := verb + " by " + decider(r)
	if r.Reason != "" {
		note += ": " + r.Reason
	}
	return note
}

// decider names what decided an audit record: "rule git-status",
// "remembered answer r1a2b3c4d", "default", "mode plan", ...
func decider(r AuditRecord) string {
	if r.Source == "remembered" {
		return "remembered answer " + strings.TrimPrefix(r.Rule, "remembered:")
	}
	if r.Source != "rule" {
		return r.Source
	}
	if r.RuleID != "" {
		return "rule " + r.RuleID
	}
	return "rule " + r.Rule
}
