package permission

import (
	"encoding/json"
	"testing"

	"github.com/acp-broker/acp-broker/rules"
)

// TestCommandApprovalComparesWhatRuns: a command line of plain words is the
// argv it splits into; anything a shell would expand, quote, join or
// redirect is compared only as that exact line; the directory is part of it.
func TestCommandApprovalComparesWhatRuns(t *testing.T) {
	key := func(cmd rules.GivenCommand, dir string) string {
		t.Helper()
		k, ok := commandApproval(cmd, dir)
		if !ok {
			t.Fatalf("%+v: no key", cmd)
		}
		return k
	}
	same := []struct{ a, b rules.GivenCommand }{
		{rules.GivenCommand{Line: "go test ./..."}, rules.GivenCommand{Argv: []string{"go", "test", "./..."}}},
		{rules.GivenCommand{Line: "make  deploy "}, rules.GivenCommand{Argv: []string{"make", "deploy"}}},
		{rules.GivenCommand{Line: "go test -run=TestX"}, rules.GivenCommand{Argv: []string{"go", "test", "-run=TestX"}}},
		{rules.GivenCommand{Line: "git status && rm x"}, rules.GivenCommand{Line: "git status && rm x"}},
	}
	for _, c := range same {
		if key(c.a, "/w") != key(c.b, "/w") {
			t.Errorf("%+v and %+v differ", c.a, c.b)
		}
	}
	differ := []struct{ a, b rules.GivenCommand }{
		{rules.GivenCommand{Line: "make 'deploy'"}, rules.GivenCommand{Argv: []string{"make", "deploy"}}},
		{rules.GivenCommand{Line: "rm *.o"}, rules.GivenCommand{Argv: []string{"rm", "*.o"}}},
		{rules.GivenCommand{Line: "cat ~/x"}, rules.GivenCommand{Argv: []string{"cat", "~/x"}}},
		{rules.GivenCommand{Line: "X=1 make"}, rules.GivenCommand{Argv: []string{"X=1", "make"}}},
		{rules.GivenCommand{Line: "echo $HOME"}, rules.GivenCommand{Argv: []string{"echo", "$HOME"}}},
		{rules.GivenCommand{Line: "git status"}, rules.GivenCommand{Argv: []string{"bash", "-c", "git status"}}},
		{rules.GivenCommand{Line: "git status; rm x"}, rules.GivenCommand{Line: "git status && rm x"}},
	}
	for _, c := range differ {
		if key(c.a, "/w") == key(c.b, "/w") {
			t.Errorf("%+v and %+v are taken for the same command", c.a, c.b)
		}
	}
	if key(rules.GivenCommand{Line: "make"}, "/w") == key(rules.GivenCommand{Line: "make"}, "/w/sub") {
		t.Error("the directory is not part of the key")
	}
	if _, ok := commandApproval(rules.GivenCommand{Line: "  "}, "/w"); ok {
		t.Error("an empty command has a key")
	}
}

