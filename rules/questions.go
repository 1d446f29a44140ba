package rules

import (
	"slices"

	"github.com/BurntSushi/toml"
)

// QuestionsConfig is the [questions] table: what becomes of the agent's
// questions (elicitation/create) beyond asking a human, who alone answers
// them. Nothing here can accept one: each setting only declines, or says
// where the human is asked.
type QuestionsConfig struct {
	// RefuseURL declines every URL-mode question at once: the agent
	// cannot send you to a page.
	RefuseURL bool
	// RefuseSessions declines the questions of these sessions (and of
	// their subagents' sessions) at once.
	RefuseSessions []string
	// AnswerForEditor, when the editor's initialize does not advertise
	// form elicitation, advertises it to the agent on the editor's behalf
	// and asks its questions on the channels (and the local socket) only.
	AnswerForEditor bool
}

var questionsKeys = []string{"refuse_url", "refuse_sessions", "answer_for_editor"}

func (d *decoder) questions(prim toml.Primitive) error {
	at := d.loc.tableKey("", "questions")
	if d.file.Layer == Project {
		// A repository must not choose which questions reach you, nor
		// change what the broker tells the agent of your editor.
		d.ignore(at, "[questions]", "a project file cannot choose how the agent's questions are answered (configure that in your user config)")
		return nil
	}
	var table map[string]toml.Primitive
	if v, err := d.value(prim); err != nil || !isTable(v) || d.md.PrimitiveDecode(prim, &table) != nil {
		return d.errorf(d.loc.topKey("questions"), "write a [questions] table", "questions must be a table")
	}
	cfg := &QuestionsConfig{}
	for _, k := range sortedKeys(table) {
		at := d.loc.tableKey(k, "questions")
		var err error
		switch k {
		case "refuse_url":
			cfg.RefuseURL, err = d.boolean(table[k], at, k)
		case "answer_for_editor":
			cfg.AnswerForEditor, err = d.boolean(table[k], at, k)
		case "refuse_sessions":
			cfg.RefuseSessions, err = d.strings(table[k], at, k)
			if err == nil && slices.Contains(cfg.RefuseSessions, "") {
				err = d.errorf(at, "name each session by its id, as the audit log and `acp-broker pending` show it", "refuse_sessions holds an empty session id")
			}
		default:
			err = d.unknown(at, k, " in [questions]", questionsKeys)
		}
		if err != nil {
			return err
		}
	}
	d.file.Questions = cfg
	return nil
}

// QuestionSettings are the [questions] settings in force: the first layer
// (managed, then user) that has a [questions] table decides them, as for
// [ask].
func (p *Policy) QuestionSettings() QuestionsConfig {
	for _, layer := range []Layer{Managed, User} {
		for _, f := range p.Files {
			if f.Layer == layer && f.Questions != nil {
				return *f.Questions
			}
		}
	}
	return QuestionsConfig{}
}
