package permission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acp-broker/acp-broker/elicit"
	"github.com/acp-broker/acp-broker/jsonrpc"
	"github.com/acp-broker/acp-broker/notify"
	"github.com/acp-broker/acp-broker/rules"
	"github.com/acp-broker/acp-broker/session"
)

// questionParams is what the broker reads of an elicitation/create.
type questionParams struct {
	Mode, Message, URL, ElicitationID, ToolCallID string
	RequestedSchema                               json.RawMessage
}

var questionMembers = []string{"sessionId", "requestId", "toolCallId", "mode", "message", "requestedSchema", "url", "elicitationId", "_meta"}

// readQuestion reads an elicitation/create's params exactly: a member
// repeated, or in another letter case than the broker reads (which a Go
// peer would take for it), could show the channels another question than
// the one the agent reads the answer to.
func readQuestion(params json.RawMessage) (questionParams, error) {
	var q questionParams
	members, err := jsonrpc.ExactMembers(params, questionMembers...)
	if err != nil {
		return q, err
	}
	// In a fixed order: the first error is the one the audit line names.
	if err := readStrings(members, stringMember{"mode", &q.Mode}, stringMember{"message", &q.Message}, stringMember{"url", &q.URL},
		stringMember{"elicitationId", &q.ElicitationID}, stringMember{"toolCallId", &q.ToolCallID}); err != nil {
		return q, err
	}
	q.RequestedSchema = members["requestedSchema"]
	return q, nil
}

// elicitationResult is the broker's answer to an elicitation/create.
type elicitationResult struct {
	Action  string          `json:"action"`
	Content json.RawMessage `json:"content,omitempty"`
}

// questionCall is an agent's question as the routing sees it: a turn's
// cancel answers it with the cancel action.
type questionCall struct{ *session.Call }

func (q questionCall) RespondCancelledAs(won func()) bool {
	return q.RespondAs(elicitationResult{Action: "cancel"}, won)
}

