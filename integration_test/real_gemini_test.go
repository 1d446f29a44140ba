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

	"github.com/acp-broker/acp-broker/integration_test/internal/geminiapi"
)

// The tests in this file run the real @google/gemini-cli (`gemini --acp`,
// pinned in testdata/adapters) behind the broker, offline: its model is
// geminiapi on loopback, reached through gemini-cli's own base-URL setting,
// and it runs with a home of its own in which the user chose API-key auth,
// turned usage statistics and telemetry off and trusted the project folder,
// as a user who ran `gemini` there once would have. No mode setting: the
// session starts in the mode gemini-cli picks.
//
// What gemini-cli 0.61 sends (bundle/gemini-*.js, Session.runTool): a
// permission request before every tool call it does not run on its own,
// with no earlier tool_call update, no rawInput and no name: the shell
// command is only the title, paths only in locations and diff content.
// Options are proceed_always (allow_always), proceed_once (allow_once) and
// cancel (reject_once). gemini-cli reads the answer's id as one of its own
// outcomes, offered or not: any proceed_* or modify_with_editor runs the
// call, any other id fails it. A refused call is reported to the model as a
// function response with an error, and the turn goes on; after
// session/cancel the turn ends as soon as the pending request is answered.

// geminiRules is the rule file of the real-Gemini tests.
const geminiRules = `# rules for the real gemini-cli tests
[[rule]]
id = "allowed-marker"
decision = "allow"
command = "touch gemini-allowed.txt"

[[rule]]
id = "denied-marker"
decision = "deny"
reason = "this marker must never be made"
command = "touch gemini-denied*.txt"

[[rule]]
id = "edit-src"
decision = "allow"
kind = "edit"
path = "./src/**"

[[rule]]
id = "no-generated-edits"
decision = "deny"
reason = "generated code is rebuilt, not edited"
path = "./gen/**"
`

// geminiRun is one gemini-cli behind the broker, the test its editor.
type geminiRun struct {
	*session
	api       *geminiapi.Server
	root      string   // holds everything below
	home      string   // gemini-cli's HOME
	env       []string // the broker's environment, beyond testEnv's
	config    string   // the --config file
	audit     string   // the --audit file
	project   string   // the session's directory, where the commands run
	trace     string   // the broker's --trace file
	sessionID string
	mode      string // the session's current mode, from the session/new response
	ids       int
	// editorFiles: the editor serves fs/read_text_file and
	// fs/write_text_file, from and to the project.
	editorFiles bool
}

// startGemini starts the broker in front of gemini-cli, initializes, and
// opens a session in a project directory of its own.
// With editorFiles the editor advertises fs.readTextFile and
// fs.writeTextFile, as Zed does, and gemini-cli reads and writes the
// session's files through it.
func startGemini(t *testing.T, editorFiles bool, geminiArgs ...string) *geminiRun {
	t.Helper()
	// The broker runs `gemini --acp` as npm installed it: the bin link,
	// whose `#!/usr/bin/env node` finds .bin/node, the pinned Node, first
	// on PATH.
	adapterNode(t)
	bin := filepath.Join(requireAdapters(t), ".bin")
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(root, "home")
	project := filepath.Join(root, "project")
	for _, dir := range []string{filepath.Join(home, ".gemini"), filepath.Join(project, "src"), filepath.Join(project, "gen")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	geminiWriteJSON(t, filepath.Join(home, ".gemini", "settings.json"), map[string]any{
		"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
		// Nothing leaves the machine: no usage statistics (Clearcut),
		// no telemetry, no update check, no IDE companion.
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"telemetry": map[string]any{"enabled": false},
		"general":   map[string]any{"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
		"ide":       map[string]any{"enabled": false},
	})
	geminiWriteJSON(t, filepath.Join(home, ".gemini", "trustedFolders.json"), map[string]any{project: "TRUST_FOLDER"})

	api, err := geminiapi.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })

	config := filepath.Join(root, "rules.toml")
	writeFileAtomic(t, config, geminiRules)
	trace := filepath.Join(root, "trace.jsonl")
	audit := filepath.Join(root, "audit.jsonl")
	args := []string{"--log-level", "warn", "--audit", audit, "--config", config, "--trace", trace, "--shutdown-grace", adapterShutdownGrace,
		"--", "gemini", "--acp"}
	cmd := exec.Command(brokerBin, append(args, geminiArgs...)...)
	g := &geminiRun{api: api, root: root, home: home, config: config, audit: audit, project: project, trace: trace, editorFiles: editorFiles}
	g.env = []string{
		"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_STATE_HOME=" + filepath.Join(root, "state"),
		"GEMINI_API_KEY=test-key",
		"GOOGLE_GEMINI_BASE_URL=" + api.URL,
		"NO_COLOR=1",
	}
	g.session = newSession(t, options{broker: true, dir: project, env: g.env, wait: adapterWait}, cmd)

	init := g.call("initialize", map[string]any{
		"protocolVersion": 1,
		"clientCapabilities": map[string]any{
			"fs":       map[string]any{"readTextFile": editorFiles, "writeTextFile": editorFiles},
			"terminal": false,
		},
		"clientInfo": map[string]any{"name": "acp-broker-tests", "version": "1"},
	})
	var info struct {
		ProtocolVersion int `json:"protocolVersion"`
		AgentInfo       struct {
			Name, Version string
		} `json:"agentInfo"`
	}
	geminiDecode(t, init, &info)
	if info.ProtocolVersion != 1 || info.AgentInfo.Name != "gemini-cli" || info.AgentInfo.Version != "0.61.0" {
		t.Fatalf("not the pinned gemini-cli 0.61.0 speaking ACP v1: %s", init)
	}

	g.openSession()
	return g
}

