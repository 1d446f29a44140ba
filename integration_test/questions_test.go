//go:build linux

package integration

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/acp-broker/acp-broker/integration_test/internal/anthropicapi"
)

// The agent's questions (elicitation/create): only a human answers them,
// wherever approvals are asked.

const (
	// deploySchema is the seed example: a deploy target (an enum with
	// oneOf titles) and an optional free-text "anything else?".
	deploySchema = `{"type":"object","properties":{"target":{"type":"string","title":"Deploy target","oneOf":[{"const":"staging","title":"Staging"},{"const":"production","title":"Production"}]},"notes":{"type":"string","title":"Anything else?"}},"required":["target"]}`
	// richSchema has every field type ACP defines: a string with a length,
	// an enum with oneOf titles, a multi-select with item counts, a
	// number with bounds, a boolean; required and optional fields.
	richSchema = `{"type":"object","title":"Release","properties":{` +
		`"name":{"type":"string","minLength":2,"maxLength":20},` +
		`"channel":{"type":"string","oneOf":[{"const":"beta","title":"Beta"},{"const":"stable","title":"Stable"}]},` +
		`"platforms":{"type":"array","minItems":1,"maxItems":2,"items":{"type":"string","enum":["linux","mac","windows"]}},` +
		`"replicas":{"type":"number","minimum":1,"maximum":10},` +
		`"notify":{"type":"boolean","default":true}},` +
		`"required":["name","channel","platforms"]}`
	msgMarker = `{"jsonrpc":"2.0","method":"_test/marker"}`
)

func formQuestion(id, sessionID, message, schema string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"elicitation/create","params":{"sessionId":%q,"mode":"form","message":%q,"requestedSchema":%s}}`, id, sessionID, message, schema)
}

func urlQuestion(id, sessionID, url, elicitationID string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"elicitation/create","params":{"sessionId":%q,"mode":"url","message":"Sign in to the deploy service","url":%q,"elicitationId":%q}}`, id, sessionID, url, elicitationID)
}

// questionBroker starts a broker with the config cfg (and extra flags),
// its own state, runtime directory and audit log, and returns it with
// that directory. Nothing is sent yet.
func questionBroker(t *testing.T, cfg string, args ...string) (*session, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "run"), 0o700); err != nil {
		t.Fatal(err)
	}
	brokerArgs := append([]string{"--log-level", "warn", "--config", path, "--audit", filepath.Join(dir, "audit.jsonl")}, args...)
	s := startFake(t, options{broker: true, brokerArgs: brokerArgs,
		env: []string{"XDG_STATE_HOME=" + filepath.Join(dir, "state"), "XDG_RUNTIME_DIR=" + filepath.Join(dir, "run")}})
	return s, dir
}

