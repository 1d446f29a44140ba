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

// rememberSession starts a broker in front of the fake agent with its own
// state directory and opens a session in project.
func rememberSession(t *testing.T, state, project string, extra ...string) *session {
	t.Helper()
	s := startFake(t, options{broker: true, brokerArgs: append([]string{"--log-level", "warn", "--audit", "off"}, extra...),
		env: []string{"XDG_STATE_HOME=" + state}})
	newSession := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, project)
	s.EditorToAgent(newSession)
	s.AgentToEditor(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`)
	return s
}

// onceAnswer is what the agent gets for request 2 when the human answers
// it allow-always: its allow-once (the broker remembers the always).
const onceAnswer = `{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}`

func testPermission(id int, command string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"t%d","kind":"execute","title":%q,"rawInput":{"command":%q}},"options":[{"optionId":"allow-once","name":"Allow","kind":"allow_once"},{"optionId":"allow-always","name":"Always allow","kind":"allow_always"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}}`, id, id, command, command)
}

// brokerCLI runs an acp-broker subcommand with the test's environment.
func brokerCLI(t *testing.T, state string, args ...string) string {
	t.Helper()
	cmd := exec.Command(brokerBin, args...)
	cmd.Env = append(testEnv(), "XDG_STATE_HOME="+state)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("acp-broker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	afterChange() // a revoke reaches the running brokers
	return string(out)
}

// TestAlwaysIsRememberedAcrossBrokers: the editor answers "always" once; the
// same kind of request, in a new broker process for the same project, is
// then answered by the broker and never reaches the editor; after
// `remembered revoke`, it reaches the editor again.
func TestAlwaysIsRememberedAcrossBrokers(t *testing.T) {
	state := t.TempDir()
	project := t.TempDir()

	first := rememberSession(t, state, project)
	ask := testPermission(2, "npm run test -- --watch")
	first.AgentToEditor(ask)
	always := `{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"selected","optionId":"allow-always"}}}`
	first.EditorSend(always)
	// The agent is answered for this request only: the broker remembers.
	first.AgentExpect(onceAnswer)
	first.Finish()

	second := rememberSession(t, state, project)
	second.AgentSend(testPermission(3, "npm run test -- --coverage"))
	second.AgentExpect(`{"jsonrpc":"2.0","id":3,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}`)
	// The editor never saw it: the next thing it gets is this marker.
	marker := `{"jsonrpc":"2.0","method":"_test/marker"}`
	second.AgentToEditor(marker)
	// A different command, and the same one in another project, still ask.
	second.AgentToEditor(testPermission(4, "npm run build"))
	second.Finish()
	elsewhere := rememberSession(t, state, t.TempDir())
	elsewhere.AgentToEditor(testPermission(5, "npm run test -- --coverage"))
	elsewhere.Finish()

	var entries []struct {
		ID, Decision, Command, Scope, Project, Agent, Request string
	}
	if err := json.Unmarshal([]byte(brokerCLI(t, state, "remembered", "list", "--json")), &entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Command != "npm run test *" || entries[0].Decision != "allow" || entries[0].Scope != "project" ||
		entries[0].Project != project || entries[0].Agent != "fakeagent" || entries[0].Request != "npm run test -- --watch" {
		t.Fatalf("remembered = %+v", entries)
	}
	if out := brokerCLI(t, state, "remembered", "revoke", entries[0].ID); out != "revoked 1\n" {
		t.Fatalf("revoke: %q", out)
	}

	third := rememberSession(t, state, project)
	third.AgentToEditor(testPermission(6, "npm run test -- --coverage"))
	third.Finish()
}

// TestRememberedAllowDoesNotOverrideWrittenRules: an "always" answer never
// beats a project's ask rule or a user's deny rule.
func TestRememberedAllowDoesNotOverrideWrittenRules(t *testing.T) {
	state := t.TempDir()
	project := t.TempDir()
	if err := os.WriteFile(filepath.Join(project, ".acp-broker.toml"), []byte("[[rule]]\ndecision = \"ask\"\ncommand = \"make deploy *\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	deny := filepath.Join(t.TempDir(), "deny.toml")
	if err := os.WriteFile(deny, []byte("[[rule]]\ndecision = \"deny\"\ncommand = \"git push --force *\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	first := rememberSession(t, state, project, "--config", deny)
	first.AgentToEditor(testPermission(2, "make deploy prod"))
	first.EditorSend(`{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"selected","optionId":"allow-always"}}}`)
	first.AgentExpect(onceAnswer)
	first.AgentToEditor(testPermission(3, "git push origin main"))
	first.EditorSend(`{"jsonrpc":"2.0","id":3,"result":{"outcome":{"outcome":"selected","optionId":"allow-always"}}}`)
	first.AgentExpect(`{"jsonrpc":"2.0","id":3,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}`)
	// Remembered "make deploy *" stands below the project's ask: still asked.
	first.AgentToEditor(testPermission(4, "make deploy staging"))
	first.EditorToAgent(`{"jsonrpc":"2.0","id":4,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`)
	// Remembered "git push *" stands below the written deny.
	first.AgentSend(testPermission(5, "git push --force origin main"))
	first.AgentExpect(`{"jsonrpc":"2.0","id":5,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`)
	first.EditorTold("denied")
	// And applies where nothing written speaks.
	first.AgentSend(testPermission(6, "git push origin feature"))
	first.AgentExpect(`{"jsonrpc":"2.0","id":6,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}`)
	first.AgentToEditor(`{"jsonrpc":"2.0","method":"_test/marker"}`)
	first.Finish()
}

// TestTwentyBrokersRememberAtOnce: 20 brokers for the same project each
// learn a different "always" answer (an exact command: toolN has no
// subcommands the broker knows) at the same moment. All 20 entries are
// in the store afterwards, and every broker applies the other 19.
func TestTwentyBrokersRememberAtOnce(t *testing.T) {
	const n = 20
	state := t.TempDir()
	project := t.TempDir()
	sessions := make([]*session, n)
	for i := range sessions {
		sessions[i] = rememberSession(t, state, project)
		sessions[i].AgentToEditor(testPermission(2, fmt.Sprintf("tool%d run first", i)))
	}
	// Every editor answers before any answer is awaited, so the brokers
	// remember concurrently.
	always := `{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"selected","optionId":"allow-always"}}}`
	for _, s := range sessions {
		s.EditorSend(always)
	}
	for _, s := range sessions {
		s.AgentExpect(onceAnswer)
	}
	for _, s := range sessions {
		for j := range n {
			id := 10 + j
			s.AgentSend(testPermission(id, fmt.Sprintf("tool%d run first", j)))
			s.AgentExpect(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}`, id))
		}
		s.AgentToEditor(`{"jsonrpc":"2.0","method":"_test/marker"}`)
	}
	for _, s := range sessions {
		s.Finish()
	}
	var entries []json.RawMessage
	if err := json.Unmarshal([]byte(brokerCLI(t, state, "remembered", "list", "--json")), &entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) != n {
		t.Fatalf("%d entries remembered, want %d", len(entries), n)
	}
}

// TestRevokeReachesARunningBroker: a broker that applied a remembered
// answer stops applying it at its next request once the entry is revoked.
func TestRevokeReachesARunningBroker(t *testing.T) {
	state := t.TempDir()
	project := t.TempDir()
	s := rememberSession(t, state, project)
	s.AgentToEditor(testPermission(2, "cargo test --release"))
	s.EditorSend(`{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"selected","optionId":"allow-always"}}}`)
	s.AgentExpect(onceAnswer)
	s.AgentSend(testPermission(3, "cargo test --doc"))
	s.AgentExpect(`{"jsonrpc":"2.0","id":3,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}`)

	var entries []struct{ ID string }
	if err := json.Unmarshal([]byte(brokerCLI(t, state, "remembered", "list", "--json")), &entries); err != nil || len(entries) != 1 {
		t.Fatalf("entries = %v, %v", entries, err)
	}
	brokerCLI(t, state, "remembered", "revoke", entries[0].ID)
	s.AgentToEditor(testPermission(4, "cargo test --doc"))
	s.Finish()
}
