//go:build linux

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// channelBroker starts a broker whose config routes asks as cfg says, with
// its own state directory, and opens session s1 in a fresh project.
func channelBroker(t *testing.T, cfg string, env ...string) (*session, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "ask.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(filepath.Join(dir, "run"), 0o700); err != nil {
		t.Fatal(err)
	}
	s := startFake(t, options{broker: true, brokerArgs: []string{"--log-level", "warn", "--config", path, "--audit", filepath.Join(dir, "audit.jsonl")},
		env: append([]string{"XDG_STATE_HOME=" + state, "XDG_RUNTIME_DIR=" + filepath.Join(dir, "run")}, env...)})
	project := t.TempDir()
	s.EditorToAgent(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, project))
	s.AgentToEditor(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`)
	return s, dir
}

// execChannel writes a channel script that saves the prompt it gets and its
// pid in dir, then does what body says.
func execChannel(t *testing.T, dir, body string) string {
	t.Helper()
	script := filepath.Join(dir, "channel.sh")
	src := "#!/bin/sh\necho $$ > " + filepath.Join(dir, "pid") + ".tmp && mv " + filepath.Join(dir, "pid") + ".tmp " + filepath.Join(dir, "pid") + "\ncat > " + filepath.Join(dir, "prompt.json") + "\n" + body + "\n"
	if err := os.WriteFile(script, []byte(src), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

// waitFile waits for a file to exist and returns its content.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return string(b)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
	return ""
}

// waitGone waits for a process to be gone.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(b), ") Z ") {
			return // a zombie waiting to be reaped is gone for our purpose
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("process %d is still running", pid)
}

func channelCfg(route, extra, script string) string {
	return fmt.Sprintf("[ask]\nroute = %q\n%s\n[[channel]]\nname = \"script\"\ntype = \"exec\"\ncommand = [%q]\n", route, extra, script)
}

const allowOnce = `{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}`

func TestChannelAnswersWhenRoutedThere(t *testing.T) {
	dir := t.TempDir()
	script := execChannel(t, dir, `echo '{"decision":"allow_once"}'`)
	s, brokerDir := channelBroker(t, channelCfg("channels", "", script))
	s.AgentSend(testPermission(2, "make build"))
	s.AgentExpect(allowOnce)
	s.AgentToEditor(`{"jsonrpc":"2.0","method":"_test/marker"}`) // the editor never saw the request
	var prompt struct {
		Version  int
		ID       string
		Commands []string
		Digest   string
		Options  []struct{ ID, Kind string }
	}
	if err := json.Unmarshal([]byte(waitFile(t, filepath.Join(dir, "prompt.json"))), &prompt); err != nil {
		t.Fatal(err)
	}
	if prompt.Version != 1 || prompt.Digest == "" || len(prompt.Commands) != 1 || prompt.Commands[0] != "make build" || len(prompt.Options) != 3 {
		t.Fatalf("prompt = %+v", prompt)
	}
	s.Finish()
	audit := waitFile(t, filepath.Join(brokerDir, "audit.jsonl"))
	if !strings.Contains(audit, `"source":"channel"`) || !strings.Contains(audit, `"channel":"script"`) || !strings.Contains(audit, `"option":"allow-once"`) {
		t.Fatalf("audit = %s", audit)
	}
}

func TestEditorWinsAndTheChannelIsWithdrawn(t *testing.T) {
	dir := t.TempDir()
	script := execChannel(t, dir, "sleep 300")
	s, _ := channelBroker(t, channelCfg("both", "", script))
	req := testPermission(2, "make build")
	s.AgentToEditor(req)
	pid, _ := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(dir, "pid"))))
	s.EditorToAgent(allowOnce)
	waitGone(t, pid) // the hanging channel command was killed
	s.AgentToEditor(`{"jsonrpc":"2.0","method":"_test/marker"}`)
	s.Finish()
}

func TestEscalationAndTimeout(t *testing.T) {
	dir := t.TempDir()
	script := execChannel(t, dir, `echo '{"decision":"reject_once"}'`)
	s, _ := channelBroker(t, channelCfg("editor", "escalate_after = \"300ms\"", script))
	s.AgentToEditor(testPermission(2, "make build"))
	// Nobody answers in the editor: after 300ms the channel is asked, it
	// rejects, and the editor's prompt is withdrawn.
	s.AgentExpect(`{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`)
	s.EditorExpect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":2}}`)
	// The editor's late answer is discarded.
	s.EditorSend(allowOnce)
	s.AgentToEditor(`{"jsonrpc":"2.0","method":"_test/marker"}`)
	s.Finish()

	timeout, _ := channelBroker(t, "[ask]\ntimeout = \"300ms\"\n")
	timeout.AgentToEditor(testPermission(2, "make build"))
	timeout.AgentExpect(`{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`)
	timeout.EditorTold("denied")
	timeout.EditorExpect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":2}}`)
	timeout.Finish()
}