// question puts an agent's question (elicitation/create) to a human, routed
// as a permission request is ([ask] route, escalate_after, timeout, first
// answer wins). Nothing else answers it: no rule, remembered answer, mode or
// default; only [questions] may decline it outright, and a question nobody
// could be asked, or nobody answered in time, is answered cancel.
func (e *Engine) question(c *session.Call, start time.Time) {
	// Every reason the audit line gives starts with what the question
	// really is, when it is a Codex approval: no path leaves that out.
	note := approvalNote(c.Params)
	because := func(why string) string {
		if note == "" || why == "" {
			return note + why
		}
		return note + "; " + why
	}
	rec := Record{Session: c.Session.ID, Parent: c.Session.Parent, Method: c.Method, Decision: "ask", Source: "editor", Asked: "question", Reason: note}
	// answerNow answers at once, with its line first (see write).
	answerNow := func(action, source, why string) {
		rec.Decision, rec.Source, rec.Reason = action, source, because(why)
		rec.Latency = ms(time.Since(start))
		_ = e.write(rec)
		c.Respond(elicitationResult{Action: action})
	}
	q, readErr := readQuestion(c.Params)
	rec.Mode, rec.ToolCallID = q.Mode, q.ToolCallID

	settings := e.questionSettings(c.Session)
	// Fail closed: a question the broker cannot read exactly may be a URL
	// question, or another session's, to a peer.
	switch {
	case settings.RefuseURL && readErr != nil:
		answerNow("decline", "questions", "[questions] refuse_url declines a question that cannot be read exactly ("+readErr.Error()+"): it may be a URL-mode question")
		return
	case settings.RefuseURL && strings.EqualFold(q.Mode, "url"):
		answerNow("decline", "questions", "[questions] refuse_url declines every URL-mode question")
		return
	case len(settings.RefuseSessions) > 0 && !sessionReadExactly(c):
		answerNow("decline", "questions", "[questions] refuse_sessions declines a question whose session cannot be read exactly: it may be a session it names")
		return
	case c.Session.ID != "" && (slices.Contains(settings.RefuseSessions, c.Session.ID) || (c.Session.Root != "" && slices.Contains(settings.RefuseSessions, c.Session.Root))):
		answerNow("decline", "questions", "[questions] refuse_sessions names this session")
		return
	}

	// What the channels would show; they are asked only if they can check
	// its answer exactly.
	p := notify.Prompt{
		Version:         notify.PromptVersion,
		Session:         c.Session.ID,
		Agent:           e.Agent,
		Options:         []notify.Option{},
		Message:         q.Message,
		Mode:            q.Mode,
		RequestedSchema: q.RequestedSchema,
		URL:             q.URL,
		ElicitationID:   q.ElicitationID,
		Digest:          notify.Digest(c.Raw()),
	}
	if q.Mode == "url" {
		p.RequestedSchema = nil // the URL is the question
	}
	var channelsCannot string
	var form *elicit.Form // the schema read once, for every channel's answer
	if readErr != nil {
		channelsCannot = "the question cannot be read exactly (" + readErr.Error() + ")"
	} else if f, err := p.CheckQuestion(); err != nil {
		channelsCannot = err.Error()
	} else {
		form = f
	}
	a := e.Asker
	if a == nil {
		a = &Asker{Route: "editor"}
	}
	if channelsCannot != "" {
		rec.Reason = because("only the editor can answer this question: " + channelsCannot)
		a = &Asker{Route: "editor", Timeout: a.Timeout}
	}
	// The editor is asked unless the broker answers for it.
	editor := !e.answeringForEditor.Load()
	if !editor && a.Local == nil && len(a.Channels) == 0 {
		why := "the broker answers questions for the editor ([questions] answer_for_editor), and no channel can ask this one"
		if channelsCannot != "" {
			why += ": " + channelsCannot
		}
		e.Log.Warn("nobody can be asked a question; answered cancel", "session", c.Session.ID, "why", why)
		answerNow("cancel", "not asked", why)
		return
	}
	if !editor {
		rec.Source, rec.Reason = "channel", because("the broker answers questions for the editor ([questions] answer_for_editor)")
	}

	ask := &asking{c: questionCall{c}, a: a, rec: rec, start: start, editor: editor}
	if a.Local != nil || len(a.Channels) > 0 {
		p.ID = fmt.Sprintf("%d-%d", os.Getpid(), a.nextID.Add(1))
		if a.Timeout > 0 {
			p.Deadline = time.Now().Add(a.Timeout).UTC()
		}
		ask.prompt = &p
	}
	ask.fromEditor = func(r *Record, answer *jsonrpc.Message) (string, string) {
		r.Decision = "error"
		if answer.Error == nil {
			r.Decision, r.Fields = readAction(answer.Result)
		}
		return "", "" // relayed as sent: it is the editor's to check
	}
	ask.fromChannel = func(r *Record, ans notify.Answer) (func(func()) bool, string, string, error) {
		result, err := channelResult(p, form, ans)
		if err != nil {
			return nil, "", "", err
		}
		r.Decision, r.Fields = result.Action, fieldNames(result.Content)
		return func(won func()) bool { return c.RespondAs(result, won) }, "", result.Action, nil
	}
	ask.timedOut = func(withdraw context.CancelCauseFunc, r Record, win func(Record, string)) {
		why := nobodyAnswered(a.Timeout)
		withdraw(&notify.Outcome{By: "timeout", Decision: "cancel", Reason: why})
		r.Decision, r.Source, r.Reason = "cancel", "timeout", because(why)
		c.RespondAs(elicitationResult{Action: "cancel"}, func() { win(r, "") })
	}
	ask.gaveUp = func(withdraw context.CancelCauseFunc, r Record, win func(Record, string)) {
		why := "every channel gave up without an answer, and the editor is not asked ([questions] answer_for_editor)"
		withdraw(&notify.Outcome{By: "broker", Decision: "cancel", Reason: why})
		r.Decision, r.Source, r.Reason = "cancel", "not answered", because(why)
		c.RespondAs(elicitationResult{Action: "cancel"}, func() { win(r, "") })
	}
	if q.Mode == "url" {
		ask.completed = c.ElicitationCompleted()
		ask.onCompleted = func(r Record, win func(Record, string)) {
			r.Decision, r.Source, r.Reason = "cancel", "agent", because("the agent completed the URL elicitation (elicitation/complete) before anyone answered")
			c.RespondAs(elicitationResult{Action: "cancel"}, func() { win(r, "") })
		}
	}
	e.route(ask)
}