// initSubagents has the editor initialize with subagents, so that the
// agent's announcements of its subagents' sessions count.
func initSubagents(t *testing.T, s *session) {
	t.Helper()
	s.EditorToAgent(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":` + subagentsInit + `}`)
	s.AgentToEditor(msgInitialized)
}

// openSession opens session id in a fresh project.
func openSession(t *testing.T, s *session, id string) string {
	t.Helper()
	project := t.TempDir()
	s.EditorToAgent(fmt.Sprintf(`{"jsonrpc":"2.0","id":"new-%s","method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, id, project))
	s.AgentToEditor(fmt.Sprintf(`{"jsonrpc":"2.0","id":"new-%s","result":{"sessionId":%q}}`, id, id))
	return project
}

// questionAudit is what the audit log says of questions.
type questionAudit struct {
	Method, Session, Mode, Decision, Source, Channel, Reason string
	Fields                                                   []string
	Refused                                                  []string
}

// questionLines returns the audit lines of questions, in order.
func questionLines(t *testing.T, dir string) []questionAudit {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []questionAudit
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r questionAudit
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("audit line: %v: %s", err, sc.Text())
		}
		if r.Method == "elicitation/create" {
			out = append(out, r)
		}
	}
	return out
}

// agentGotNothingMore shows that the agent has read nothing since its last
// expected line: the editor's marker is the next thing it reads.
func agentGotNothingMore(s *session) {
	s.EditorToAgent(msgMarker)
}

// TestQuestionAnsweredInTheEditor: on the editor route, a question reaches
// the editor as sent and the editor's answer reaches the agent exactly once,
// as sent. Its audit line names the mode, the action, who answered and the
// fields, never their values.
func TestQuestionAnsweredInTheEditor(t *testing.T) {
	s, dir := questionBroker(t, "")
	openSession(t, s, "s1")
	q := formQuestion("5", "s1", "Release settings?", richSchema)
	s.AgentToEditor(q)
	answer := `{"jsonrpc":"2.0","id":5,"result":{"action":"accept","content":{"name":"v2-secret-codename","channel":"beta","platforms":["linux","mac"],"replicas":3,"notify":false}}}`
	s.EditorToAgent(answer)
	// A second answer from the editor is dropped.
	s.EditorSend(strings.Replace(answer, "beta", "stable", 1))
	agentGotNothingMore(s)
	s.Finish()
	lines := questionLines(t, dir)
	if len(lines) != 1 {
		t.Fatalf("audit lines for the question: %+v", lines)
	}
	if l := lines[0]; l.Mode != "form" || l.Decision != "accept" || l.Source != "editor" || l.Session != "s1" || strings.Join(l.Fields, ",") != "channel,name,notify,platforms,replicas" {
		t.Errorf("audit line %+v", l)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "audit.jsonl")); strings.Contains(string(b), "v2-secret-codename") {
		t.Errorf("the audit log holds a value the human typed:\n%s", b)
	}
}

// TestSessionCancelWithdrawsAQuestionEverywhere: session/cancel answers the
// session's question cancel before anything else can, withdraws the
// editor's prompt with $/cancel_request and ends the channel's command;
// the editor's late answer is dropped. A subagent's question goes with its
// parent's turn.
func TestSessionCancelWithdrawsAQuestionEverywhere(t *testing.T) {
	dir := t.TempDir()
	script := execChannel(t, dir, "sleep 300")
	s, _ := questionBroker(t, channelCfg("both", "", script))
	initSubagents(t, s)
	openSession(t, s, "s1")
	s.AgentToEditor(formQuestion("5", "s1", "Deploy where?", deploySchema))
	pid, _ := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(dir, "pid"))))
	var prompt struct{ Mode, Message, Session string }
	if err := json.Unmarshal([]byte(waitFile(t, filepath.Join(dir, "prompt.json"))), &prompt); err != nil || prompt.Mode != "form" || prompt.Message != "Deploy where?" || prompt.Session != "s1" {
		t.Fatalf("the channel's prompt %+v (%v)", prompt, err)
	}
	cancel := `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`
	s.EditorToAgent(cancel)
	s.AgentExpect(`{"jsonrpc":"2.0","id":5,"result":{"action":"cancel"}}`)
	s.EditorExpect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":5}}`)
	waitGone(t, pid)
	s.EditorSend(`{"jsonrpc":"2.0","id":5,"result":{"action":"accept","content":{"target":"production"}}}`)
	agentGotNothingMore(s)

	// A subagent's question goes with its parent's turn.
	s.AgentToEditor(subagentUpdate("s1", "kid", `"title":"helper"`))
	os.Remove(filepath.Join(dir, "pid"))
	child := formQuestion("6", "kid", "Which file?", `{"type":"object","properties":{"file":{"type":"string"}}}`)
	s.AgentToEditor(child)
	waitFile(t, filepath.Join(dir, "pid"))
	s.EditorToAgent(cancel)
	s.AgentExpect(`{"jsonrpc":"2.0","id":6,"result":{"action":"cancel"}}`)
	s.EditorExpect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":6}}`)
	agentGotNothingMore(s)
	s.Finish()
}

// TestAgentCancelWithdrawsAQuestionEverywhere: the agent's $/cancel_request
// of its question is answered -32800 by the broker, which withdraws it from
// the editor and ends the channel's command.
func TestAgentCancelWithdrawsAQuestionEverywhere(t *testing.T) {
	dir := t.TempDir()
	script := execChannel(t, dir, "sleep 300")
	s, _ := questionBroker(t, channelCfg("both", "", script))
	openSession(t, s, "s1")
	s.AgentToEditor(formQuestion(`"q-1"`, "s1", "Deploy where?", deploySchema))
	pid, _ := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(dir, "pid"))))
	s.AgentSend(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"q-1"}}`)
	s.EditorExpect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"q-1"}}`)
	s.AgentExpect(`{"jsonrpc":"2.0","id":"q-1","error":{"code":-32800,"message":"request cancelled by the agent"}}`)
	waitGone(t, pid)
	s.EditorSend(`{"jsonrpc":"2.0","id":"q-1","result":{"action":"decline"}}`)
	agentGotNothingMore(s)
	s.Finish()
}

// TestQuestionTimeoutAnswersCancel: a question nobody answers by [ask]
// timeout is answered cancel, never accept, and withdrawn from the editor.
func TestQuestionTimeoutAnswersCancel(t *testing.T) {
	s, dir := questionBroker(t, "[ask]\ntimeout = \"300ms\"\n")
	openSession(t, s, "s1")
	s.AgentToEditor(formQuestion("5", "s1", "Deploy where?", deploySchema))
	s.AgentExpect(`{"jsonrpc":"2.0","id":5,"result":{"action":"cancel"}}`)
	s.EditorExpect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":5}}`)
	s.EditorSend(`{"jsonrpc":"2.0","id":5,"result":{"action":"accept","content":{"target":"staging"}}}`)
	agentGotNothingMore(s)
	s.Finish()
	if lines := questionLines(t, dir); len(lines) != 1 || lines[0].Decision != "cancel" || lines[0].Source != "timeout" {
		t.Fatalf("audit: %+v", lines)
	}
}

// allowEverything is a rule file that allows whatever a rule can name, MCP
// tools included, in bypass mode.
const allowEverything = "mode = \"bypass\"\n" + allowEverythingRules + "\n[[rule]]\ndecision = \"allow\"\ntool = \"*\"\n"