// openSession opens a new session in the project directory; the prompts
// after it go to that session.
func (g *geminiRun) openSession() {
	g.t.Helper()
	created := g.call("session/new", map[string]any{"cwd": g.project, "mcpServers": []any{}})
	var sess struct {
		SessionID string `json:"sessionId"`
		Modes     struct {
			CurrentModeID string `json:"currentModeId"`
		} `json:"modes"`
	}
	geminiDecode(g.t, created, &sess)
	if sess.SessionID == "" {
		g.t.Fatalf("session/new gave no session id: %s", created)
	}
	g.sessionID, g.mode = sess.SessionID, sess.Modes.CurrentModeID
}

func geminiWriteJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func geminiDecode(t testing.TB, raw json.RawMessage, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decoding %s: %v", clip(string(raw)), err)
	}
}

// request sends a request of the editor's and returns its id.
func (g *geminiRun) request(method string, params any) string {
	g.t.Helper()
	g.ids++
	id := fmt.Sprintf(`"editor-%d"`, g.ids)
	p, err := json.Marshal(params)
	if err != nil {
		g.t.Fatal(err)
	}
	g.EditorSend(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, method, p))
	return id
}

// call sends a request and returns its result; it fails on an error.
func (g *geminiRun) call(method string, params any) json.RawMessage {
	g.t.Helper()
	m := g.answer(method, params)
	if m.Error != nil {
		g.t.Fatalf("%s failed: %s\n%s", method, clip(string(m.raw)), g.debug())
	}
	return m.Result
}

// answer sends a request and returns its response. Outside a turn the
// agent sends the editor notifications only.
func (g *geminiRun) answer(method string, params any) geminiMessage {
	g.t.Helper()
	id := g.request(method, params)
	for {
		m := g.recv()
		if string(m.ID) == id && m.Method == "" {
			return m
		}
		if m.Method != "" && m.ID != nil {
			g.t.Fatalf("gemini-cli sent a request during %s: %s", method, clip(string(m.raw)))
		}
	}
}

// geminiMessage is one message the editor received.
type geminiMessage struct {
	rpcMessage
	Params json.RawMessage `json:"params"`
	raw    []byte
}

func (g *geminiRun) recv() geminiMessage {
	g.t.Helper()
	line := g.EditorRecv()
	var m geminiMessage
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		g.t.Fatalf("the editor got a line that is not JSON: %q", clip(line))
	}
	m.raw = []byte(line)
	return m
}

// geminiAsk is a session/request_permission the editor received.
type geminiAsk struct {
	ID     json.RawMessage
	Raw    string
	Params struct {
		SessionID string `json:"sessionId"`
		ToolCall  struct {
			ToolCallID string            `json:"toolCallId"`
			Title      string            `json:"title"`
			Kind       string            `json:"kind"`
			RawInput   json.RawMessage   `json:"rawInput"`
			Locations  []json.RawMessage `json:"locations"`
		} `json:"toolCall"`
		Options []struct {
			OptionID string `json:"optionId"`
			Kind     string `json:"kind"`
		} `json:"options"`
	}
}

// geminiTurn is what the editor saw of one prompt.
type geminiTurn struct {
	stopReason string
	asked      []geminiAsk
	updates    []string // the session/update kinds, in order
	text       string   // the agent's message chunks
	writes     []string // the fs/write_text_file requests the editor got
}