// approvalNote says, for a question codex-acp marks as an approval
// (_meta.codex_approval_kind: "mcp_tool_call" to run an MCP tool,
// "tool_suggestion"), that it is one, naming the kind as the agent wrote
// it; "" for a question without the mark. The mark in another letter case,
// more than once, under a _meta in another case or not as a string, is
// named as a possible approval: a peer may read any of them. A question
// goes to a human whatever it says; the mark only says why in the audit
// line, and nothing here lowers it.
func approvalNote(params json.RawMessage) string {
	metas, kinds := jsonrpc.NestedNamesakes(params, []string{"_meta"}, 0, "codex_approval_kind")
	if !slices.ContainsFunc(kinds, func(k [][]jsonrpc.Namesake) bool { return len(k[0]) > 0 }) {
		return ""
	}
	if _, ok := jsonrpc.Only(metas[0], "_meta"); ok && len(kinds) == 1 {
		if raw, ok := jsonrpc.Only(kinds[0][0], "codex_approval_kind"); ok {
			if kind, ok := stringOf(raw); ok {
				return fmt.Sprintf("a Codex approval asked as a question (_meta.codex_approval_kind %q): only a human answers it", notify.OneLine(notify.Truncate(kind, 60)))
			}
		}
	}
	return "possibly a Codex approval asked as a question (its _meta names codex_approval_kind in another letter case, more than once, or not as a string): only a human answers it"
}

// sessionReadExactly reports whether a question names its session in one
// sessionId member, spelled so, holding a string: the session the broker
// knows it by is then the one every peer reads.
func sessionReadExactly(c *session.Call) bool {
	names := jsonrpc.Namesakes(c.Params, "sessionId")
	if names == nil {
		return false
	}
	raw, ok := jsonrpc.Only(names[0], "sessionId")
	if !ok {
		return false
	}
	id, ok := jsonrpc.String(c.Params, "sessionId")
	return ok && raw[0] == '"' && id == c.Session.ID && id != ""
}

// questionSettings are the [questions] settings for a session's directory;
// none when the rules cannot be loaded (the question still goes to a human).
func (e *Engine) questionSettings(s session.Info) rules.QuestionsConfig {
	if e.Rules == nil {
		return rules.QuestionsConfig{}
	}
	p, err := e.Rules.Policy(s.Cwd)
	if err != nil {
		e.Log.Error("cannot load the rules; the question is asked without [questions]", "err", err)
		return rules.QuestionsConfig{}
	}
	return p.QuestionSettings()
}

// channelResult is the agent's answer for a channel's answer to a
// question: an action of the three ACP defines, and for an accepted form
// content the form accepts, checked again against the form read once for
// the question (Prompt.ReplyTo), whatever the channel checked.
func channelResult(p notify.Prompt, form *elicit.Form, ans notify.Answer) (elicitationResult, error) {
	if ans.OptionID != "" {
		return elicitationResult{}, errors.New("a question has no options to choose")
	}
	var content json.RawMessage
	if ans.Content != "" {
		content = json.RawMessage(ans.Content)
	}
	checked, err := p.ReplyTo(form, ans.Action, content)
	if err != nil {
		return elicitationResult{}, err
	}
	result := elicitationResult{Action: checked.Action}
	if checked.Content != "" {
		result.Content = json.RawMessage(checked.Content)
	}
	return result, nil
}

// readAction reads an elicitation/create result for the audit line: its
// action, and the names (never the values) of the fields its content
// holds. A result that cannot be read exactly says so.
func readAction(result json.RawMessage) (action string, fields []string) {
	members, err := jsonrpc.ExactMembers(result, "action", "content", "_meta")
	if err != nil || json.Unmarshal(members["action"], &action) != nil || action == "" {
		return "unreadable", nil
	}
	return action, fieldNames(members["content"])
}