// TestNoRuleAnswersAQuestion (attack): rules that allow everything, bypass
// mode (from the config and the flag) and an "always" given for the very
// URL never answer a question: each reaches the editor, and only the
// editor's answer reaches the agent. A question dressed as a permission
// request (a toolCall, options) is a question all the same.
func TestNoRuleAnswersAQuestion(t *testing.T) {
	s, dir := questionBroker(t, allowEverything, "--mode", "bypass")
	openSession(t, s, "s1")
	// The rules allow a fetch of the URL; the editor says "always" too.
	fetch := `{"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"f1","kind":"fetch","title":"Fetch https://deploy.example/login","rawInput":{"url":"https://deploy.example/login"}},"options":[{"optionId":"allow-once","name":"Allow","kind":"allow_once"},{"optionId":"allow-always","name":"Always","kind":"allow_always"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}}`
	s.AgentSend(fetch)
	s.AgentExpect(`{"jsonrpc":"2.0","id":1,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}`)

	for i, q := range []string{
		formQuestion("2", "s1", "Deploy where?", deploySchema),
		urlQuestion("3", "s1", "https://deploy.example/login", "el-3"),
		`{"jsonrpc":"2.0","id":4,"method":"elicitation/create","params":{"sessionId":"s1","mode":"form","message":"Allow?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}},"toolCall":{"toolCallId":"t4","kind":"read","title":"cat README"},"options":[{"optionId":"allow-once","name":"Allow","kind":"allow_once"}]}}`,
		// Request-scoped, no session.
		`{"jsonrpc":"2.0","id":5,"method":"elicitation/create","params":{"requestId":0,"mode":"form","message":"API key?","requestedSchema":{"type":"object","properties":{"key":{"type":"string"}}}}}`,
	} {
		s.AgentToEditor(q)
		id := strconv.Itoa(i + 2)
		answer := `{"jsonrpc":"2.0","id":` + id + `,"result":{"action":"decline"}}`
		s.EditorToAgent(answer)
	}
	agentGotNothingMore(s)
	s.Finish()
	lines := questionLines(t, dir)
	if len(lines) != 4 {
		t.Fatalf("audit lines: %+v", lines)
	}
	for _, l := range lines {
		if l.Decision != "decline" || l.Source != "editor" {
			t.Errorf("a question was decided by %q: %+v", l.Source, l)
		}
	}
}

// TestCodexApprovalAsAQuestion (attack): codex-acp's approval of an MCP
// tool call, sent as a form question marked _meta.codex_approval_kind,
// reaches the editor under rules that allow everything in bypass mode, as
// every question does, and its audit line says it is a Codex approval and
// of which kind; the mark in another letter case beside it, or not a
// string, names it a possible approval, and so does the line of one the
// timeout answered.
func TestCodexApprovalAsAQuestion(t *testing.T) {
	approval := func(id, meta string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"elicitation/create","params":{"sessionId":"s1","toolCallId":"call_7","mode":"form","message":"Allow the github MCP server to run tool \"create_issue\"?","requestedSchema":{"type":"object","properties":{}},"_meta":` + meta + `}}`
	}
	const possibly = "possibly a Codex approval asked as a question"
	s, dir := questionBroker(t, allowEverything, "--mode", "bypass")
	openSession(t, s, "s1")
	s.AgentToEditor(approval("2", `{"codex_approval_kind":"mcp_tool_call","persist":["session","always"],"tool_params":{"title":"x"}}`))
	s.EditorToAgent(`{"jsonrpc":"2.0","id":2,"result":{"action":"accept"}}`)
	s.AgentToEditor(approval("3", `{"codex_approval_kind":"mcp_tool_call","Codex_Approval_Kind":"none"}`))
	s.EditorToAgent(`{"jsonrpc":"2.0","id":3,"result":{"action":"decline"}}`)
	agentGotNothingMore(s)
	s.Finish()
	lines := questionLines(t, dir)
	if len(lines) != 2 {
		t.Fatalf("audit lines: %+v", lines)
	}
	for i, want := range []struct{ decision, reason string }{
		{"accept", `a Codex approval asked as a question (_meta.codex_approval_kind "mcp_tool_call"): only a human answers it`},
		{"decline", possibly},
	} {
		if l := lines[i]; l.Decision != want.decision || l.Source != "editor" || !strings.HasPrefix(l.Reason, want.reason) {
			t.Errorf("audit line %d: %+v; want %s by the editor, the reason starting %q", i, l, want.decision, want.reason)
		}
	}

	// Nobody answers this one: the timeout does, cancel.
	s, dir = questionBroker(t, allowEverything+"\n[ask]\ntimeout = \"300ms\"\n", "--mode", "bypass")
	openSession(t, s, "s1")
	s.AgentToEditor(approval("4", `{"codex_approval_kind":["mcp_tool_call"]}`))
	s.AgentExpect(`{"jsonrpc":"2.0","id":4,"result":{"action":"cancel"}}`)
	s.EditorExpect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":4}}`)
	agentGotNothingMore(s)
	s.Finish()
	lines = questionLines(t, dir)
	if len(lines) != 1 || lines[0].Decision != "cancel" || lines[0].Source != "timeout" ||
		!strings.HasPrefix(lines[0].Reason, possibly) || !strings.HasSuffix(lines[0].Reason, "; nobody answered within 300ms") {
		t.Fatalf("audit: %+v", lines)
	}
}

