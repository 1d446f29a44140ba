//go:build linux

package integration

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHotReload: a rule file changed while the broker runs applies to the
// next request, in the same broker process; a file that becomes invalid
// keeps the previous rules in force and logs the error once; a fixed file
// applies again.
func TestHotReload(t *testing.T) {
	t.Parallel()
	const allowMake = `[[rule]]
id = "make-ok"
decision = "allow"
command = "make"
`
	const denyMake = `[[rule]]
id = "make-no"
decision = "deny"
reason = "no builds today"
command = "make"
`
	const invalid = `[[rule]]
id = "make-allowed-again"
decision = "allow"
comand = "make"
`
	const fixed = `[[rule]]
id = "make-allowed-again"
decision = "allow"
command = "make"
`
	d := startDecider(t, deciderOptions{rules: allowMake})
	d.noisy = true // the invalid file is logged
	lastRuleID := func(toolCallID string) string {
		return waitAudit(d.t, d.audit, toolCallID, byToolCall(toolCallID)).RuleID
	}
	const invalidLog = "a rule file is invalid; the previous rules stay in force"
	steps := []struct {
		name string
		run  func()
	}{
		{"allowed_by_the_first_file", func() {
			d.decided(reqMake("1"), "allow")
			if id := lastRuleID("m1"); id != "make-ok" {
				d.t.Errorf("decided by rule %q, want make-ok", id)
			}
		}},
		{"denied_after_the_file_changes", func() {
			writeFileAtomic(d.t, d.config, denyMake)
			d.decided(reqMake("2"), "reject")
			if id := lastRuleID("m2"); id != "make-no" {
				d.t.Errorf("decided by rule %q, want make-no", id)
			}
		}},
		{"invalid_file_keeps_the_previous_rules", func() {
			writeFileAtomic(d.t, d.config, invalid)
			d.liveOnly("the running broker keeps the last rules that loaded; explain reads the files as they are now")
			d.decided(reqMake("3"), "reject")
			line := d.WaitStderr("the invalid file", func(l string) bool { return strings.Contains(l, invalidLog) })
			// The log names the file, line and column of the problem.
			if want := d.config + ":4:1"; !strings.Contains(line, want) {
				d.t.Errorf("the error log does not name %s:\n%s", want, line)
			}
		}},
		{"invalid_file_logged_once_not_per_request", func() {
			d.liveOnly("the running broker keeps the last rules that loaded; explain reads the files as they are now")
			d.decided(reqMake("4"), "reject")
			// The agent's stderr passes through the broker's: once this line
			// is there, anything the broker logged for request 4 is too.
			d.AgentStderr("agent: after request 4")
			d.WaitStderr("the agent's line", func(l string) bool { return l == "agent: after request 4" })
			if n := len(matchingLines(d.stderrText(), invalidLog)); n != 1 {
				d.t.Errorf("the invalid file was logged %d times, want once:\n%s", n, d.stderrText())
			}
		}},
		{"fixed_file_applies", func() {
			writeFileAtomic(d.t, d.config, fixed)
			d.decided(reqMake("5"), "allow")
			if id := lastRuleID("m5"); id != "make-allowed-again" {
				d.t.Errorf("decided by rule %q, want make-allowed-again", id)
			}
		}},
		{"deleted_config_file_keeps_the_previous_rules", func() {
			// A --config file that disappears is an error, never "no rules".
			if err := os.Remove(d.config); err != nil {
				d.t.Fatal(err)
			}
			afterChange()
			d.liveOnly("the running broker keeps the last rules that loaded; explain reads the files as they are now")
			d.decided(reqMake("6"), "allow")
			if id := lastRuleID("m6"); id != "make-allowed-again" {
				d.t.Errorf("decided by rule %q, want make-allowed-again", id)
			}
		}},
	}
	for _, s := range steps {
		if !d.step(t, s.name, s.run) {
			return
		}
	}
	d.finish()
}

// TestProjectFileUntrusted: the .acp-broker.toml in the session's directory
// (not the broker's) is untrusted: its deny rules apply, over a user allow;
// its allow rules and its mode do not, until `acp-broker trust`, which the
// running broker notices.
func TestProjectFileUntrusted(t *testing.T) {
	t.Parallel()
	const user = `[[rule]]
id = "user-make"
decision = "allow"
command = "make *"
`
	const project = `mode = "bypass"

[[rule]]
id = "project-curl"
decision = "allow"
command = "curl *"

[[rule]]
id = "project-no-deploy"
decision = "deny"
reason = "deploys go through CI"
command = "make deploy *"
`
	d := startDecider(t, deciderOptions{rules: user, project: project})
	d.noisy = true // the untrusted project file is warned about
	curl := func(id string) string {
		return permission(id, `{"toolCallId":"p`+id+`","title":"curl https://example.com","kind":"execute","rawInput":{"command":"curl https://example.com"}}`, claudeOptions)
	}
	rm := func(id string) string {
		return permission(id, `{"toolCallId":"p`+id+`","title":"rm -rf build","kind":"execute","rawInput":{"command":"rm -rf build"}}`, claudeOptions)
	}
	deploy := func(id string) string {
		return permission(id, `{"toolCallId":"p`+id+`","title":"make deploy prod","kind":"execute","rawInput":{"command":"make deploy prod"}}`, claudeOptions)
	}
	build := func(id string) string {
		return permission(id, `{"toolCallId":"p`+id+`","title":"make build","kind":"execute","rawInput":{"command":"make build"}}`, claudeOptions)
	}
	steps := []struct {
		name string
		run  func()
	}{
		{"project_deny_beats_user_allow", func() { d.decided(deploy("1"), "reject") }},
		{"user_allow_applies", func() { d.decided(build("2"), "allow") }},
		{"untrusted_project_allow_ignored", func() { d.asked(curl("3"), answer("3", "reject")) }},
		{"untrusted_project_mode_ignored", func() { d.asked(rm("4"), answer("4", "reject")) }},
		{"trusted_project_allow_applies", func() {
			trustProject(d.t, d, d.cwd)
			d.decided(curl("5"), "allow")
		}},
		{"trusted_project_mode_applies", func() { d.decided(rm("6"), "allow") }},
		{"project_deny_still_applies", func() { d.decided(deploy("7"), "reject") }},
		{"changed_project_file_untrusted_again", func() {
			writeFileAtomic(d.t, filepath.Join(d.cwd, ".acp-broker.toml"), project+"\n# changed\n")
			d.asked(curl("8"), answer("8", "reject"))
		}},
	}
	for _, s := range steps {
		if !d.step(t, s.name, s.run) {
			return
		}
	}
	d.finish()
}

