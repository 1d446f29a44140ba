package rules

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProblems: each set-up that parses but would fail or never ask is
// reported once, as an error or a warning with a hint; a set-up without
// such a mistake is reported nothing.
func TestProblems(t *testing.T) {
	env := Environment{
		Getenv: func(name string) string {
			if name == "SET" {
				return "x"
			}
			return ""
		},
		LookPath: func(name string) (string, error) {
			if name == "notify-send" || strings.HasPrefix(name, "/") || strings.HasPrefix(name, "./") {
				return name, nil
			}
			return "", errors.New("not found")
		},
		UserConfig: "/home/me/.config/acp-broker/config.toml",
	}
	const exec = "[[channel]]\nname = \"desk\"\ntype = \"exec\"\ncommand = [\"notify-send\"]\n"
	for _, c := range []struct {
		name, config string
		want         Severity // "" for none
		says         string
	}{
		{"clean", exec + "[ask]\nroute = \"both\"\n", "", ""},
		{"route_both_escalate_no_channel", "[ask]\nroute = \"both\"\nescalate_after = \"1m\"\n", Error, "the broker would refuse to start"},
		{"route_both_no_channel", "[ask]\nroute = \"both\"\n", Warning, "only the editor is asked"},
		{"escalate_no_channel", "[ask]\nescalate_after = \"1m\"\n", Warning, "nothing is escalated to"},
		{"timeout_equal_to_escalate", exec + "[ask]\nescalate_after = \"1m\"\ntimeout = \"1m\"\n", Warning, "rejected before the channels are asked"},
		{"timeout_longer_than_escalate", exec + "[ask]\nescalate_after = \"1m\"\ntimeout = \"5m\"\n", "", ""},
		{"exec_relative", "[[channel]]\nname = \"desk\"\ntype = \"exec\"\ncommand = [\"./notify.sh\"]\n[ask]\nroute = \"both\"\n", Warning, "relative to the directory the broker is started in"},
		{"ntfy_token_set", "[[channel]]\nname = \"p\"\ntype = \"ntfy\"\nserver = \"https://ntfy.sh\"\ntopic = \"t\"\ntoken_env = \"SET\"\n[ask]\nroute = \"both\"\n", "", ""},
		{"execute_with_command", "[[rule]]\ndecision = \"allow\"\nkind = \"execute\"\ncommand = \"make\"\n", "", ""},
		{"execute_among_kinds", "[[rule]]\ndecision = \"allow\"\nkind = [\"read\", \"execute\"]\n", Warning, "can never allow a command"},
		{"deny_execute_only", "[[rule]]\ndecision = \"deny\"\nkind = \"execute\"\n", "", ""},
		{"ids_unique", "[[rule]]\nid = \"a\"\ndecision = \"deny\"\ncommand = \"x\"\n[[rule]]\nid = \"b\"\ndecision = \"deny\"\ncommand = \"y\"\n", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.toml")
			must(t, os.WriteFile(path, []byte(c.config), 0o600))
			f, err := ParseFile(path, User)
			must(t, err)
			problems := NewPolicy([]*File{f}, "/home/me", nil).Problems(env)
			switch {
			case c.want == "" && len(problems) > 0:
				t.Errorf("problems %q, want none", problems)
			case c.want != "" && (len(problems) != 1 || problems[0].Severity != c.want || !strings.Contains(problems[0].Msg, c.says) || problems[0].Hint == ""):
				t.Errorf("problems %+v, want one %s saying %q, with a hint", problems, c.want, c.says)
			}
		})
	}
}