func TestSessionCancelWithdrawsEverywhere(t *testing.T) {
	dir := t.TempDir()
	script := execChannel(t, dir, "sleep 300")
	s, _ := channelBroker(t, channelCfg("both", "", script))
	s.AgentToEditor(testPermission(2, "make build"))
	pid, _ := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(dir, "pid"))))
	cancel := `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`
	s.EditorToAgent(cancel)
	s.AgentExpect(`{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"cancelled"}}}`)
	waitGone(t, pid)
	// The editor's own cancelled answer, which ACP requires, is dropped.
	s.EditorSend(`{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"cancelled"}}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","method":"_test/marker"}`)
	s.Finish()
}

func TestGarbageFromAChannelIsNoAnswer(t *testing.T) {
	dir := t.TempDir()
	script := execChannel(t, dir, `echo 'allow please'`)
	s, _ := channelBroker(t, channelCfg("both", "", script))
	s.AgentToEditor(testPermission(2, "make build"))
	waitFile(t, filepath.Join(dir, "prompt.json"))
	reject := `{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`
	s.EditorToAgent(reject)
	s.Finish()
}

func TestAlwaysFromAChannelIsRemembered(t *testing.T) {
	dir := t.TempDir()
	script := execChannel(t, dir, `echo '{"decision":"allow_always"}'`)
	s, brokerDir := channelBroker(t, channelCfg("channels", "", script))
	s.AgentSend(testPermission(2, "make build"))
	s.AgentExpect(`{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}`)
	s.AgentSend(testPermission(3, "make build"))
	s.AgentExpect(`{"jsonrpc":"2.0","id":3,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}`)
	s.AgentToEditor(`{"jsonrpc":"2.0","method":"_test/marker"}`)
	s.Finish()
	audit := waitFile(t, filepath.Join(brokerDir, "audit.jsonl"))
	if !strings.Contains(audit, `"remembered":"r`) || !strings.Contains(audit, `"source":"remembered"`) {
		t.Fatalf("audit = %s", audit)
	}
	// The channel's always was sent to the agent as its once-option.
	if !strings.Contains(audit, `"option":"allow-once","option_kind":"allow_once","chosen":"allow-always","chosen_kind":"allow_always"`) {
		t.Fatalf("the audit line does not say the channel chose allow-always and the agent was sent allow-once: %s", audit)
	}
}

func TestAnswerFromAnotherTerminal(t *testing.T) {
	s, dir := channelBroker(t, "")
	s.AgentToEditor(testPermission(2, "make build"))
	env := append(testEnv(), "XDG_RUNTIME_DIR="+filepath.Join(dir, "run"))
	var id string
	deadline := time.Now().Add(waitTimeout)
	for id == "" && time.Now().Before(deadline) {
		cmd := exec.Command(brokerBin, "pending")
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("pending: %v\n%s", err, out)
		}
		for _, line := range strings.Split(string(out), "\n")[1:] {
			if strings.Contains(line, "make build") {
				id = strings.Fields(line)[0]
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if id == "" {
		t.Fatal("acp-broker pending never listed the request")
	}
	cmd := exec.Command(brokerBin, "answer", id, "allow")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "answered "+id) {
		t.Fatalf("answer: %v\n%s", err, out)
	}
	s.AgentExpect(allowOnce)
	s.EditorExpect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":2}}`)
	// A second answer is refused.
	cmd = exec.Command(brokerBin, "answer", id, "reject")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("a second answer was accepted: %s", out)
	}
	s.Finish()
}