// TestBrokenConfigAtStartup: a rule file that does not parse stops the
// broker before anything is relayed: exit status 1, nothing on stdout, the
// error with file:line:col and a hint on stderr. The agent, which starts
// while the rules load, is sent nothing and is gone when the broker exits.
func TestBrokenConfigAtStartup(t *testing.T) {
	t.Parallel()
	trackSources(t)
	for _, c := range []struct {
		name    string
		content string
		user    bool   // in $XDG_CONFIG_HOME/acp-broker/config.toml rather than --config
		want    string // stderr, with FILE for the file's path
	}{
		{
			name:    "unknown_key",
			content: "[[rule]]\nid = \"x\"\ndecision = \"allow\"\ncomand = \"make\"\n",
			want:    "acp-broker: error: FILE:4:1: unknown key \"comand\" in [[rule]]\nacp-broker: hint: did you mean \"command\"?\n",
		},
		{
			name:    "unknown_key_in_the_user_layer",
			content: "\n[[rule]]\ndecision = \"deny\"\n  comand = [\"git push --force *\"]\n",
			user:    true,
			want:    "acp-broker: error: FILE:4:3: unknown key \"comand\" in [[rule]]\nacp-broker: hint: did you mean \"command\"?\n",
		},
		{
			name:    "toml_syntax",
			content: "[[rule]]\ndecision = \"allow\"\ncommand = [\"make\"\n",
		},
		{
			name:    "path_without_anchor",
			content: "[[rule]]\ndecision = \"allow\"\nkind = \"edit\"\npath = \"src/**\"\n",
		},
		{
			name:    "bad_mode",
			content: "mode = \"yolo\"\n",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			file := filepath.Join(dir, "rules.toml")
			env := testEnv()
			var args []string
			if c.user {
				config := filepath.Join(dir, "config")
				file = filepath.Join(config, "acp-broker", "config.toml")
				if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
					t.Fatal(err)
				}
				env = append(env, "XDG_CONFIG_HOME="+config)
			} else {
				args = append(args, "--config", file)
			}
			if err := os.WriteFile(file, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			// The agent, if it got as far, reports to this socket.
			ln := listenCtl(t)
			args = append(args, "--audit", filepath.Join(dir, "audit.jsonl"), "--", "fakeagent", "-ctl", ln.Addr().String())

			cmd := exec.Command(brokerBin, args...)
			cmd.Env = env
			cmd.Dir = dir
			var stdout, stderr bytes.Buffer
			cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(msgInitialize+"\n"), &stdout, &stderr
			cmd.WaitDelay = waitTimeout
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Errorf("exit: %v, want status 1\nstderr:\n%s", err, stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout is not empty: %q", stdout.String())
			}
			got := strings.ReplaceAll(stderr.String(), file, "FILE")
			if c.want != "" {
				if got != c.want {
					t.Errorf("stderr:\n%s\nwant:\n%s", got, c.want)
				}
			} else {
				// The README: "A file that does not parse stops everything
				// with its position and a hint".
				lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
				if !hasPosition(lines[0]) {
					t.Errorf("stderr does not start with \"acp-broker: error: FILE:LINE:COL: \":\n%s", got)
				}
				if len(lines) != 2 || !strings.HasPrefix(lines[1], "acp-broker: hint: ") {
					t.Errorf("stderr is not one error line and one hint line:\n%s", got)
				}
			}
			// A connection the agent made is queued by now: it is dead.
			_ = ln.SetDeadline(time.Now().Add(200 * time.Millisecond))
			if c, err := ln.Accept(); err == nil {
				agentGotNothing(t, c, bufio.NewReader(c))
				c.Close()
			}
			if _, err := os.Stat(filepath.Join(dir, "audit.jsonl")); err == nil {
				data, _ := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
				if len(data) > 0 {
					t.Errorf("the audit log has lines:\n%s", data)
				}
			}
		})
	}
}

// hasPosition reports whether an error line names FILE:LINE:COL.
func hasPosition(line string) bool {
	rest, ok := strings.CutPrefix(line, "acp-broker: error: FILE:")
	if !ok {
		return false
	}
	parts := strings.SplitN(rest, ":", 3)
	if len(parts) < 3 {
		return false
	}
	for _, p := range parts[:2] {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}
