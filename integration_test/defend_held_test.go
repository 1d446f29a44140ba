//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The tests in this file pin what the broker does with the
// fs/write_text_file and terminal/create requests an agent sends the editor
// without a permission request that covers them: a command it cannot see
// through is refused and never reaches the editor; anything else the rules
// do not allow outright is held and asked with the broker's own prompt, and
// reaches the editor, unchanged, only if the answer allows it.

// heldRules are decideRules with a deny rule that disguises must not pass.
const heldRules = decideRules + `
[[rule]]
id = "no-rm"
decision = "deny"
reason = "nothing is deleted"
command = "rm *"
`

// heldAsked requires the broker to hold the (expanded) request and ask
// about it with its own prompt, whose title shows `shows`, and answers it
// with optionID. An allow must bring the request to the editor unchanged,
// whose answer then reaches the agent; anything else must give the agent an
// error, the request never reaching the editor. It returns the error
// message, if any.
func (d *decider) heldAsked(t testing.TB, req, shows, optionID, answer string) string {
	t.Helper()
	req = d.expand(req)
	d.AgentSend(req)
	d.answerOwnPrompt(t, shows, optionID)
	if strings.HasPrefix(optionID, "allow") {
		d.EditorExpect(req)
		d.EditorToAgent(answer)
		return ""
	}
	msg := expectError(t, d.AgentRecv(), requestID(t, req), -32000)
	if !strings.HasPrefix(msg, "acp-broker denied this: ") {
		t.Errorf("error message %q does not start with %q", msg, "acp-broker denied this: ")
	}
	// Had the broker forwarded it as well, it would be the editor's next line.
	mark := d.marker()
	d.AgentSend(mark)
	d.EditorExpect(mark)
	return msg
}

// forwardedAtOnce requires the (expanded) request to reach the editor
// unchanged without a prompt of the broker's own, and the editor's answer
// to reach the agent.
func (d *decider) forwardedAtOnce(req, answer string) { d.asked(req, answer) }

// refusedUnrun is refused for a terminal/create: the request must be
// refused and never reach the editor. If it does reach the editor, the test
// runs it, as an editor would, so that its side effect shows too.
func (d *decider) refusedUnrun(req string) string {
	d.t.Helper()
	req = d.expand(req)
	mark := d.marker()
	d.AgentSend(req, mark)
	if got := d.EditorRecv(); got != mark {
		runAsEditor(d.t, got)
		d.t.Errorf("the editor received\n  %s\nwant the marker: the request was not refused", clip(got))
		return ""
	}
	msg := expectError(d.t, d.AgentRecv(), requestID(d.t, req), -32000)
	if !strings.HasPrefix(msg, "acp-broker denied this: ") {
		d.t.Errorf("error message %q does not start with %q", msg, "acp-broker denied this: ")
	}
	return msg
}

// runAsEditor runs a terminal/create the way an editor does: the command
// with its args, or a whole command line through sh, in its cwd.
func runAsEditor(t testing.TB, line string) {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
			Cwd     string   `json:"cwd"`
			Env     []struct{ Name, Value string }
		} `json:"params"`
	}
	if json.Unmarshal([]byte(line), &m) != nil || m.Method != "terminal/create" {
		return
	}
	cmd := exec.Command(m.Params.Command, m.Params.Args...)
	if len(m.Params.Args) == 0 {
		cmd = exec.Command("sh", "-c", m.Params.Command)
	}
	cmd.Dir = m.Params.Cwd
	cmd.Env = os.Environ()
	for _, e := range m.Params.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	out, err := cmd.CombinedOutput()
	t.Logf("ran the forwarded terminal: %v %s", err, out)
}

// terminalReq builds a terminal/create for sess_1 with the given JSON
// members (command, args, cwd, env).
func terminalReq(id, members string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"terminal/create","params":{"sessionId":"sess_1",` + members + `}}`
}

func writeReq(id, path string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"fs/write_text_file","params":{"sessionId":"sess_1","path":"` + path + `","content":"x\n"}}`
}

