//go:build linux

package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Editors that approve on their own (avante.nvim's default
// auto_approve_tool_permissions = true) answer every request the broker
// forwards with no human: the broker warns, once per session, when the
// editor answers faster than a person can (under 100 ms), naming the editor
// from initialize's clientInfo. The warning never changes the answer.

const quickWarning = "the editor answers permission requests faster than a person can"

// avanteInitialize is the initialize avante.nvim sends
// (lua/avante/libs/acp_client.lua): no clientInfo.
const avanteInitialize = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true}}}`

// quickEditorSession starts a broker with no rules (every command is asked),
// sends initialize, and opens the sessions named.
func quickEditorSession(t *testing.T, initialize string, sessions ...string) (*session, string) {
	t.Helper()
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	s := startFake(t, options{broker: true, brokerArgs: []string{"--log-level", "warn", "--audit", audit},
		env: []string{"XDG_STATE_HOME=" + t.TempDir()}})
	s.EditorToAgent(initialize)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}`)
	project := t.TempDir()
	for i, id := range sessions {
		s.EditorToAgent(fmt.Sprintf(`{"jsonrpc":"2.0","id":"new-%d","method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, i, project))
		s.AgentToEditor(fmt.Sprintf(`{"jsonrpc":"2.0","id":"new-%d","result":{"sessionId":%q}}`, i, id))
	}
	return s, audit
}

// askedCommand is a permission request for a command no rule speaks for,
// which the broker forwards, with claude-agent-acp 0.101's options.
func askedCommand(id int, sessionID string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/request_permission","params":{"sessionId":%q,"toolCall":{"toolCallId":"toolu_q%d","name":"Bash","status":"pending","rawInput":{"command":"make deploy"},"title":"make deploy","kind":"execute"},"options":[{"optionId":"allow-once","name":"Yes","kind":"allow_once"},{"optionId":"reject","name":"No","kind":"reject_once"}]}}`, id, sessionID, id)
}

func TestEditorAnsweringFasterThanAPersonIsWarnedOncePerSession(t *testing.T) {
	t.Parallel()
	s, audit := quickEditorSession(t, withClientInfo(`{"name":"zed","title":"Zed","version":"0.201.3"}`), "s1", "s2")
	// Each answer reaches the agent exactly as the editor sent it: the
	// warning changes nothing.
	id := 0
	ask := func(sess string) {
		id++
		s.AgentToEditor(askedCommand(id, sess))
		option := "allow-once"
		if id%2 == 0 {
			option = "reject"
		}
		s.EditorToAgent(selected(fmt.Sprint(id), option))
	}
	// The test answers as fast as it can, which a loaded machine can slow
	// past 100 ms: each session is asked until its warning is in the audit
	// log (written before the answer reaches the agent), then asked again.
	for _, sess := range []string{"s1", "s2"} {
		for tries := 0; !warnedIn(t, audit, sess); tries++ {
			if tries == 50 {
				t.Fatalf("no warning in session %s after %d answers", sess, tries)
			}
			ask(sess)
		}
	}
	ask("s1")
	ask("s2")
	ask("s1")
	s.Finish()

	stderr := s.stderrAll()
	if n := strings.Count(stderr, quickWarning); n != 2 {
		t.Fatalf("want one warning for each of the two sessions, got %d:\n%s", n, stderr)
	}
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, quickWarning) && !strings.Contains(line, `Zed (zed) 0.201.3`) {
			t.Errorf("the warning does not name the editor: %s", line)
		}
	}
	warned := map[string]int{}
	for _, r := range readAudit(t, audit) {
		if r.Decision == "warning" {
			if r.Source != "editor" || r.Method != "editor/answers" || !strings.Contains(r.Reason, `the editor "Zed (zed) 0.201.3" answered`) || !strings.Contains(r.Reason, "auto_approve_tool_permissions") {
				t.Errorf("audit warning = %+v", r)
			}
			warned[r.Session]++
		}
	}
	if warned["s1"] != 1 || warned["s2"] != 1 || len(warned) != 2 {
		t.Fatalf("audit warnings per session = %v, want one each for s1 and s2", warned)
	}
}

// warnedIn reports whether the audit log has a quick-editor warning for sess.
func warnedIn(t *testing.T, audit, sess string) bool {
	t.Helper()
	for _, r := range readAudit(t, audit) {
		if r.Decision == "warning" && r.Session == sess {
			return true
		}
	}
	return false
}

func TestEditorAnsweringAsAPersonDoesIsNotWarnedAbout(t *testing.T) {
	t.Parallel()
	s, audit := quickEditorSession(t, withClientInfo(`{"name":"zed","title":"Zed","version":"0.201.3"}`), "s1")
	for id := 1; id <= 2; id++ {
		s.AgentToEditor(askedCommand(id, "s1"))
		time.Sleep(150 * time.Millisecond) // a person reading the prompt
		s.EditorToAgent(selected(fmt.Sprint(id), "reject"))
	}
	// An error or a cancelled answer is no approval, however fast.
	s.AgentToEditor(askedCommand(3, "s1"))
	s.EditorToAgent(`{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"no UI"}}`)
	s.AgentToEditor(askedCommand(4, "s1"))
	s.EditorToAgent(`{"jsonrpc":"2.0","id":4,"result":{"outcome":{"outcome":"cancelled"}}}`)
	s.Finish()
	if stderr := s.stderrAll(); strings.Contains(stderr, quickWarning) {
		t.Fatalf("a slow editor was warned about:\n%s", stderr)
	}
	for _, r := range readAudit(t, audit) {
		if r.Decision == "warning" {
			t.Fatalf("a slow editor was warned about in the audit log: %+v", r)
		}
	}
}

// withClientInfo is an editor's initialize with this clientInfo.
func withClientInfo(clientInfo string) string {
	return `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true},"clientInfo":` + clientInfo + `}}`
}

// TestEditorWithoutClientInfoIsWarnedAboutUnnamed: avante.nvim, which
// approves on its own by default, sends no clientInfo: the warning says so.
func TestEditorWithoutClientInfoIsWarnedAboutUnnamed(t *testing.T) {
	t.Parallel()
	s, audit := quickEditorSession(t, avanteInitialize, "s1")
	// Asked until the answer was quick enough (see the test above).
	for id := 1; !warnedIn(t, audit, "s1"); id++ {
		if id > 50 {
			t.Fatalf("no warning after %d answers", id-1)
		}
		s.AgentToEditor(askedCommand(id, "s1"))
		s.EditorToAgent(selected(fmt.Sprint(id), "allow-once"))
	}
	s.Finish()
	stderr := s.stderrAll()
	if n := strings.Count(stderr, quickWarning); n != 1 || !strings.Contains(stderr, "no clientInfo") {
		t.Fatalf("want one warning saying the editor sent no clientInfo, got %d:\n%s", n, stderr)
	}
}