// TestNoteRequestCoversWhatTheRequestShowed: an answered permission request
// covers its command in its directory, else the paths it edits; nothing
// for a request the broker could not read exactly, and each once.
func TestNoteRequestCoversWhatTheRequestShowed(t *testing.T) {
	ctx := rules.Context{Cwd: "/w", Home: "/home/u"}
	read := func(js string) *rules.Request { return rules.ReadToolCallJSON(json.RawMessage(js), ctx) }
	var a approvals
	a.noteRequest("s1", read(`{"kind":"execute","rawInput":{"command":"make deploy"}}`), nil, true)
	a.noteRequest("s1", read(`{"kind":"execute","rawInput":{"command":"make docs > docs.txt","cwd":"/w/sub"}}`), nil, true)
	a.noteRequest("s1", read(`{"kind":"edit","rawInput":{"file_path":"a.md"},"locations":[{"path":"/w/b.md"}]}`), nil, true)
	a.noteRequest("s1", read(`{"kind":"edit","rawInput":{"file_path":"/w/c.md","file_path":"/w/d.md"}}`), nil, true)
	a.noteRequest("s1", read(`{"kind":"read","rawInput":{"file_path":"/w/e.md"}}`), nil, true)
	a.noteRequest("", read(`{"kind":"edit","rawInput":{"file_path":"/w/f.md"}}`), nil, true)

	argv := func(words ...string) string { k, _ := commandApproval(rules.GivenCommand{Argv: words}, "/w"); return k }
	for _, c := range []struct {
		name, session, what string
		found               bool
	}{
		{"the command as argv", "s1", argv("make", "deploy"), true},
		{"the command twice", "s1", argv("make", "deploy"), false},
		{"in another session", "s2", writeApproval("/w/a.md"), false},
		{"the edited path", "s1", writeApproval("/w/a.md"), true},
		{"the location", "s1", writeApproval("/w/b.md"), true},
		{"a command's redirection", "s1", writeApproval("/w/sub/docs.txt"), false},
		{"a request read inexactly", "s1", writeApproval("/w/c.md"), false},
		{"a read", "s1", writeApproval("/w/e.md"), false},
		{"a request with no session", "s1", writeApproval("/w/f.md"), false},
	} {
		if found, _ := a.take(c.session, c.what, nil); found != c.found {
			t.Errorf("%s: found %v, want %v", c.name, found, c.found)
		}
	}
}

// TestMCPApprovalComparesArgumentsExactly: an answer given for an MCP call
// with the arguments shown covers only a call whose arguments every server
// reads alike: the same keys and strings (however escaped, in any order),
// numbers as written. Arguments that cannot be compared (1e999 to a
// float64, a repeated key, text that decodes to U+FFFD) cover nothing and
// are covered by nothing but an answer that showed no arguments.
func TestMCPApprovalComparesArgumentsExactly(t *testing.T) {
	for _, c := range []struct {
		name, shown, called string
		covers              bool
	}{
		{"same", `{"a":1,"b":"x"}`, `{"a":1,"b":"x"}`, true},
		{"key order and escapes", `{"a":1,"b":"x"}`, `{"b":"\u0078", "a":1}`, true},
		{"no arguments", `{}`, ``, true},
		{"another value", `{"a":1}`, `{"a":2}`, false},
		{"1 and 1.0", `{"a":1}`, `{"a":1.0}`, false},
		{"integers one float64 apart", `{"id":9007199254740992}`, `{"id":9007199254740993}`, false},
		{"shown unreadable as a float64", `{"a":1,"pad":1e999}`, `{"a":666}`, false},
		{"called unreadable as a float64", `{}`, `{"pad":1e999}`, false},
		{"both unreadable", `{"pad":1e999,"a":"a","a":"b"}`, `{"pad":1e999,"a":"a","a":"b"}`, false},
		{"repeated key shown", `{"a":"safe","a":"evil"}`, `{"a":"evil"}`, false},
		{"repeated key called", `{"a":"evil"}`, `{"a":"safe","a":"evil"}`, false},
		{"keys in two cases", `{"path":"a"}`, `{"path":"a","Path":"b"}`, false},
		{"nested repeated key", `{"o":{"k":1}}`, `{"o":{"k":1,"k":1}}`, false},
		{"lone surrogate and U+FFFD", `{"a":"\ufffd"}`, `{"a":"\ud800"}`, false},
		{"invalid UTF-8", "{\"a\":\"\xff\"}", "{\"a\":\"\xfe\"}", false},
	} {
		var a approvals
		a.note("s1", "mcp notes/t", json.RawMessage(c.shown), true)
		if found, _ := a.take("s1", "mcp notes/t", json.RawMessage(c.called)); found != c.covers {
			t.Errorf("%s: %s covers %s: %v, want %v", c.name, c.shown, c.called, found, c.covers)
		}
	}
	var a approvals
	a.note("s1", "mcp notes/t", nil, true)
	if found, _ := a.take("s1", "mcp notes/t", json.RawMessage(`{"pad":1e999}`)); !found {
		t.Error("an answer that showed no arguments covers any call of the tool")
	}
}