// TestAgentCannotAnswerItsOwnQuestion (attack): a response the agent sends
// with its own question's id goes to the editor as any agent response
// does, and answers nothing: the question stays open, and the editor's
// answer is the one the agent gets.
func TestAgentCannotAnswerItsOwnQuestion(t *testing.T) {
	dir := t.TempDir()
	script := execChannel(t, dir, "sleep 300")
	s, _ := questionBroker(t, channelCfg("channels", "", script))
	openSession(t, s, "s1")
	s.AgentSend(formQuestion("5", "s1", "Deploy where?", deploySchema))
	waitFile(t, filepath.Join(dir, "prompt.json"))
	forged := `{"jsonrpc":"2.0","id":5,"result":{"action":"accept","content":{"target":"production"}}}`
	s.AgentToEditor(forged) // relayed as a response to the editor, not an answer
	s.EditorToAgent(msgMarker)
	// The channel is still asking: the question is open.
	pid, _ := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(dir, "pid"))))
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the channel's command ended: the question was answered (%v)", err)
	}
	cancel := `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`
	s.EditorToAgent(cancel)
	s.AgentExpect(`{"jsonrpc":"2.0","id":5,"result":{"action":"cancel"}}`)
	s.Finish()
}

// TestURLQuestions: a URL-mode question is consent, never fetched by the
// broker; elicitation/complete reaches the editor as sent and withdraws the
// channel's prompt; the editor still answers. On the channels route, a
// completed question nobody answered is answered cancel.
func TestURLQuestions(t *testing.T) {
	var hits atomic.Int64
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer site.Close()
	url := site.URL + "/login?state=xyz"

	dir := t.TempDir()
	script := execChannel(t, dir, "sleep 300")
	s, _ := questionBroker(t, channelCfg("both", "", script))
	openSession(t, s, "s1")
	s.AgentToEditor(urlQuestion("5", "s1", url, "el-5"))
	pid, _ := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(dir, "pid"))))
	var prompt struct{ Mode, URL, ElicitationID string }
	if err := json.Unmarshal([]byte(waitFile(t, filepath.Join(dir, "prompt.json"))), &prompt); err != nil || prompt.Mode != "url" || prompt.URL != url || prompt.ElicitationID != "el-5" {
		t.Fatalf("the channel's prompt %+v (%v)", prompt, err)
	}
	complete := `{"jsonrpc":"2.0","method":"elicitation/complete","params":{"elicitationId":"el-5"}}`
	s.AgentToEditor(complete)
	waitGone(t, pid)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":5,"result":{"action":"accept"}}`)
	agentGotNothingMore(s)
	s.Finish()

	dir = t.TempDir()
	script = execChannel(t, dir, "sleep 300")
	s, _ = questionBroker(t, channelCfg("channels", "", script))
	openSession(t, s, "s1")
	s.AgentSend(urlQuestion("6", "s1", url, "el-6"))
	pid, _ = strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(dir, "pid"))))
	s.AgentToEditor(`{"jsonrpc":"2.0","method":"elicitation/complete","params":{"elicitationId":"el-6"}}`)
	s.AgentExpect(`{"jsonrpc":"2.0","id":6,"result":{"action":"cancel"}}`)
	waitGone(t, pid)
	agentGotNothingMore(s)
	s.Finish()
	if n := hits.Load(); n != 0 {
		t.Fatalf("the URL was fetched %d times", n)
	}
}

// TestQuestionsRefused: [questions] refuse_url declines a URL-mode question
// at once and refuse_sessions a named session's (and its subagents'); the
// editor sees neither, and other questions are asked as usual.
func TestQuestionsRefused(t *testing.T) {
	s, dir := questionBroker(t, "[questions]\nrefuse_url = true\nrefuse_sessions = [\"s2\"]\n")
	initSubagents(t, s)
	openSession(t, s, "s1")
	openSession(t, s, "s2")
	s.AgentSend(urlQuestion("5", "s1", "https://deploy.example/login", "el-5"))
	s.AgentExpect(`{"jsonrpc":"2.0","id":5,"result":{"action":"decline"}}`)
	s.AgentSend(formQuestion("6", "s2", "Deploy where?", deploySchema))
	s.AgentExpect(`{"jsonrpc":"2.0","id":6,"result":{"action":"decline"}}`)
	s.AgentToEditor(subagentUpdate("s2", "kid", ""))
	s.AgentSend(formQuestion("7", "kid", "Deploy where?", deploySchema))
	s.AgentExpect(`{"jsonrpc":"2.0","id":7,"result":{"action":"decline"}}`)
	q := formQuestion("8", "s1", "Deploy where?", deploySchema)
	s.AgentToEditor(q) // the first thing the editor sees
	s.EditorToAgent(`{"jsonrpc":"2.0","id":8,"result":{"action":"decline"}}`)
	s.Finish()
	lines := questionLines(t, dir)
	if len(lines) != 4 || lines[0].Source != "questions" || !strings.Contains(lines[0].Reason, "refuse_url") || lines[1].Source != "questions" || !strings.Contains(lines[1].Reason, "refuse_sessions") || lines[3].Source != "editor" {
		t.Fatalf("audit: %+v", lines)
	}
}