// serveFile plays an editor's file system: it reads and writes the
// project's files (gemini-cli asks the editor for no other).
func (g *geminiRun) serveFile(m geminiMessage) {
	g.t.Helper()
	var p struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	geminiDecode(g.t, m.Params, &p)
	if rel, err := filepath.Rel(g.project, p.Path); err != nil || !filepath.IsLocal(rel) {
		g.t.Fatalf("gemini-cli asked the editor for a file outside the project: %s", clip(string(m.raw)))
	}
	reply := func(result any) {
		b, err := json.Marshal(result)
		if err != nil {
			g.t.Fatal(err)
		}
		g.EditorSend(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, b))
	}
	if m.Method == "fs/write_text_file" {
		if err := os.WriteFile(p.Path, []byte(p.Content), 0o600); err != nil {
			g.t.Fatal(err)
		}
		reply(map[string]any{})
		return
	}
	// A file that does not exist reads as empty, as from an editor that
	// opens a new buffer for it. gemini-cli 0.61 cannot create a file after
	// an error answer: its not-found check reads the error's message as an
	// Error's, and the SDK hands it the plain JSON-RPC error object.
	data, err := os.ReadFile(p.Path)
	if err != nil && !os.IsNotExist(err) {
		g.t.Fatal(err)
	}
	reply(map[string]any{"content": string(data)})
}

// prompt sends a prompt and plays the editor until the prompt is answered:
// each permission request goes to answer, which replies (or not) through
// g. It fails on a request of any other method, which gemini-cli does not
// send to an editor without fs and terminal capabilities.
func (g *geminiRun) prompt(text string, answer func(g *geminiRun, req geminiAsk)) geminiTurn {
	g.t.Helper()
	id := g.request("session/prompt", map[string]any{
		"sessionId": g.sessionID,
		"prompt":    []any{map[string]any{"type": "text", "text": text}},
	})
	var tr geminiTurn
	for {
		m := g.recv()
		switch {
		case m.Method == "" && string(m.ID) == id:
			if m.Error != nil {
				g.t.Fatalf("session/prompt failed: %d %s\n%s", m.Error.Code, m.Error.Message, g.debug())
			}
			var res struct {
				StopReason string `json:"stopReason"`
			}
			geminiDecode(g.t, m.Result, &res)
			tr.stopReason = res.StopReason
			return tr
		case m.Method == "session/request_permission":
			req := geminiAsk{ID: m.ID, Raw: string(m.raw)}
			geminiDecode(g.t, m.Params, &req.Params)
			tr.asked = append(tr.asked, req)
			answer(g, req)
		case m.Method == "session/update":
			var u struct {
				Update struct {
					SessionUpdate string          `json:"sessionUpdate"`
					Content       json.RawMessage `json:"content"`
				} `json:"update"`
			}
			geminiDecode(g.t, m.Params, &u)
			tr.updates = append(tr.updates, u.Update.SessionUpdate)
			if u.Update.SessionUpdate == "agent_message_chunk" {
				var chunk struct {
					Text string `json:"text"`
				}
				geminiDecode(g.t, u.Update.Content, &chunk)
				tr.text += chunk.Text
			}
		case g.editorFiles && (m.Method == "fs/read_text_file" || m.Method == "fs/write_text_file"):
			if m.Method == "fs/write_text_file" {
				tr.writes = append(tr.writes, string(m.raw))
			}
			g.serveFile(m)
		case m.Method != "" && m.ID != nil:
			g.t.Fatalf("gemini-cli sent the editor an unexpected request: %s", clip(string(m.raw)))
		}
	}
}

// geminiAnswer answers a permission request with the option of kind.
func geminiAnswer(kind string) func(g *geminiRun, req geminiAsk) {
	return func(g *geminiRun, req geminiAsk) {
		g.t.Helper()
		for _, o := range req.Params.Options {
			if o.Kind == kind {
				g.EditorSend(selected(string(req.ID), o.OptionID))
				return
			}
		}
		g.t.Fatalf("the request offers no %s option: %s", kind, clip(req.Raw))
	}
}

