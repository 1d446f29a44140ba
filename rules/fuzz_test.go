package rules

import (
	"encoding/json"
	"slices"
	"testing"
)

// allowedPrograms are the programs attackRules allows.
var allowedPrograms = []string{"git", "ls", "echo", "cat", "npm", "grep"}

// FuzzDecideCommand feeds arbitrary shell text through the whole engine and
// checks that whatever it allows is plain: no opaque construct, only the
// allowed programs, no VAR= prefixes and no redirections.
func FuzzDecideCommand(f *testing.F) {
	for _, s := range []string{
		"git status", "git status; rm x", "echo $(rm x)", "ls > /tmp/x", "X=1 git status",
		"bash -c 'git status'", "cat <<EOF\nx\nEOF", "git pu{sh,ll}", "echo `id`", "ls | xargs rm",
		"f(){ rm x; }; f", "git status &", "cat ~/.ssh/id_rsa", "echo 'a;b' \"c|d\"",
	} {
		f.Add(s)
	}
	p := NewPolicy(mustParse(f, attackRules), testHome, nil)
	f.Fuzz(func(t *testing.T, command string) {
		req := ReadToolCallJSON(json.RawMessage(cmdCall(command)), Context{Cwd: testCwd, Home: testHome})
		v := p.Decide(req)
		if v.Decision != Allow {
			return
		}
		if req.Script == nil || len(req.Script.Opaqueness()) > 0 || len(req.NotUnderstood) > 0 {
			t.Fatalf("allowed %q, which cannot be read exactly", command)
		}
		for _, c := range req.Script.Commands {
			if len(c.Argv) == 0 || !slices.Contains(allowedPrograms, c.Argv[0]) || len(c.Assigns) > 0 || len(c.Redirects) > 0 {
				t.Fatalf("allowed %q: command %q %+v", command, c.Argv, c)
			}
		}
	})
}

// FuzzReadToolCall feeds arbitrary JSON as a tool call: reading and deciding
// it never panics, and a tool call that is not exact JSON is never allowed.
func FuzzReadToolCall(f *testing.F) {
	for _, s := range innocent {
		f.Add(s)
	}
	f.Add(`{"kind":"read","kind":"execute"}`)
	f.Add(`{"kind":"read","locations":[{"path":"~/.ssh/id_rsa"}]}`)
	p := NewPolicy(mustParse(f, attackRules), testHome, nil)
	f.Fuzz(func(t *testing.T, js string) {
		req := ReadToolCallJSON(json.RawMessage(js), Context{Cwd: testCwd, Home: testHome, MCPServers: []string{"github"}})
		v := p.Decide(req)
		if v.Decision == Allow && (checkStrict(json.RawMessage(js)) != nil || !json.Valid([]byte(js))) {
			t.Fatalf("allowed inexact JSON %q", js)
		}
	})
}

func mustParse(f *testing.F, src string) []*File {
	file, err := Parse("user.toml", User, src)
	if err != nil {
		f.Fatal(err)
	}
	return []*File{file}
}