// TestInitializeUnchangedByDefault: without answer_for_editor (and with it,
// for an editor that advertises forms), the agent gets the editor's
// initialize byte for byte.
func TestInitializeUnchangedByDefault(t *testing.T) {
	for _, cfg := range []string{"", "[questions]\nrefuse_url = true\n"} {
		s, _ := questionBroker(t, cfg)
		s.EditorToAgent(msgInitialize)
		s.Finish()
	}
	s, _ := questionBroker(t, "[questions]\nanswer_for_editor = true\n")
	withForms := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"elicitation":{"form":{"_meta":{"x":1}}},"terminal":true}}}`
	s.EditorToAgent(withForms)
	s.Finish()
}

// TestAnswerForEditorAdvertises: with answer_for_editor, an editor that
// does not advertise forms has them advertised on its behalf (every other
// byte kept, the trace noting the rewrite), and its questions never reach
// it: the channels ask them.
func TestAnswerForEditorAdvertises(t *testing.T) {
	dir := t.TempDir()
	script := execChannel(t, dir, "sleep 300")
	trace := filepath.Join(dir, "trace.jsonl")
	s, _ := questionBroker(t, "[questions]\nanswer_for_editor = true\n"+channelCfg("editor", "", script), "--trace", trace)
	s.EditorSend(msgInitialize)
	s.AgentExpect(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"elicitation":{"form":{}},"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true},"clientInfo":{"name":"zed","title":"Zed","version":"0.201.3"}}}`)
	s.AgentToEditor(msgInitialized)
	openSession(t, s, "s1")
	s.AgentSend(formQuestion("5", "s1", "Deploy where?", deploySchema))
	pid, _ := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(dir, "pid"))))
	s.AgentToEditor(msgMarker) // the editor was not sent the question
	cancel := `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`
	s.EditorToAgent(cancel)
	s.AgentExpect(`{"jsonrpc":"2.0","id":5,"result":{"action":"cancel"}}`)
	waitGone(t, pid)
	s.AgentToEditor(msgMarker) // nor withdrawn from it
	s.Finish()
	data, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"note":"rewritten: added clientCapabilities.elicitation.form`) {
		t.Errorf("the trace does not note the rewrite:\n%s", data)
	}
}

// answeringChannel writes an exec channel that saves its prompt in dir and
// answers each question by its message, as the answers map says.
func answeringChannel(t *testing.T, dir string, answers map[string]string) string {
	t.Helper()
	body := "case \"$ACP_BROKER_MESSAGE\" in\n"
	for message, answer := range answers {
		body += fmt.Sprintf("%q) echo '%s' ;;\n", message, answer)
	}
	body += "*) exit 1 ;;\nesac"
	return execChannel(t, dir, body)
}

// TestQuestionAnsweredOnAChannel: on the channels route the exec channel
// answers the seed example (a deploy target, Staging or Production, and an
// optional "anything else?") and a form of every field type; each answer
// reaches the agent exactly once, the editor never sees the questions, and
// the audit names the channel, the action and the fields.
func TestQuestionAnsweredOnAChannel(t *testing.T) {
	dir := t.TempDir()
	script := answeringChannel(t, dir, map[string]string{
		"Deploy where?":     `{"action":"accept","content":{"target":"production","notes":"after 6pm, please"}}`,
		"Release settings?": `{"action":"accept","content":{"name":"v2","channel":"stable","platforms":["linux","windows"],"replicas":2.5,"notify":true}}`,
		"Not now?":          `{"action":"decline"}`,
	})
	s, brokerDir := questionBroker(t, channelCfg("channels", "", script))
	openSession(t, s, "s1")
	s.AgentSend(formQuestion("5", "s1", "Deploy where?", deploySchema))
	s.AgentExpect(`{"jsonrpc":"2.0","id":5,"result":{"action":"accept","content":{"target":"production","notes":"after 6pm, please"}}}`)
	var prompt struct {
		Mode, Message   string
		RequestedSchema json.RawMessage
		Options         []any
	}
	if err := json.Unmarshal([]byte(waitFile(t, filepath.Join(dir, "prompt.json"))), &prompt); err != nil || prompt.Mode != "form" || prompt.Message != "Deploy where?" || string(prompt.RequestedSchema) != deploySchema || len(prompt.Options) != 0 {
		t.Fatalf("the channel's prompt %+v (%v)", prompt, err)
	}
	s.AgentSend(formQuestion("6", "s1", "Release settings?", richSchema))
	s.AgentExpect(`{"jsonrpc":"2.0","id":6,"result":{"action":"accept","content":{"name":"v2","channel":"stable","platforms":["linux","windows"],"replicas":2.5,"notify":true}}}`)
	s.AgentSend(formQuestion("7", "s1", "Not now?", deploySchema))
	s.AgentExpect(`{"jsonrpc":"2.0","id":7,"result":{"action":"decline"}}`)
	s.AgentToEditor(msgMarker) // the editor saw none of them
	agentGotNothingMore(s)
	s.Finish()
	lines := questionLines(t, brokerDir)
	if len(lines) != 3 {
		t.Fatalf("audit: %+v", lines)
	}
	if l := lines[0]; l.Decision != "accept" || l.Source != "channel" || l.Channel != "script" || strings.Join(l.Fields, ",") != "notes,target" {
		t.Errorf("audit line %+v", l)
	}
	if b, _ := os.ReadFile(filepath.Join(brokerDir, "audit.jsonl")); strings.Contains(string(b), "after 6pm") {
		t.Errorf("the audit log holds a value the human typed:\n%s", b)
	}
}