// TestEditorAndChannelAtTheSameInstant: the editor and a channel answer each
// request at once; the agent gets exactly one answer per request, and the
// loser's answer is discarded. Run under -race, 20 times in one broker.
func TestEditorAndChannelAtTheSameInstant(t *testing.T) {
	dir := t.TempDir()
	script := execChannel(t, dir, `echo '{"decision":"allow_once"}'`)
	s, _ := channelBroker(t, channelCfg("both", "", script))
	const n = 20
	for i := range n {
		id := 10 + i
		req := testPermission(id, "make build")
		s.AgentSend(req)
		// The editor is sent the request before the channel is asked; it
		// answers at once, racing the channel. Withdrawals of earlier
		// requests the channel won may come first.
		for line := s.EditorRecv(); line != req; line = s.EditorRecv() {
			if !strings.Contains(line, `"$/cancel_request"`) {
				t.Fatalf("editor got %s", line)
			}
		}
		s.EditorSend(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`, id))
		got := s.AgentRecv()
		if !strings.Contains(got, fmt.Sprintf(`"id":%d,`, id)) {
			t.Fatalf("request %d: agent got %s", id, got)
		}
	}
	// Nothing more reached the agent: the next line it reads is this one.
	s.EditorSend(`{"jsonrpc":"2.0","method":"_test/marker"}`)
	s.AgentExpect(`{"jsonrpc":"2.0","method":"_test/marker"}`)
	s.Finish()
}

// TestEditorIsAskedWhenEveryChannelFails: routed to channels only, a request
// whose channels all fail still reaches a human, in the editor.
func TestEditorIsAskedWhenEveryChannelFails(t *testing.T) {
	dir := t.TempDir()
	script := execChannel(t, dir, "exit 3")
	s, _ := channelBroker(t, channelCfg("channels", "", script))
	req := testPermission(2, "make build")
	s.AgentToEditor(req)
	s.EditorToAgent(allowOnce)
	s.Finish()
}

// TestChannelAllowCoversTheTerminal: a permission request a channel allowed
// covers the terminal/create of the same command that follows it, once, as
// an editor's allow does; the one after is asked by the broker.
func TestChannelAllowCoversTheTerminal(t *testing.T) {
	dir := t.TempDir()
	script := execChannel(t, dir, `echo '{"decision":"allow_once"}'`)
	s, _ := channelBroker(t, channelCfg("channels", "", script))
	s.AgentSend(testPermission(2, "make build"))
	s.AgentExpect(allowOnce)
	terminal := `{"jsonrpc":"2.0","id":3,"method":"terminal/create","params":{"sessionId":"s1","command":"make","args":["build"]}}`
	s.AgentToEditor(terminal)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":3,"result":{"terminalId":"t"}}`)
	// The same terminal again: not covered, so the broker asks, here on the
	// channel, which allows it; only then does the editor get it.
	s.AgentSend(strings.Replace(terminal, `"id":3`, `"id":4`, 1))
	if got := s.EditorRecv(); !strings.Contains(got, `"sessionUpdate":"tool_call"`) || !strings.Contains(got, "acp-broker-terminal-") {
		t.Fatalf("want the broker's own tool call for the second terminal, got %s", clip(got))
	}
	if got := s.EditorRecv(); !strings.Contains(got, `"tool_call_update"`) || !strings.Contains(got, `"completed"`) {
		t.Fatalf("want the held terminal's view closed as allowed, got %s", clip(got))
	}
	s.EditorExpect(strings.Replace(terminal, `"id":3`, `"id":4`, 1))
	s.EditorToAgent(`{"jsonrpc":"2.0","id":4,"result":{"terminalId":"t2"}}`)
	s.Finish()
}