// TestDefendOpaqueTerminals: a terminal whose command the broker cannot see
// through, and that no permission request covers, is refused with an error
// saying so, and never reaches the editor, whatever the disguise: a
// variable in command position, $(…), backticks, eval, sh -c "$x", xargs,
// an interpreter's inline code. Those that hide a denied rm or the broker's
// own CLI are refused the same way; the files the commands would create do
// not exist.
func TestDefendOpaqueTerminals(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: heldRules})
	keep := filepath.Join(d.cwd, "keep")
	if err := os.WriteFile(keep, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	pwned := func(name string) string { return filepath.Join(d.root, "pwned-"+name) }
	for i, c := range []struct {
		name, members, creates string
	}{
		{"variable_in_command_position_sh_-c", `"command":"sh","args":["-c","t=touch; $t $ROOT/pwned-var"],"cwd":"$CWD"`, "var"},
		{"variable_in_command_position_whole_line", `"command":"sh -c 't=touch; $t $ROOT/pwned-line'","cwd":"$CWD"`, "line"},
		{"broker_cli_behind_a_variable", `"command":"sh","args":["-c","b=acp-broker; $b trust ."],"cwd":"$CWD"`, ""},
		{"denied_rm_behind_a_variable", `"command":"sh -c 'r=rm; $r -rf $CWD/keep'","cwd":"$CWD"`, ""},
		{"command_substitution", `"command":"$(echo touch) $ROOT/pwned-subst","cwd":"$CWD"`, "subst"},
		{"backticks", "\"command\":\"`echo touch` $ROOT/pwned-bt\",\"cwd\":\"$CWD\"", "bt"},
		{"eval", `"command":"bash","args":["-c","eval \"touch $ROOT/pwned-eval\""],"cwd":"$CWD"`, "eval"},
		{"sh_-c_of_a_variable", `"command":"sh","args":["-c","$x"],"env":[{"name":"x","value":"touch $ROOT/pwned-env"}],"cwd":"$CWD"`, "env"},
		{"argv_bash_-lc", `"command":"/bin/bash","args":["-lc","x=touch; $x $ROOT/pwned-argv"]`, "argv"},
		{"xargs", `"command":"echo $ROOT/pwned-xargs | xargs touch","cwd":"$CWD"`, "xargs"},
		{"interpreter_inline_code", `"command":"python3","args":["-c","open('$ROOT/pwned-py','w')"],"cwd":"$CWD"`, "py"},
	} {
		ok := d.step(t, c.name, func() {
			msg := d.refusedUnrun(terminalReq(itoa(i+1), c.members))
			if msg != "" && !strings.Contains(msg, "cannot see") && !strings.Contains(msg, "no-rm") && !strings.Contains(msg, "acp-broker") {
				d.t.Errorf("error message %q does not say why", msg)
			}
			if c.creates != "" {
				if _, err := os.Stat(pwned(c.creates)); err == nil {
					d.t.Errorf("%s exists: the command ran", pwned(c.creates))
				}
			}
			if _, err := os.Stat(keep); err != nil {
				d.t.Errorf("the file rm would have removed is gone: %v", err)
			}
		})
		if !ok {
			return
		}
	}
	for _, line := range d.transcript().Editor {
		if strings.Contains(line, `"terminal/create"`) {
			t.Errorf("the editor saw a terminal/create: %s", clip(line))
		}
	}
	d.finish()
}