// TestInvalidChannelAnswerIsRefused: content from a channel that does not
// fit the form (a choice not offered, too many items, a number out of
// bounds) is refused, named in the audit line, and the question stays open:
// a valid answer from another channel then wins, once.
func TestInvalidChannelAnswerIsRefused(t *testing.T) {
	for _, bad := range []string{
		`{"action":"accept","content":{"name":"v2","channel":"nightly","platforms":["linux"]}}`,
		`{"action":"accept","content":{"name":"v2","channel":"beta","platforms":["linux","mac","windows"]}}`,
		`{"action":"accept","content":{"name":"v2","channel":"beta","platforms":["linux"],"replicas":11}}`,
		`{"action":"accept","content":{"channel":"beta","platforms":["linux"]}}`,
		`{"action":"allow"}`,
	} {
		t.Run("", func(t *testing.T) {
			badDir, goodDir := t.TempDir(), t.TempDir()
			badScript := execChannel(t, badDir, "echo '"+bad+"'")
			release := filepath.Join(goodDir, "release")
			goodScript := execChannel(t, goodDir, "while [ ! -e "+release+" ]; do sleep 0.05; done\necho '{\"action\":\"accept\",\"content\":{\"name\":\"v2\",\"channel\":\"beta\",\"platforms\":[\"mac\"]}}'")
			cfg := fmt.Sprintf("[ask]\nroute = \"channels\"\n\n[[channel]]\nname = \"bad\"\ntype = \"exec\"\ncommand = [%q]\n\n[[channel]]\nname = \"good\"\ntype = \"exec\"\ncommand = [%q]\n", badScript, goodScript)
			s, brokerDir := questionBroker(t, cfg)
			openSession(t, s, "s1")
			s.AgentSend(formQuestion("5", "s1", "Release settings?", richSchema))
			s.WaitStderr("the refusal", func(l string) bool { return strings.Contains(l, "refused") && strings.Contains(l, "channel=bad") })
			agentGotNothingMore(s) // still open
			if err := os.WriteFile(release, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			s.AgentExpect(`{"jsonrpc":"2.0","id":5,"result":{"action":"accept","content":{"name":"v2","channel":"beta","platforms":["mac"]}}}`)
			agentGotNothingMore(s)
			s.Finish()
			lines := questionLines(t, brokerDir)
			if len(lines) != 1 || lines[0].Channel != "good" || len(lines[0].Refused) != 1 || !strings.HasPrefix(lines[0].Refused[0], "bad: ") {
				t.Fatalf("audit: %+v", lines)
			}
		})
	}
}

// TestAnswerForEditorAnswersOnAChannel: the broker answers for an editor
// without forms: the channel's answer reaches the agent, and the editor is
// never sent the question, whatever the route.
func TestAnswerForEditorAnswersOnAChannel(t *testing.T) {
	dir := t.TempDir()
	script := answeringChannel(t, dir, map[string]string{"Deploy where?": `{"action":"accept","content":{"target":"staging"}}`})
	s, brokerDir := questionBroker(t, "[questions]\nanswer_for_editor = true\n"+channelCfg("both", "", script))
	s.EditorSend(msgInitialize)
	s.AgentRecv() // the rewritten initialize (see TestAnswerForEditorAdvertises)
	s.AgentToEditor(msgInitialized)
	openSession(t, s, "s1")
	s.AgentSend(formQuestion("5", "s1", "Deploy where?", deploySchema))
	s.AgentExpect(`{"jsonrpc":"2.0","id":5,"result":{"action":"accept","content":{"target":"staging"}}}`)
	s.AgentToEditor(msgMarker) // the editor saw nothing of it
	s.Finish()
	if lines := questionLines(t, brokerDir); len(lines) != 1 || lines[0].Source != "channel" || lines[0].Decision != "accept" {
		t.Fatalf("audit: %+v", lines)
	}
}

// TestRealClaudeAskUserQuestionOnAChannel: claude-agent-acp 0.101 behind an
// editor that does not advertise forms disables AskUserQuestion; with
// [questions] answer_for_editor the broker advertises them on the editor's
// behalf, the tool becomes a form elicitation, the exec channel answers it
// (the real adapter's schema, checked exactly), the model gets the answer,
// and the editor never sees the question.
func TestRealClaudeAskUserQuestionOnAChannel(t *testing.T) {
	dir := t.TempDir()
	script := execChannel(t, dir, `echo '{"action":"accept","content":{"question_0":"Blue"}}'`)
	c := startRealClaude(t, realClaudeOptions{
		rules: "[questions]\nanswer_for_editor = true\n" + channelCfg("editor", "", script),
		convs: []anthropicapi.Conversation{{Marker: "MARKER-QUESTION", Steps: []anthropicapi.Step{
			{Tool: "AskUserQuestion", Input: map[string]any{"questions": []any{map[string]any{
				"question": "Which colour should the marker be?", "header": "Colour", "multiSelect": false,
				"options": []any{map[string]any{"label": "Red", "description": "warm"}, map[string]any{"label": "Blue", "description": "cold"}},
			}}}},
			{Text: "Thanks."},
		}}},
	})
	prompt := c.start(map[string]any{"fs": map[string]any{"readTextFile": false}}, "MARKER-QUESTION: ask me")
	if stop := c.awaitTurnEnd(prompt); stop != "end_turn" {
		t.Errorf("stop reason %q, want end_turn", stop)
	}
	if r := c.mock.WaitToolResults("MARKER-QUESTION", 1, c.wait); len(r) != 1 || !strings.Contains(r[0].Text, "Blue") {
		t.Errorf("the model got %+v, want the answer Blue", r)
	}
	var asked struct{ Mode, Message string }
	if err := json.Unmarshal([]byte(waitFile(t, filepath.Join(dir, "prompt.json"))), &asked); err != nil || asked.Mode != "form" || asked.Message != "Which colour should the marker be?" {
		t.Errorf("the channel was asked %+v (%v)", asked, err)
	}
	for _, m := range []string{"elicitation/create", "session/request_permission"} {
		if got := c.editorRequests(m); len(got) != 0 {
			t.Errorf("the editor was sent %s", got[0])
		}
	}
	c.finish()
}

// TestAgentCannotAnswerItsQuestionLocally (attack): the agent writes the
// answer to its own question on the broker's local socket, with the
// question's digest (it knows its own bytes) and the prompt's id (the
// broker's pid and a counter): the socket refuses it, the refusal is in the
// audit line, and the question stays open for the human.
func TestAgentCannotAnswerItsQuestionLocally(t *testing.T) {
	s, dir := questionBroker(t, "")
	openSession(t, s, "s1")
	q := formQuestion("5", "s1", "Deploy where?", deploySchema)
	s.AgentToEditor(q)
	sum := sha256.Sum256([]byte(q))
	pid := strconv.Itoa(s.cmd.Process.Pid)
	raw, _ := json.Marshal(map[string]any{
		"socket": filepath.Join(dir, "run", "acp-broker", pid+".sock"),
		"id":     pid + "-1", "digest": hex.EncodeToString(sum[:]),
		"action": "accept", "content": map[string]string{"target": "production"},
	})
	out := filepath.Join(t.TempDir(), "answer.out")
	if status := agentRuns(t, s, "sh", "-c", `exec "$0" -local-answer "$1" > "$2" 2>&1`, fakeAgentBin, string(raw), out); status == 0 {
		t.Fatalf("the agent's answer was taken: %s", waitFile(t, out))
	}
	if text, _ := os.ReadFile(out); !strings.Contains(string(text), "runs under this broker") {
		t.Fatalf("the socket's refusal: %s", text)
	}
	s.EditorToAgent(`{"jsonrpc":"2.0","id":5,"result":{"action":"accept","content":{"target":"staging"}}}`)
	agentGotNothingMore(s)
	s.Finish()
	lines := questionLines(t, dir)
	if len(lines) != 1 || lines[0].Source != "editor" || len(lines[0].Refused) != 1 || !strings.Contains(lines[0].Refused[0], "local: pid ") {
		t.Fatalf("audit: %+v", lines)
	}
}

// TestQuestionEscalates: on the editor route with escalate_after, a
// question nobody answered in the editor goes to the channels too; the
// channel's answer wins and the editor's prompt is withdrawn.
func TestQuestionEscalates(t *testing.T) {
	dir := t.TempDir()
	script := answeringChannel(t, dir, map[string]string{"Deploy where?": `{"action":"accept","content":{"target":"staging"}}`})
	s, _ := questionBroker(t, channelCfg("editor", "escalate_after = \"300ms\"", script))
	openSession(t, s, "s1")
	s.AgentToEditor(formQuestion("5", "s1", "Deploy where?", deploySchema))
	s.AgentExpect(`{"jsonrpc":"2.0","id":5,"result":{"action":"accept","content":{"target":"staging"}}}`)
	s.EditorExpect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":5}}`)
	s.EditorSend(`{"jsonrpc":"2.0","id":5,"result":{"action":"decline"}}`)
	agentGotNothingMore(s)
	s.Finish()
}

// TestUncheckableSchemaGoesToTheEditor: a form whose schema the broker
// cannot check exactly (a pattern) is sent to no channel, even on the
// channels route: the editor answers it, and the audit line says why.
func TestUncheckableSchemaGoesToTheEditor(t *testing.T) {
	dir := t.TempDir()
	script := execChannel(t, dir, `echo '{"action":"accept","content":{"code":"x"}}'`)
	s, brokerDir := questionBroker(t, channelCfg("channels", "", script))
	openSession(t, s, "s1")
	q := formQuestion("5", "s1", "Code?", `{"type":"object","properties":{"code":{"type":"string","pattern":"^[0-9]{6}$"}}}`)
	s.AgentToEditor(q)
	s.EditorToAgent(`{"jsonrpc":"2.0","id":5,"result":{"action":"accept","content":{"code":"123456"}}}`)
	agentGotNothingMore(s)
	s.Finish()
	if _, err := os.Stat(filepath.Join(dir, "pid")); err == nil {
		t.Error("the channel was asked")
	}
	lines := questionLines(t, brokerDir)
	// A channel that was asked would be named in refused (the exec
	// channel refuses such a question itself).
	if len(lines) != 1 || lines[0].Source != "editor" || !strings.Contains(lines[0].Reason, "only the editor can answer") || len(lines[0].Refused) != 0 {
		t.Fatalf("audit: %+v", lines)
	}
}

// TestQuestionsRefusedFailClosed: refuse_url declines a question it cannot
// read exactly (a member repeated in another letter case, a non-string
// member) and a mode "url" in any letter case, and refuse_sessions one whose
// sessionId a peer may read as another session: none reaches the editor.
func TestQuestionsRefusedFailClosed(t *testing.T) {
	s, dir := questionBroker(t, "[questions]\nrefuse_url = true\n")
	openSession(t, s, "s1")
	for i, params := range []string{
		`{"sessionId":"s1","mode":"form","Mode":"url","message":"Sign in","url":"https://deploy.example/login","elicitationId":"el-1"}`,
		`{"sessionId":"s1","mode":"url","message":"Sign in","url":"https://deploy.example/login","elicitationId":"el-2","toolCallId":7}`,
		`{"sessionId":"s1","mode":"url","message":["Sign in"],"url":"https://deploy.example/login","elicitationId":"el-3"}`,
		`{"sessionId":"s1","mode":"URL","message":"Sign in","url":"https://deploy.example/login","elicitationId":"el-4"}`,
	} {
		s.AgentSend(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"elicitation/create","params":%s}`, i+1, params))
		s.AgentExpect(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"action":"decline"}}`, i+1))
	}
	s.Finish()
	lines := questionLines(t, dir)
	if len(lines) != 4 {
		t.Fatalf("audit: %+v", lines)
	}
	for _, l := range lines {
		if l.Decision != "decline" || l.Source != "questions" || !strings.Contains(l.Reason, "refuse_url") {
			t.Errorf("audit: %+v", l)
		}
	}

	s, dir = questionBroker(t, "[questions]\nrefuse_sessions = [\"s2\"]\n")
	openSession(t, s, "s1")
	openSession(t, s, "s2")
	s.AgentSend(`{"jsonrpc":"2.0","id":5,"method":"elicitation/create","params":{"sessionId":"s1","SessionId":"s2","mode":"form","message":"Deploy where?","requestedSchema":` + deploySchema + `}}`)
	s.AgentExpect(`{"jsonrpc":"2.0","id":5,"result":{"action":"decline"}}`)
	s.Finish()
	if lines := questionLines(t, dir); len(lines) != 1 || lines[0].Source != "questions" || !strings.Contains(lines[0].Reason, "refuse_sessions") {
		t.Fatalf("audit: %+v", lines)
	}
}

