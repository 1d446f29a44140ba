package demo

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	acp "github.com/coder/acp-go-sdk"
)

// expectation is how one of the agent's permission requests must end.
type expectation struct {
	toolCallID string
	title      string
	optionKind string // of the option selected
	by         Party  // who answered: the broker itself or the editor
	ruleID     string // the rule that decided, when a rule did
	// remembers is set for an "always" answer the broker must remember;
	// fromRemembered for a request the broker must answer from it.
	remembers, fromRemembered bool
}

// expected returns how the agent's six permission requests must end. The
// editor's script allows git status and the writing of status.txt once,
// allows the first npm test always and the second once, and rejects the
// force push and the edit. With the
// demo's rules, the broker allows git status and denies the force push
// itself, and the editor never sees them. Any broker remembers the "always"
// answer and allows the second npm test itself, with its allow_once option.
func expected(rulesDecide, brokered bool) []expectation {
	want := []expectation{
		{toolCallID: "call_1", title: "git status", optionKind: "allow_once", by: Editor},
		{toolCallID: "call_2", title: "Write " + statusFile, optionKind: "allow_once", by: Editor},
		{toolCallID: "call_3", title: forcePush, optionKind: "reject_once", by: Editor},
		{toolCallID: "call_4", title: npmTest, optionKind: "allow_always", by: Editor},
		{toolCallID: "call_5", title: npmTestCoverage, optionKind: "allow_once", by: Editor},
		{toolCallID: "call_6", title: "Edit " + notesFile, optionKind: "reject_once", by: Editor},
	}
	if rulesDecide {
		want[0].by, want[0].ruleID = Broker, "git-status"
		want[2].by, want[2].ruleID = Broker, "no-force-push"
	}
	if brokered {
		want[3].remembers = true
		want[4].by, want[4].fromRemembered = Broker, true
	}
	return want
}

// EditorAsked returns the titles of the permission requests that the
// broker, with the demo's rules, passes to the editor, in order: the
// script's, which check holds every brokered run to.
func EditorAsked() []string {
	var titles []string
	for _, w := range expected(true, true) {
		if w.by == Editor {
			titles = append(titles, w.title)
		}
	}
	return titles
}

// NumberWord spells a small count out, as prose does.
func NumberWord(n int) string {
	if words := []string{"no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"}; n >= 0 && n < len(words) {
		return words[n]
	}
	return fmt.Sprint(n)
}

// check verifies that a run went as scripted: who answered each permission
// request and how, what the editor saw, what the broker's audit log says (if
// audited), and what is left in the workspace, which it returns in words.
func check(ws string, res *Result, want []expectation, audited bool) (string, error) {
	s := res.Stats
	if len(s.StopReasons) != 1 || s.StopReasons[0] != string(acp.StopReasonEndTurn) {
		return "", fmt.Errorf("the turn ended with %v, not end_turn", s.StopReasons)
	}
	if err := checkAnswers(s.Permissions, want); err != nil {
		return "", err
	}
	// The editor's own pipes: it never saw what the broker decided, and
	// answered the rest.
	asked := askedAbout(res.Editor)
	var editorWant []expectation
	for _, w := range want {
		if w.by == Editor {
			editorWant = append(editorWant, w)
		} else if asked[w.toolCallID] {
			return "", fmt.Errorf("the editor was asked about %s (%s), which the broker should have decided itself", w.toolCallID, w.title)
		}
	}
	seen, _ := transcribe(io.Discard, style{}, res.Editor)
	if err := checkAnswers(seen.Permissions, editorWant); err != nil {
		return "", fmt.Errorf("on the editor's side: %w", err)
	}
	if audited {
		if err := checkAudit(res.Audit, want); err != nil {
			return "", err
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, statusFile)); err != nil || string(b) != gitStatusOutput {
		return "", fmt.Errorf("the agent's %s is missing or wrong in the workspace", statusFile)
	}
	if b, err := os.ReadFile(filepath.Join(ws, notesFile)); err != nil || string(b) != initialNotes {
		return "", fmt.Errorf("%s changed although the edit was rejected", notesFile)
	}
	return fmt.Sprintf("%s was written; %s is unchanged because its edit was rejected", statusFile, notesFile), nil
}

