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