// TestCompletedURLQuestionStillTimesOut: a URL question the editor has,
// completed by the agent (elicitation/complete), still gets the [ask]
// timeout's cancel when the editor never answers.
func TestCompletedURLQuestionStillTimesOut(t *testing.T) {
	s, dir := questionBroker(t, "[ask]\ntimeout = \"3s\"\n")
	openSession(t, s, "s1")
	s.AgentToEditor(urlQuestion("5", "s1", "https://deploy.example/login", "el-5"))
	s.AgentToEditor(`{"jsonrpc":"2.0","method":"elicitation/complete","params":{"elicitationId":"el-5"}}`)
	s.AgentExpect(`{"jsonrpc":"2.0","id":5,"result":{"action":"cancel"}}`)
	s.EditorExpect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":5}}`)
	s.Finish()
	if lines := questionLines(t, dir); len(lines) != 1 || lines[0].Decision != "cancel" || lines[0].Source != "timeout" || lines[0].Reason != "nobody answered within 3s" {
		t.Fatalf("audit: %+v", lines)
	}
}

// TestQuestionCancelledWhenEveryChannelGivesUp: with answer_for_editor, a
// question every channel gave up on is answered cancel, with its audit
// line, rather than left waiting on the local socket; the editor never
// sees it.
func TestQuestionCancelledWhenEveryChannelGivesUp(t *testing.T) {
	dir := t.TempDir()
	script := answeringChannel(t, dir, map[string]string{}) // exits 1
	s, brokerDir := questionBroker(t, "[questions]\nanswer_for_editor = true\n"+channelCfg("both", "", script))
	s.EditorSend(msgInitialize)
	s.AgentRecv() // the rewritten initialize
	s.AgentToEditor(msgInitialized)
	openSession(t, s, "s1")
	s.AgentSend(formQuestion("5", "s1", "Deploy where?", deploySchema))
	s.AgentExpect(`{"jsonrpc":"2.0","id":5,"result":{"action":"cancel"}}`)
	s.AgentToEditor(msgMarker) // the editor saw nothing of it
	s.Finish()
	if lines := questionLines(t, brokerDir); len(lines) != 1 || lines[0].Decision != "cancel" || lines[0].Source != "not answered" || !strings.Contains(lines[0].Reason, "every channel gave up") {
		t.Fatalf("audit: %+v", lines)
	}
}