// askedAbout returns the tool calls that entries ask permission for.
func askedAbout(entries []Entry) map[string]bool {
	asked := make(map[string]bool)
	for _, e := range entries {
		var m struct {
			Method string `json:"method"`
			Params struct {
				ToolCall struct {
					ToolCallID string `json:"toolCallId"`
				} `json:"toolCall"`
			} `json:"params"`
		}
		if json.Unmarshal(e.Raw, &m) == nil && m.Method == "session/request_permission" {
			asked[m.Params.ToolCall.ToolCallID] = true
		}
	}
	return asked
}

// checkAnswers compares the answered permission requests with want, in order.
func checkAnswers(got []Permission, want []expectation) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d permission requests were answered, want %d", len(got), len(want))
	}
	for i, w := range want {
		p := got[i]
		if p.ToolCallID != w.toolCallID {
			return fmt.Errorf("permission request %d was about %s (%s), want %s (%s)", i+1, p.ToolCallID, p.Title, w.toolCallID, w.title)
		}
		if p.OptionKind != w.optionKind || p.DecidedBy != w.by {
			answer := p.OptionKind
			if answer == "" {
				answer = p.Outcome
			}
			return fmt.Errorf("%s (%s) was answered %s by the %s, want %s by the %s", p.ToolCallID, p.Title, answer, p.DecidedBy, w.optionKind, w.by)
		}
	}
	return nil
}

// checkAudit verifies the broker's audit log: one record per permission
// request, in order, saying who decided it, and one for the agent's
// fs/write_text_file, which the editor's answer to call_2 let through. The
// request the broker answered from a remembered answer must name the entry
// that the "always" answer was remembered as.
func checkAudit(records []AuditRecord, want []expectation) error {
	var perms []AuditRecord
	writes := 0
	for _, r := range records {
		switch r.Method {
		case "session/request_permission":
			perms = append(perms, r)
		case "fs/write_text_file":
			writes++
		default:
			return fmt.Errorf("the audit log has an unexpected %s record", r.Method)
		}
	}
	if len(perms) != len(want) || writes != 1 {
		return fmt.Errorf("the audit log has %d permission records and %d fs/write_text_file records, want %d and 1", len(perms), writes, len(want))
	}
	remembered := "" // the entry the "always" answer was remembered as
	for i, w := range want {
		r := perms[i]
		source, ruleID := "editor", w.ruleID
		switch {
		case w.fromRemembered:
			source, ruleID = "remembered", remembered
		case w.by == Broker:
			source = "rule"
		}
		chosen := r.OptionKind
		if r.ChosenKind != "" {
			chosen = r.ChosenKind
		}
		if r.ToolCallID != w.toolCallID || r.Source != source || r.RuleID != ruleID || chosen != w.optionKind {
			return fmt.Errorf("audit record %d says %s: source %q, rule %q, option %q; want %s: source %q, rule %q, option %q",
				i+1, r.ToolCallID, r.Source, r.RuleID, chosen, w.toolCallID, source, ruleID, w.optionKind)
		}
		if w.remembers && r.OptionKind != "allow_once" {
			return fmt.Errorf("audit record %d (%s) says the agent was sent %q for the \"always\" answer, want its allow_once option", i+1, r.ToolCallID, r.OptionKind)
		}
		switch {
		case w.remembers:
			if r.Remembered == "" || strings.HasPrefix(r.Remembered, "nothing") || strings.Contains(r.Remembered, ",") {
				return fmt.Errorf("audit record %d (%s) says the \"always\" answer was remembered as %q, want one entry", i+1, r.ToolCallID, r.Remembered)
			}
			remembered = r.Remembered
		case r.Remembered != "":
			return fmt.Errorf("audit record %d (%s) says %q was remembered, want nothing", i+1, r.ToolCallID, r.Remembered)
		}
		if w.fromRemembered && (remembered == "" || r.Rule != "remembered:"+remembered) {
			return fmt.Errorf("audit record %d (%s) names the rule %q, want the remembered entry %q", i+1, r.ToolCallID, r.Rule, "remembered:"+remembered)
		}
	}
	return nil
}