// fieldNames are the member names of a content object, sorted.
func fieldNames(content json.RawMessage) []string {
	members, err := jsonrpc.Members(content)
	if err != nil {
		return nil
	}
	var names []string
	for name := range members {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// RewriteInitialize is the session's Initialize hook. With [questions]
// answer_for_editor, when the editor's initialize does not advertise
// clientCapabilities.elicitation.form, it returns the initialize with form
// elicitation added (every other byte and member as the editor sent them),
// and the broker answers questions for the editor from then on: on the
// channels and the local socket, never in the editor, which would not
// understand them. Otherwise, and for an initialize it cannot read exactly,
// it returns nil: the editor's bytes go to the agent unchanged.
func (e *Engine) RewriteInitialize(m *jsonrpc.Message) ([]byte, string) {
	e.answeringForEditor.Store(false)
	if e.Rules == nil {
		return nil, ""
	}
	p, err := e.Rules.Policy("")
	if err != nil || !p.QuestionSettings().AnswerForEditor {
		return nil, ""
	}
	if err := jsonrpc.Strict(m.Params); err != nil {
		// A member a peer may read otherwise than the broker: which
		// capabilities the agent sees is unknown.
		e.Log.Warn("not answering questions for the editor: its initialize cannot be read exactly", "err", err)
		return nil, ""
	}
	// ACP v2 (a draft claude-agent-acp serves) names the member
	// capabilities.
	container := "clientCapabilities"
	if v, ok := jsonrpc.Field(m.Params, "protocolVersion"); ok {
		if n, err := strconv.ParseFloat(string(v), 64); err == nil && n >= 2 {
			container = "capabilities"
		}
	}
	if form, ok := jsonrpc.Field(m.Params, container, "elicitation", "form"); ok && !jsonrpc.IsNull(form) {
		return nil, "" // the editor answers forms itself
	}
	out, ok := withForms(m.Raw, container)
	if !ok {
		e.Log.Warn("not answering questions for the editor: its initialize has no capabilities object to add forms to")
		return nil, ""
	}
	e.answeringForEditor.Store(true)
	note := `added ` + container + `.elicitation.form ([questions] answer_for_editor): the editor did not advertise it, so the broker answers the agent's questions through the channels`
	_ = e.write(Record{Method: "initialize", Decision: "rewritten", Source: "questions", Reason: note}) // (write logs a failure)
	return out, note
}

// withForms adds form elicitation to an initialize request's client
// capabilities (the params member container), at the first level that
// lacks it or holds null (container, elicitation, form), leaving every
// other byte as it was. It returns false when a level is there but not an
// object.
func withForms(frame []byte, container string) ([]byte, bool) {
	path := []string{"params", container, "elicitation", "form"}
	for depth := 1; depth < len(path); depth++ {
		parent, ok := jsonrpc.FieldSpan(frame, path[:depth]...)
		if !ok || frame[parent.Start] != '{' {
			return nil, false
		}
		// What this level needs: {"form":{}} for elicitation, and so on.
		value := "{}"
		for i := len(path) - 1; i > depth; i-- {
			value = fmt.Sprintf(`{%q:%s}`, path[i], value)
		}
		sp, ok := jsonrpc.FieldSpan(frame, path[:depth+1]...)
		switch {
		case !ok:
			member := fmt.Sprintf(`%q:%s`, path[depth], value)
			if inner := bytes.TrimSpace(frame[parent.Start+1 : parent.End-1]); len(inner) > 0 {
				member += ","
			}
			at := jsonrpc.Span{Start: parent.Start + 1, End: parent.Start + 1}
			return jsonrpc.Splice(frame, map[jsonrpc.Span][]byte{at: []byte(member)}), true
		case jsonrpc.IsNull(frame[sp.Start:sp.End]):
			return jsonrpc.Splice(frame, map[jsonrpc.Span][]byte{sp: []byte(value)}), true
		}
	}
	return nil, false
}
