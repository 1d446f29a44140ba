package rules

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestQuestionsTable(t *testing.T) {
	f, err := Parse("user.toml", User, "[questions]\nrefuse_url = true\nrefuse_sessions = [\"s-7\", \"s-9\"]\nanswer_for_editor = true\n")
	if err != nil {
		t.Fatal(err)
	}
	got := NewPolicy([]*File{f}, testHome, nil).QuestionSettings()
	if !got.RefuseURL || !got.AnswerForEditor || !slices.Equal(got.RefuseSessions, []string{"s-7", "s-9"}) {
		t.Fatalf("settings = %+v", got)
	}
	if got := NewPolicy(nil, testHome, nil).QuestionSettings(); got.RefuseURL || got.AnswerForEditor || got.RefuseSessions != nil {
		t.Fatalf("defaults = %+v", got)
	}
	// The managed layer's table decides over the user's.
	managed, err := Parse("managed.toml", Managed, "[questions]\nrefuse_url = false\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := NewPolicy([]*File{f, managed}, testHome, nil).QuestionSettings(); got.RefuseURL || got.AnswerForEditor {
		t.Fatalf("with a managed [questions]: %+v", got)
	}

	for _, b := range []struct{ src, where, msg, hint string }{
		{"[questions]\nrefuse_url = \"yes\"\n", "user.toml:2:1", "refuse_url must be true or false", "write refuse_url = true"},
		{"[questions]\nanswer_for_editors = true\n", "user.toml:2:1", `unknown key "answer_for_editors" in [questions]`, `did you mean "answer_for_editor"?`},
		{"[questions]\nrefuse_sessions = [\"a\", 3]\n", "user.toml:2:1", "refuse_sessions[1] is a number", "every element must be a string"},
		{"[questions]\nrefuse_sessions = [\"\"]\n", "user.toml:2:1", "empty session id", "acp-broker pending"},
		{"questions = 1\n", "user.toml:1:1", "questions must be a table", "[questions]"},
	} {
		_, err := Parse("user.toml", User, b.src)
		var ce *ConfigError
		if err == nil || !strings.HasPrefix(err.Error(), b.where) || !strings.Contains(err.Error(), b.msg) {
			t.Errorf("%q: err = %v, want %s ... %s", b.src, err, b.where, b.msg)
			continue
		}
		if !errors.As(err, &ce) || !strings.Contains(ce.Hint, b.hint) {
			t.Errorf("%q: hint %q, want %q", b.src, ce.Hint, b.hint)
		}
	}

	// A project file's [questions] is ignored with a warning, never an
	// error: a repository cannot decline your questions, nor make the
	// broker answer for your editor.
	p, err := Parse(".acp-broker.toml", Project, "[questions]\nanswer_for_editor = true\nbogus = 1\n")
	if err != nil || p.Questions != nil || len(p.Ignored) != 1 || !strings.HasPrefix(p.Ignored[0], ".acp-broker.toml:1: ignored [questions]") {
		t.Fatalf("project file: err = %v, file = %+v", err, p)
	}
	if got := NewPolicy([]*File{p}, testHome, nil).QuestionSettings(); got.AnswerForEditor {
		t.Fatal("a project file's answer_for_editor applied")
	}
}
