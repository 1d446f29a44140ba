package rules

import (
	"encoding/json"
	"testing"
)

// TestEnvironmentIsAnAssignment: a terminal's environment is judged as
// VAR=x prefixes are: allow rules do not match, deny rules still do, and a
// variable that runs code makes the command opaque.
func TestEnvironmentIsAnAssignment(t *testing.T) {
	p := policyFrom(t, "[[rule]]\ndecision = \"allow\"\ncommand = \"git *\"\n[[rule]]\ndecision = \"deny\"\ncommand = \"git push *\"\n")
	read := func(command string, env ...string) Verdict {
		t.Helper()
		req := ReadToolCallJSON(json.RawMessage(`{"kind":"execute","rawInput":{"command":`+command+`}}`), Context{Cwd: testCwd, Home: testHome})
		req.AddEnvironment(env)
		return p.Decide(req)
	}
	for _, c := range []struct {
		name, command string
		env           []string
		want          Decision
		source        string
	}{
		{"no environment", `["git","status"]`, nil, Allow, "rule"},
		{"a harmless variable", `["git","status"]`, []string{"TZ=UTC"}, Ask, "default"},
		{"inside a shell", `["bash","-c","git status && git log"]`, []string{"TZ=UTC"}, Ask, "default"},
		{"a variable that runs code", `["git","diff"]`, []string{"GIT_EXTERNAL_DIFF=./evil"}, Ask, "not see-through"},
		{"LD_PRELOAD", `"git status"`, []string{"LD_PRELOAD=/tmp/x.so"}, Ask, "not see-through"},
		{"a name no shell takes", `["git","status"]`, []string{"A B=1"}, Ask, "not see-through"},
		{"a deny still applies", `["git","push","origin"]`, []string{"GIT_SSH_COMMAND=./evil"}, Deny, "rule"},
	} {
		if v := read(c.command, c.env...); v.Decision != c.want || v.Source != c.source {
			t.Errorf("%s: %s (%s: %s), want %s (%s)", c.name, v.Decision, v.Source, v.Reason, c.want, c.source)
		}
	}
}