func geminiNeverAsked(g *geminiRun, req geminiAsk) {
	g.t.Helper()
	g.t.Errorf("the editor was asked, though the rules decide this: %s", clip(req.Raw))
	g.EditorSend(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"cancelled"}}}`, req.ID))
}

func (g *geminiRun) marker(name string) bool {
	_, err := os.Stat(filepath.Join(g.project, name))
	return err == nil
}

// finish closes the editor's side, requires the broker to exit 0, and
// checks the dry run against what it decided (explainAgrees).
func (g *geminiRun) finish() {
	g.t.Helper()
	g.CloseEditor()
	if code := g.Wait(); code != 0 {
		g.t.Fatalf("the broker exited with status %d\n%s", code, g.debug())
	}
	g.explainAgrees()
}

// explainAgrees runs every permission request gemini-cli sent through
// `acp-broker rules explain --json`, with the broker's trace up to the
// request as the transcript and the broker's config, environment and
// directory, and requires the dry run to decide as the broker did (its
// audit line): allow or deny alike, ask where the broker asked. A request
// the broker answered from an "always" given after it was asked is left
// out: explain sees the answer remembered since.
func (g *geminiRun) explainAgrees() {
	g.t.Helper()
	if g.t.Failed() {
		return
	}
	live := map[string]string{} // toolCallId -> allow, deny or ask
	data, err := os.ReadFile(g.audit)
	if err != nil {
		g.t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var a struct {
			ToolCallID string `json:"tool_call_id"`
			Method     string `json:"method"`
			Decision   string `json:"decision"`
			Asked      string `json:"asked"`
			OptionKind string `json:"option_kind"`
			ChosenKind string `json:"chosen_kind"` // an always sent as once
			Source     string `json:"source"`
		}
		if json.Unmarshal([]byte(line), &a) != nil || a.Method != "session/request_permission" {
			continue
		}
		switch {
		case strings.HasSuffix(a.OptionKind, "_always") || strings.HasSuffix(a.ChosenKind, "_always"):
			live[a.ToolCallID] = "" // remembered, see above
		case a.Source == "remembered":
			// Answered from an answer remembered for the session, which
			// the dry run does not see.
			live[a.ToolCallID] = ""
		case a.Asked != "":
			live[a.ToolCallID] = "ask"
		default:
			live[a.ToolCallID] = a.Decision
		}
	}
	trace, err := os.ReadFile(g.trace)
	if err != nil {
		g.t.Fatal(err)
	}
	lines := strings.SplitAfter(string(trace), "\n")
	checked := 0
	for i, line := range lines {
		var e struct {
			Dir     string `json:"dir"`
			Message struct {
				Method string `json:"method"`
				Params struct {
					ToolCall struct {
						ToolCallID string `json:"toolCallId"`
					} `json:"toolCall"`
				} `json:"params"`
			} `json:"message"`
		}
		var raw struct {
			Message struct {
				Params json.RawMessage `json:"params"`
			} `json:"message"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Dir != "agent->broker" || e.Message.Method != "session/request_permission" {
			continue
		}
		want, ok := live[e.Message.Params.ToolCall.ToolCallID]
		if !ok {
			g.t.Errorf("no audit line for %s", clip(line))
			continue
		}
		if want == "" {
			continue
		}
		_ = json.Unmarshal([]byte(line), &raw)
		transcript := filepath.Join(g.root, fmt.Sprintf("explain-%d.jsonl", i))
		if err := os.WriteFile(transcript, []byte(strings.Join(lines[:i], "")), 0o600); err != nil {
			g.t.Fatal(err)
		}
		cmd := exec.Command(brokerBin, "rules", "explain", "--json", "--transcript", transcript, "--config", g.config)
		cmd.Env = append(testEnv(), g.env...)
		cmd.Dir = g.project
		cmd.Stdin = strings.NewReader(string(raw.Message.Params))
		out, err := cmd.Output()
		var got struct {
			Decision string `json:"decision"`
			Reason   string `json:"reason"`
		}
		if err != nil || json.Unmarshal(out, &got) != nil {
			g.t.Errorf("rules explain failed on %s: %v\n%s", clip(line), err, out)
			continue
		}
		if got.Decision != want {
			g.t.Errorf("the dry run decides %s (%s), the broker decided %s, for\n  %s", got.Decision, got.Reason, want, clip(line))
		}
		checked++
	}
	if checked == 0 {
		g.t.Errorf("the dry run checked no request")
	}
	g.t.Logf("the dry run decided %d requests as the broker did", checked)
}

// traced returns the messages of the broker's trace that keep accepts,
// each as "DIR MESSAGE".
func (g *geminiRun) traced(keep func(dir string, m rpcMessage) bool) []string {
	g.t.Helper()
	data, err := os.ReadFile(g.trace)
	if err != nil {
		g.t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		var e struct {
			Dir     string          `json:"dir"`
			Message json.RawMessage `json:"message"`
		}
		var m rpcMessage
		if json.Unmarshal([]byte(line), &e) == nil && json.Unmarshal(e.Message, &m) == nil && keep(e.Dir, m) {
			out = append(out, e.Dir+" "+string(e.Message))
		}
	}
	return out
}

