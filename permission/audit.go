package permission

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Record is one line of the audit log: one intercepted request and what
// became of it.
type Record struct {
	Time       time.Time `json:"time"`
	Session    string    `json:"session,omitempty"`
	ToolCallID string    `json:"tool_call_id,omitempty"`
	Agent      string    `json:"agent"`
	Method     string    `json:"method"`
	Kind       string    `json:"kind,omitempty"`
	Title      string    `json:"title,omitempty"`
	// Commands are the simple commands, normalised as deny rules see them.
	Commands []string `json:"commands,omitempty"`
	Paths    []string `json:"paths,omitempty"`
	URLs     []string `json:"urls,omitempty"`
	MCP      string   `json:"mcp,omitempty"`
	// Decision is allow, deny or ask as decided; for a request the editor
	// answered, it is what the editor chose.
	Decision string `json:"decision"`
	// Source says who decided: "rule", "default", "protected", "mode
	// <name>", "not understood", "editor", ...
	Source string `json:"source"`
	// Asked says why a request went to the human: the source that asked
	// ("default", "rule", "protected", "not understood", ...).
	Asked  string `json:"asked,omitempty"`
	Rule   string `json:"rule,omitempty"` // file:line
	RuleID string `json:"rule_id,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Channel and Who say which channel answered, and who, where it knows.
	Channel  string `json:"channel,omitempty"`
	Who      string `json:"who,omitempty"`
	Option   string `json:"option,omitempty"`      // the optionId sent to the agent
	OptionKd string `json:"option_kind,omitempty"` // its kind
	// Chosen and ChosenKd are the option a human chose when the agent was
	// sent another: an "always" the broker remembers itself, answered as
	// the request's once-option (Option).
	Chosen   string `json:"chosen,omitempty"`
	ChosenKd string `json:"chosen_kind,omitempty"`
	// AgentRemembers says why an answer that reaches beyond the request was
	// sent to the agent as chosen, which may then remember it itself.
	AgentRemembers string  `json:"agent_remembers,omitempty"`
	Latency        float64 `json:"latency_ms"`
	// Always says, for a request put to a human with an allow_always
	// option, what that answer would remember (each entry's matcher), or
	// "nothing (why)".
	Always string `json:"always,omitempty"`
	// Refused lists the answers refused for this request and why, each
	// prefixed by where it came from: an answer on the local socket from
	// one of the agent's own processes, and a channel's answer that
	// answers nothing (an option the request does not offer, content that
	// does not fit a question's form, an action ACP does not define).
	Refused []string `json:"refused,omitempty"`
	// Remembered lists the entries an "always" answer was remembered as, or
	// says why it was not.
	Remembered string `json:"remembered,omitempty"`
	// Parent is, for a subagent's session, the session that announced it.
	Parent string `json:"parent_session,omitempty"`
	// Mode is a question's (elicitation/create) mode, "form" or "url";
	// its Decision is the action it was answered with, and Fields the
	// names of the fields the answer filled in (their values are the
	// human's, and never logged).
	Mode   string   `json:"mode,omitempty"`
	Fields []string `json:"fields,omitempty"`
}

// Audit appends records to a JSONL file, one whole line per write.
type Audit struct {
	mu sync.Mutex
	w  io.WriteCloser
}

// OpenAudit opens (creating, mode 0600, in a 0700 directory) the audit log.
func OpenAudit(path string) (*Audit, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &Audit{w: f}, nil
}

// Write appends one record. A nil Audit writes nothing.
func (a *Audit) Write(r Record) error {
	if a == nil {
		return nil
	}
	b, err := json.Marshal(&r) // a pointer: the record is not copied to the heap
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	_, err = a.w.Write(append(b, '\n'))
	return err
}

// Close closes the log.
func (a *Audit) Close() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.w.Close()
}