// TestDefendAskedThroughTheBroker: a plain terminal or write that no rule
// allows and no permission request covers is held and asked with the
// broker's own prompt; a reject gives the agent an error and nothing is
// forwarded, an allow forwards it unchanged. What a permission request the
// agent just had allowed covers (the same command in the same directory, or
// the same path, in the same session) goes straight through, once; what the
// rules allow goes straight through; what a permission request was rejected
// for is refused without asking.
func TestDefendAskedThroughTheBroker(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: heldRules})
	claudeBash := func(id, tc, command string) string {
		return permission(id, `{"toolCallId":"`+tc+`","title":"`+command+`","kind":"execute","rawInput":{"command":"`+command+`"}}`, claudeOptions)
	}
	claudeEdit := func(id, tc, path string) string {
		return permission(id, `{"toolCallId":"`+tc+`","title":"Edit","kind":"edit","rawInput":{"file_path":"`+path+`"},"locations":[{"path":"`+path+`"}]}`, claudeOptions)
	}
	steps := []struct {
		name string
		run  func()
	}{
		{"uncovered_terminal_rejected", func() {
			msg := d.heldAsked(d.t, terminalReq(`1`, `"command":"make","args":["clean"],"cwd":"$CWD"`), "make clean", "reject_once", "")
			if !strings.Contains(msg, "not allowed when the broker asked") {
				d.t.Errorf("error message %q", msg)
			}
		}},
		{"uncovered_terminal_allowed", func() {
			d.heldAsked(d.t, terminalReq(`2`, `"command":"make","args":["clean"],"cwd":"$CWD"`), "make clean", "allow_once", `{"jsonrpc":"2.0","id":2,"result":{"terminalId":"term_2"}}`)
		}},
		{"uncovered_write_rejected", func() {
			d.heldAsked(d.t, writeReq(`3`, "$CWD/CHANGELOG.md"), d.cwd+"/CHANGELOG.md", "reject_once", "")
		}},
		{"uncovered_write_allowed", func() {
			d.heldAsked(d.t, writeReq(`4`, "$CWD/CHANGELOG.md"), d.cwd+"/CHANGELOG.md", "allow_once", `{"jsonrpc":"2.0","id":4,"result":null}`)
		}},
		{"terminal_allowed_by_a_rule_goes_through", func() {
			d.forwardedAtOnce(terminalReq(`5`, `"command":"git","args":["status"],"cwd":"$CWD"`), `{"jsonrpc":"2.0","id":5,"result":{"terminalId":"term_5"}}`)
		}},
		{"write_allowed_by_a_rule_goes_through", func() {
			d.forwardedAtOnce(writeReq(`6`, "$CWD/src/app.go"), `{"jsonrpc":"2.0","id":6,"result":null}`)
		}},
		{"terminal_covered_by_the_editors_allow_goes_through", func() {
			d.asked(claudeBash(`7`, "toolu_7", "make deploy"), answer(`7`, "allow"))
			d.forwardedAtOnce(terminalReq(`8`, `"command":"make","args":["deploy"],"cwd":"$CWD"`), `{"jsonrpc":"2.0","id":8,"result":{"terminalId":"term_8"}}`)
		}},
		{"the_same_terminal_again_is_asked", func() {
			d.heldAsked(d.t, terminalReq(`9`, `"command":"make","args":["deploy"],"cwd":"$CWD"`), "make deploy", "reject_once", "")
		}},
		{"a_different_command_is_asked", func() {
			d.asked(claudeBash(`10`, "toolu_10", "make test"), answer(`10`, "allow"))
			d.heldAsked(d.t, terminalReq(`11`, `"command":"make","args":["deploy"],"cwd":"$CWD"`), "make deploy", "reject_once", "")
			// The approval for make test is still there, and covers it.
			d.forwardedAtOnce(terminalReq(`12`, `"command":"make test","cwd":"$CWD"`), `{"jsonrpc":"2.0","id":12,"result":{"terminalId":"term_12"}}`)
		}},
		{"the_same_command_in_another_directory_is_asked", func() {
			d.asked(claudeBash(`13`, "toolu_13", "make lint"), answer(`13`, "allow"))
			d.heldAsked(d.t, terminalReq(`14`, `"command":"make","args":["lint"],"cwd":"$LIB"`), "make lint", "reject_once", "")
		}},
		{"the_same_command_with_an_environment_is_asked", func() {
			d.asked(claudeBash(`15`, "toolu_15", "make check"), answer(`15`, "allow"))
			d.heldAsked(d.t, terminalReq(`16`, `"command":"make","args":["check"],"cwd":"$CWD","env":[{"name":"CGO_ENABLED","value":"0"}]`), "make check", "reject_once", "")
		}},
		{"an_environment_that_runs_code_is_refused", func() {
			msg := d.refusedUnrun(terminalReq(`33`, `"command":"git","args":["status"],"cwd":"$CWD","env":[{"name":"LD_PRELOAD","value":"$ROOT/evil.so"}]`))
			if !strings.Contains(msg, "assigns LD_PRELOAD") {
				d.t.Errorf("error message %q does not name the variable", msg)
			}
		}},
		{"a_command_line_that_differs_in_quoting_is_asked", func() {
			d.asked(claudeBash(`17`, "toolu_17", "make bench"), answer(`17`, "allow"))
			d.heldAsked(d.t, terminalReq(`18`, `"command":"make 'bench' && make install","cwd":"$CWD"`), "make bench", "reject_once", "")
		}},
		{"write_covered_by_the_editors_allow_goes_through_once", func() {
			d.asked(claudeEdit(`19`, "toolu_19", "$CWD/NOTES.md"), answer(`19`, "allow"))
			d.forwardedAtOnce(writeReq(`20`, "$CWD/NOTES.md"), `{"jsonrpc":"2.0","id":20,"result":null}`)
			d.heldAsked(d.t, writeReq(`21`, "$CWD/NOTES.md"), d.cwd+"/NOTES.md", "reject_once", "")
		}},
		{"an_edit_allowed_for_one_path_does_not_cover_another", func() {
			d.asked(claudeEdit(`22`, "toolu_22", "$CWD/a.md"), answer(`22`, "allow"))
			d.heldAsked(d.t, writeReq(`23`, "$CWD/b.md"), d.cwd+"/b.md", "reject_once", "")
		}},
		{"a_command_allowed_does_not_cover_a_write", func() {
			d.asked(claudeBash(`24`, "toolu_24", "make docs > docs.txt"), answer(`24`, "allow"))
			d.heldAsked(d.t, writeReq(`25`, "$CWD/docs.txt"), d.cwd+"/docs.txt", "reject_once", "")
		}},
		{"rejected_when_asked_is_refused_without_asking", func() {
			d.asked(claudeEdit(`26`, "toolu_26", "$CWD/LICENSE"), answer(`26`, "reject"))
			msg := d.refused(writeReq(`27`, "$CWD/LICENSE"))
			if !strings.Contains(msg, "rejected when the agent asked") {
				d.t.Errorf("error message %q", msg)
			}
		}},
		{"codex_argv_covers_the_same_argv", func() {
			d.asked(permission(`28`, `{"toolCallId":"call_28","title":"make all","kind":"execute","rawInput":{"command":["/bin/bash","-lc","make all"],"cwd":"$CWD"}}`, codexOptions), answer(`28`, "approved"))
			d.forwardedAtOnce(terminalReq(`29`, `"command":"/bin/bash","args":["-lc","make all"],"cwd":"$CWD"`), `{"jsonrpc":"2.0","id":29,"result":{"terminalId":"term_29"}}`)
		}},
		{"another_sessions_approval_covers_nothing", func() {
			d.EditorToAgent(d.expand(`{"jsonrpc":"2.0","id":"new-2","method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
			d.AgentToEditor(`{"jsonrpc":"2.0","id":"new-2","result":{"sessionId":"sess_2"}}`)
			d.asked(claudeEdit(`30`, "toolu_30", "$CWD/shared.md"), answer(`30`, "allow"))
			req := d.expand(`{"jsonrpc":"2.0","id":31,"method":"fs/write_text_file","params":{"sessionId":"sess_2","path":"$CWD/shared.md","content":"x"}}`)
			d.AgentSend(req)
			if update := d.EditorRecv(); !strings.Contains(update, `"sessionUpdate":"tool_call"`) || !strings.Contains(update, `"sessionId":"sess_2"`) {
				d.t.Fatalf("want the broker's tool_call for sess_2, got %s", clip(update))
			}
			own := decode(d.t, d.EditorRecv())
			if own.Method != "session/request_permission" || !strings.HasPrefix(strings.Trim(string(own.ID), `"`), "acp-broker-") {
				d.t.Fatalf("want the broker's own permission request, got %+v", own)
			}
			d.EditorSend(`{"jsonrpc":"2.0","id":` + string(own.ID) + `,"result":{"outcome":{"outcome":"selected","optionId":"reject_once"}}}`)
			if final := d.EditorRecv(); !strings.Contains(final, `"tool_call_update"`) {
				d.t.Fatalf("the held request's view was not closed: %s", clip(final))
			}
			expectError(d.t, d.AgentRecv(), "31", -32000)
			// sess_1's approval is still there.
			d.forwardedAtOnce(writeReq(`32`, "$CWD/shared.md"), `{"jsonrpc":"2.0","id":32,"result":null}`)
		}},
	}
	for _, s := range steps {
		if !d.step(t, s.name, s.run) {
			return
		}
	}
	for _, line := range d.transcript().Agent {
		if strings.Contains(line, `"id":"acp-broker-`) {
			t.Errorf("the agent saw the broker's own exchange: %s", clip(line))
		}
	}
	d.finish()
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestCancelEndsHeldTerminalAndWrite: a terminal or a write the broker holds
// while it asks with its own prompt is not forwarded once the editor has
// cancelled the session's turn, whatever the editor answers the prompt
// after: the agent gets an error, and the request never reaches the editor.
func TestCancelEndsHeldTerminalAndWrite(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: heldRules})
	for i, c := range []struct{ name, req, shows string }{
		{"terminal", terminalReq("1", `"command":"make","args":["deploy"],"cwd":"$CWD"`), "make deploy"},
		{"write", writeReq("2", "$CWD/notes.txt"), "notes.txt"},
	} {
		ok := d.step(t, c.name, func() {
			req := d.expand(c.req)
			d.AgentSend(req)
			if update := d.EditorRecv(); !strings.Contains(update, `"sessionUpdate":"tool_call"`) || !strings.Contains(update, c.shows) {
				d.t.Fatalf("want the held request's tool_call, got %s", clip(update))
			}
			own := decode(d.t, d.EditorRecv())
			if !strings.HasPrefix(string(own.ID), `"acp-broker-`) {
				d.t.Fatalf("want the broker's own prompt, got %s", own.ID)
			}
			d.EditorToAgent(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess_1"}}`)
			d.EditorSend(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"allow_once"}}}`, own.ID))
			msg := expectError(d.t, d.AgentRecv(), itoa(i+1), -32000)
			if !strings.Contains(msg, "not allowed") {
				d.t.Errorf("the agent was told %q", msg)
			}
			// The editor sees the prompt withdrawn and the held request
			// ended, and never the request itself.
			for line := d.EditorRecv(); !strings.Contains(line, `"status":"failed"`); line = d.EditorRecv() {
				if !strings.Contains(line, `"$/cancel_request"`) {
					d.t.Fatalf("editor got %s", clip(line))
				}
			}
			mark := d.marker()
			d.AgentSend(mark)
			d.EditorExpect(mark)
		})
		if !ok {
			return
		}
	}
	d.finish()
}