// toAgent returns every answer gemini-cli got to its request id.
func (g *geminiRun) toAgent(id json.RawMessage) []string {
	g.t.Helper()
	return g.traced(func(dir string, m rpcMessage) bool {
		return strings.HasSuffix(dir, "->agent") && m.Method == "" && geminiSameID(m.ID, id)
	})
}

// geminiSameID says whether two JSON-RPC ids are the same id.
func geminiSameID(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && x == y
}

// run prompts the model to run one shell command (see geminiapi).
func (g *geminiRun) run(command string, answer func(g *geminiRun, req geminiAsk)) geminiTurn {
	g.t.Helper()
	return g.prompt("Please run this in the project:\n$ "+command, answer)
}

// runIn prompts the model to run one shell command in dir (the tool's
// dir_path: relative to the session's directory, or absolute).
func (g *geminiRun) runIn(dir, command string, answer func(g *geminiRun, req geminiAsk)) geminiTurn {
	g.t.Helper()
	call, err := json.Marshal(geminiapi.Call{Name: geminiapi.ShellTool, Args: map[string]any{"command": command, "dir_path": dir}})
	if err != nil {
		g.t.Fatal(err)
	}
	return g.prompt("Please run this there:\ncall "+string(call), answer)
}

// write prompts the model to write content to path with gemini-cli's
// write_file tool.
func (g *geminiRun) write(path, content string, answer func(g *geminiRun, req geminiAsk)) geminiTurn {
	g.t.Helper()
	call, err := json.Marshal(geminiapi.Call{Name: "write_file", Args: map[string]any{"file_path": path, "content": content}})
	if err != nil {
		g.t.Fatal(err)
	}
	return g.prompt("Please write this file:\ncall "+string(call), answer)
}

// heard returns the one function response the model got for the last
// prompt's tool call: what gemini-cli told it the call did.
func (g *geminiRun) heard() geminiapi.FunctionResponse {
	g.t.Helper()
	got := g.api.FunctionResponses()
	if len(got) != 1 {
		g.t.Fatalf("the model got %d function responses, want one: %+v", len(got), got)
	}
	return got[0]
}

// ran requires the command to have run (or the file to have been written)
// and the model to have been told so.
func (g *geminiRun) ran(tr geminiTurn, marker string) {
	g.t.Helper()
	if !g.marker(marker) {
		g.t.Errorf("%s is missing: the tool call did not run", marker)
	}
	if r := g.heard(); r.Response["error"] != nil || r.Response["output"] == nil {
		g.t.Errorf("the model did not get the tool's output: %+v", r.Response)
	}
	if tr.stopReason != "end_turn" || !strings.Contains(tr.text, geminiapi.Final) {
		g.t.Errorf("the turn ended %q with text %q, want end_turn after the model's final answer", tr.stopReason, tr.text)
	}
}

// refused requires the tool call not to have run, the model to have been
// told so, and the turn to have gone on to the model's final answer.
func (g *geminiRun) refused(tr geminiTurn, marker string) {
	g.t.Helper()
	if g.marker(marker) {
		g.t.Errorf("%s exists: the refused tool call ran", marker)
	}
	if r := g.heard(); r.Response["output"] != nil || !strings.Contains(fmt.Sprint(r.Response["error"]), "canceled by the user") {
		g.t.Errorf("the model was not told the tool call was refused: %+v", r.Response)
	}
	if tr.stopReason != "end_turn" || !strings.Contains(tr.text, geminiapi.Final) {
		g.t.Errorf("the turn ended %q with text %q, want end_turn after the model's final answer", tr.stopReason, tr.text)
	}
}

// answeredBy requires the broker to have answered gemini-cli's request
// id itself (never the editor), with exactly result.
func (g *geminiRun) answeredBy(id json.RawMessage, result string) {
	g.t.Helper()
	got := g.toAgent(id)
	want := fmt.Sprintf(`broker->agent {"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
	if len(got) != 1 || got[0] != want {
		g.t.Errorf("gemini-cli got, for request %s:\n  %s\nwant only\n  %s", id, strings.Join(got, "\n  "), want)
	}
}

// relayed requires gemini-cli to have got the editor's answer to req, the
// option optionID, unchanged and alone.
func (g *geminiRun) relayed(req geminiAsk, optionID string) {
	g.t.Helper()
	got := g.toAgent(req.ID)
	want := "editor->agent " + selected(string(req.ID), optionID)
	if len(got) != 1 || got[0] != want {
		g.t.Errorf("gemini-cli got, for request %s:\n  %s\nwant only\n  %s", req.ID, strings.Join(got, "\n  "), want)
	}
}

// permissionRequests returns the permission requests gemini-cli sent, as
// it sent them.
func (g *geminiRun) permissionRequests() []string {
	g.t.Helper()
	var out []string
	for _, l := range g.traced(func(dir string, m rpcMessage) bool {
		return dir == "agent->broker" && m.Method == "session/request_permission"
	}) {
		out = append(out, strings.TrimPrefix(l, "agent->broker "))
	}
	return out
}

// TestRealGeminiRules: in the mode gemini-cli starts in (default, which
// asks before every shell command), a command the rules allow runs without
// the editor hearing of it, and a denied one, alone or as one part of a
// compound command, does not run; the model is told it was refused and the
// turn goes on. The broker answers with gemini-cli's own option ids.
func TestRealGeminiRules(t *testing.T) {
	g := startGemini(t, false)
	if g.mode != "default" {
		t.Fatalf("gemini-cli started in mode %q, want default", g.mode)
	}

	tr := g.run("touch gemini-allowed.txt; touch gemini-denied-part.txt", geminiNeverAsked)
	g.refused(tr, "gemini-denied-part.txt")
	if g.marker("gemini-allowed.txt") {
		t.Errorf("the allowed part of a denied compound command ran")
	}
	reqs := g.permissionRequests()
	if len(reqs) != 1 {
		t.Fatalf("gemini-cli sent %d permission requests, want 1", len(reqs))
	}
	g.answeredBy(geminiRequestID(t, reqs[0]), `{"outcome":{"outcome":"selected","optionId":"cancel"}}`)

	tr = g.run("touch gemini-allowed.txt", geminiNeverAsked)
	g.ran(tr, "gemini-allowed.txt")
	reqs = g.permissionRequests()
	if len(reqs) != 2 {
		t.Fatalf("gemini-cli sent %d permission requests, want 2", len(reqs))
	}
	g.answeredBy(geminiRequestID(t, reqs[1]), `{"outcome":{"outcome":"selected","optionId":"proceed_once"}}`)

	tr = g.run("touch gemini-denied.txt", geminiNeverAsked)
	g.refused(tr, "gemini-denied.txt")
	reqs = g.permissionRequests()
	if len(reqs) != 3 {
		t.Fatalf("gemini-cli sent %d permission requests, want 3", len(reqs))
	}
	g.answeredBy(geminiRequestID(t, reqs[2]), `{"outcome":{"outcome":"selected","optionId":"cancel"}}`)

	// A command the model runs in another directory (dir_path) is read
	// there: gemini-cli says where only in the request's text content.
	tr = g.runIn("gen", "echo made > gemini-redirect.txt", geminiNeverAsked)
	g.refused(tr, "gen/gemini-redirect.txt")

	// Writes: gemini-cli names the file only in locations and the diff.
	tr = g.write("src/made.txt", "made by the allowed write\n", geminiNeverAsked)
	g.ran(tr, "src/made.txt")
	tr = g.write("gen/made.txt", "made by the denied write\n", geminiNeverAsked)
	g.refused(tr, "gen/made.txt")
	reqs = g.permissionRequests()
	if len(reqs) != 6 {
		t.Fatalf("gemini-cli sent %d permission requests, want 6", len(reqs))
	}
	g.answeredBy(geminiRequestID(t, reqs[3]), `{"outcome":{"outcome":"selected","optionId":"cancel"}}`)
	g.answeredBy(geminiRequestID(t, reqs[4]), `{"outcome":{"outcome":"selected","optionId":"proceed_once"}}`)
	g.answeredBy(geminiRequestID(t, reqs[5]), `{"outcome":{"outcome":"selected","optionId":"cancel"}}`)
	g.finish()
}

func geminiRequestID(t testing.TB, req string) json.RawMessage {
	t.Helper()
	return json.RawMessage(requestID(t, req))
}

// TestRealGeminiAsked: a command no rule decides reaches the editor exactly
// as gemini-cli sent it (the shape NOTES.md describes: no rawInput, the
// command only in the title, empty locations, proceed_* and cancel
// options), and the editor's answer decides: allow runs it, reject does not.
func TestRealGeminiAsked(t *testing.T) {
	g := startGemini(t, false)

	tr := g.run("touch gemini-asked.txt", geminiAnswer("allow_once"))
	g.ran(tr, "gemini-asked.txt")
	if len(tr.asked) != 1 {
		t.Fatalf("the editor was asked %d times, want once", len(tr.asked))
	}
	req := tr.asked[0]
	if sent := g.permissionRequests(); len(sent) != 1 || sent[0] != req.Raw {
		t.Errorf("the editor got\n  %s\nbut gemini-cli sent\n  %s", req.Raw, strings.Join(sent, "\n  "))
	}
	tc := req.Params.ToolCall
	if req.Params.SessionID != g.sessionID || tc.Title != "touch gemini-asked.txt" || tc.Kind != "execute" || tc.RawInput != nil || len(tc.Locations) != 0 {
		t.Errorf("not the request shape gemini-cli 0.61 is known to send: %s", req.Raw)
	}
	var ids []string
	for _, o := range req.Params.Options {
		ids = append(ids, o.OptionID+"="+o.Kind)
	}
	if got, want := strings.Join(ids, " "), "proceed_always=allow_always proceed_once=allow_once cancel=reject_once"; got != want {
		t.Errorf("options %s, want %s", got, want)
	}

	g.relayed(req, "proceed_once")

	tr = g.run("touch gemini-rejected.txt", geminiAnswer("reject_once"))
	g.refused(tr, "gemini-rejected.txt")
	if len(tr.asked) != 1 {
		t.Fatalf("the editor was asked %d times, want once", len(tr.asked))
	}
	g.relayed(tr.asked[0], "cancel")

	// A command the rules allow, run by the model in gemini-cli's own
	// temporary directory (which gemini-cli lets dir_path name): outside
	// the session's directories, so it is asked.
	scratch := filepath.Join(g.home, ".gemini", "tmp", "project")
	if info, err := os.Stat(scratch); err != nil || !info.IsDir() {
		t.Fatalf("gemini-cli's temporary directory for the project is not %s: %v", scratch, err)
	}
	tr = g.runIn(scratch, "touch gemini-allowed.txt", geminiAnswer("reject_once"))
	if len(tr.asked) != 1 {
		t.Errorf("the editor was asked %d times, want once", len(tr.asked))
	}
	if _, err := os.Stat(filepath.Join(scratch, "gemini-allowed.txt")); err == nil {
		t.Errorf("the command ran in %s", scratch)
	}

	// "Allow for this session" (proceed_always, allow_always): the broker
	// remembers it for the session, as the option says (gemini-cli never
	// persists proceed_always), and answers gemini-cli with proceed_once,
	// so gemini-cli does not remember it itself: it asks again in the same
	// session, and the broker answers from the remembered answer; a new
	// session is asked again.
	tr = g.run("touch gemini-always.txt", geminiAnswer("allow_always"))
	g.ran(tr, "gemini-always.txt")
	if len(tr.asked) != 1 {
		t.Fatalf("the editor was asked %d times, want once", len(tr.asked))
	}
	g.answeredBy(tr.asked[0].ID, `{"outcome":{"outcome":"selected","optionId":"proceed_once"}}`)
	if err := os.Remove(filepath.Join(g.project, "gemini-always.txt")); err != nil {
		t.Fatal(err)
	}
	before := len(g.permissionRequests())
	tr = g.run("touch gemini-always.txt", geminiNeverAsked)
	g.ran(tr, "gemini-always.txt")
	reqs := g.permissionRequests()
	if len(reqs) != before+1 {
		t.Fatalf("gemini-cli sent %d permission requests for the command again, want 1: it remembered the answer itself", len(reqs)-before)
	}
	g.answeredBy(geminiRequestID(t, reqs[len(reqs)-1]), `{"outcome":{"outcome":"selected","optionId":"proceed_once"}}`)
	g.openSession()
	tr = g.run("touch gemini-always.txt", geminiAnswer("reject_once"))
	if len(tr.asked) != 1 {
		t.Fatalf("in a new session the editor was asked %d times, want once: an answer for the session outlived it", len(tr.asked))
	}
	g.relayed(tr.asked[0], "cancel")
	g.finish()
}

// TestRealGeminiCancel: session/cancel while the editor has the request
// open. The broker answers it cancelled itself, so the turn ends cancelled
// even though this editor never answers in time; its late "allow" is
// dropped, nothing runs, and the model never hears of the command.
func TestRealGeminiCancel(t *testing.T) {
	g := startGemini(t, false)
	var pending geminiAsk
	tr := g.run("touch gemini-cancelled.txt", func(g *geminiRun, req geminiAsk) {
		pending = req
		g.EditorSend(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, g.sessionID))
	})
	if tr.stopReason != "cancelled" || len(tr.asked) != 1 {
		t.Fatalf("the turn ended %q after %d requests, want cancelled after 1", tr.stopReason, len(tr.asked))
	}
	g.answeredBy(pending.ID, `{"outcome":{"outcome":"cancelled"}}`)

	// The late answer of an editor that approves anything. The broker
	// reads the editor in order, so once the next prompt is answered the
	// late answer has been dealt with.
	g.EditorSend(selected(string(pending.ID), "proceed_once"))
	tr = g.prompt("Nothing to run this time.", geminiNeverAsked)
	if tr.stopReason != "end_turn" {
		t.Errorf("the next turn ended %q, want end_turn", tr.stopReason)
	}
	g.answeredBy(pending.ID, `{"outcome":{"outcome":"cancelled"}}`)
	if g.marker("gemini-cancelled.txt") {
		t.Errorf("the cancelled command ran")
	}
	for _, r := range g.api.Requests() {
		for _, c := range r.Body.Contents {
			for _, p := range c.Parts {
				if p.FunctionResponse != nil {
					t.Errorf("the model heard of the cancelled command: %+v", p.FunctionResponse)
				}
			}
		}
	}
	g.finish()
}

// TestRealGeminiYolo (issue 12, item 0): gemini-cli started with --yolo,
// as a user who is tired of being asked puts it in the editor's agent
// arguments, runs every tool call without asking, so the broker would see
// nothing. The broker must take the session out of yolo before the editor
// can prompt, so the rules still decide and the rest is still asked; and it
// must refuse an editor's switch back to yolo.
func TestRealGeminiYolo(t *testing.T) {
	g := startGemini(t, false, "--yolo")
	if g.mode != "yolo" {
		t.Fatalf("gemini-cli --yolo started the session in mode %q, want yolo", g.mode)
	}
	tr := g.run("touch gemini-denied.txt", geminiNeverAsked)
	g.refused(tr, "gemini-denied.txt")
	// Sent before the session/new response's follow-ups, so in the trace
	// by the end of the first turn.
	g.toldOfSwitch()
	tr = g.run("touch gemini-asked.txt", geminiAnswer("reject_once"))
	g.refused(tr, "gemini-asked.txt")
	if len(tr.asked) != 1 {
		t.Errorf("the editor was asked %d times, want once", len(tr.asked))
	}

	m := g.answer("session/set_mode", map[string]any{"sessionId": g.sessionID, "modeId": "yolo"})
	if m.Error == nil {
		t.Errorf("the editor's switch to yolo was not refused: %s", m.raw)
	}
	tr = g.run("touch gemini-asked-again.txt", geminiAnswer("reject_once"))
	g.refused(tr, "gemini-asked-again.txt")
	if len(tr.asked) != 1 {
		t.Errorf("after the editor's set_mode the editor was asked %d times, want once", len(tr.asked))
	}
	g.finish()
}

// toldOfSwitch requires the broker to have told the editor, in the
// session, that it took the session out of yolo.
func (g *geminiRun) toldOfSwitch() {
	g.t.Helper()
	told := g.traced(func(dir string, m rpcMessage) bool {
		return dir == "broker->editor" && m.Method == "session/update"
	})
	for _, l := range told {
		if strings.Contains(l, g.sessionID) && strings.Contains(l, "yolo") && strings.Contains(l, "default") {
			return
		}
	}
	g.t.Errorf("the broker did not tell the editor it switched the session out of yolo; it sent:\n  %s", strings.Join(told, "\n  "))
}

// TestRealGeminiEditorFiles: with an editor that serves files (as Zed
// advertises it), gemini-cli writes through fs/write_text_file after its
// permission request. The broker lets the write through that its rule or
// the editor just allowed, and nothing else: a denied or rejected write
// never reaches the editor.
func TestRealGeminiEditorFiles(t *testing.T) {
	g := startGemini(t, true)

	tr := g.write("src/made.txt", "made by the allowed write\n", geminiNeverAsked)
	g.ran(tr, "src/made.txt")
	if len(tr.writes) != 1 {
		t.Errorf("the editor got %d writes, want the allowed one: %v", len(tr.writes), tr.writes)
	}

	tr = g.write("gen/made.txt", "made by the denied write\n", geminiNeverAsked)
	g.refused(tr, "gen/made.txt")
	if len(tr.writes) != 0 {
		t.Errorf("the editor got writes for a denied one: %v", tr.writes)
	}

	tr = g.write("notes.txt", "asked for\n", geminiAnswer("allow_once"))
	g.ran(tr, "notes.txt")
	if len(tr.asked) != 1 || len(tr.writes) != 1 {
		t.Errorf("asked %d times with %d writes, want one of each", len(tr.asked), len(tr.writes))
	}
	tr = g.write("rejected.txt", "asked for\n", geminiAnswer("reject_once"))
	g.refused(tr, "rejected.txt")
	if len(tr.asked) != 1 || len(tr.writes) != 0 {
		t.Errorf("asked %d times with %d writes, want one ask and no write", len(tr.asked), len(tr.writes))
	}
	g.finish()
}
