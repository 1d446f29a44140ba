package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acp-broker/acp-broker/internal/demo"
)

// TestDemoBrokerDecides plays the demo's conversation twice, once with the
// editor talking to the example agent directly and once through a real
// broker process with the demo's rules. The editor must see the direct
// conversation byte for byte, except the three permission requests the
// broker decided itself (git status, allowed, and the force push, denied, by
// rules; the second npm test, allowed by the editor's earlier "always") and
// their answers. The transcript, read from the broker's trace, must agree
// with the editor's own pipes on everything the editor saw, and show the
// decided requests exactly as the agent sent them, each followed by the
// broker's answer: the same answer the editor gave in the direct run, with
// the rule or remembered answer and its reason.
func TestDemoBrokerDecides(t *testing.T) {
	self := demoSelf(t)
	ws := t.TempDir()
	direct := runDemo(t, ws, demo.Options{Direct: true})
	brokered := runDemo(t, ws, demo.Options{Self: self})

	wantEditor, decided := withoutPermissionRequests(direct.Editor, "call_1", "call_3", "call_5")
	if len(decided) != 6 {
		t.Fatalf("the direct run has %d messages about call_1, call_3 and call_5, want 3 requests and 3 answers:\n%s", len(decided), lines(decided))
	}
	// The broker told the editor of its deny, and of nothing else.
	relayed, told := withoutTold(brokered.Editor)
	if len(told) != 1 || !strings.Contains(string(told[0].Raw), `"text":"\nacp-broker denied: git push --force origin main\nrule no-force-push (`) {
		t.Fatalf("the editor was told %d times, want once, of the force push's deny:\n%s", len(told), lines(told))
	}
	sameMessages(t, "the editor's messages", wantEditor, relayed)

	editorSide, brokerSide := splitByBroker(brokered.Entries)
	sameMessages(t, "the transcript's messages to and from the editor", relayed, editorSide)

	// The "always" answer to call_4 was remembered as one entry, which then
	// answered call_5. The transcript says so on the line of that answer,
	// not on the request's.
	id := rememberedAs(t, brokered, "call_4")
	for _, e := range brokered.Entries {
		if strings.Contains(e.Note, "remembered as") && e.From != demo.Editor {
			t.Errorf("a line other than the editor's answer says what was remembered: %s → %s %s — %s", e.From, e.To, e.Raw, e.Note)
		}
	}

	// The editor was asked exactly what demo --help says it is asked.
	var asked []string
	for _, e := range brokered.Editor {
		var m struct {
			Method string `json:"method"`
			Params struct {
				ToolCall struct {
					Title string `json:"title"`
				} `json:"toolCall"`
			} `json:"params"`
		}
		if json.Unmarshal(e.Raw, &m) == nil && m.Method == "session/request_permission" {
			asked = append(asked, m.Params.ToolCall.Title)
		}
	}
	if want := demo.EditorAsked(); !slices.Equal(asked, want) {
		t.Errorf("the editor was asked about %q, want %q (demo.EditorAsked, which demo --help shows)", asked, want)
	}

	always, once := alwaysAnswer(t, direct.Editor)
	want := []struct {
		from, to demo.Party
		like     demo.Entry // the direct run's message: the same bytes for a request, the same JSON for an answer
		note     string     // a regular expression
	}{
		{demo.Agent, demo.Broker, decided[0], ""},
		{demo.Broker, demo.Agent, decided[1], regexp.QuoteMeta("allowed by rule git-status: reading the repository's state is harmless")},
		{demo.Agent, demo.Broker, decided[2], ""},
		{demo.Broker, demo.Editor, told[0], ""},
		{demo.Broker, demo.Agent, decided[3], regexp.QuoteMeta("denied by rule no-force-push: force pushes rewrite shared history")},
		{demo.Editor, demo.Broker, always, alwaysNote + regexp.QuoteMeta("; remembered as "+id)},
		{demo.Broker, demo.Agent, once, ""},
		{demo.Agent, demo.Broker, decided[4], ""},
		{demo.Broker, demo.Agent, decided[5], rememberedNote(id)},
	}
	if len(brokerSide) != len(want) {
		t.Fatalf("the transcript has %d messages to or from the broker itself, want %d:\n%s", len(brokerSide), len(want), lines(brokerSide))
	}
	for i, w := range want {
		g := brokerSide[i]
		same := bytes.Equal(g.Raw, w.like.Raw)
		if w.from != demo.Agent {
			same = jsonEqual(g.Raw, w.like.Raw)
		}
		if g.From != w.from || g.To != w.to || !same || !regexp.MustCompile("^"+w.note+"$").MatchString(g.Note) {
			t.Errorf("broker message %d:\n got %s → %s %s — %s\nwant %s → %s like %s — %s", i+1, g.From, g.To, g.Raw, g.Note, w.from, w.to, w.like.Raw, w.note)
		}
	}
}

// TestDemoBrokerWithoutRulesDecidesOnlyRemembered plays the conversation
// direct and through a broker with an empty rule file: the broker then
// decides nothing but the request that the editor's earlier "always" answer
// covers (the second npm test), and the editor must see the same messages
// in the same order, byte for byte, but that request and its answer, as the
// transcript read from the broker's trace does.
func TestDemoBrokerWithoutRulesDecidesOnlyRemembered(t *testing.T) {
	self := demoSelf(t)
	ws := t.TempDir()
	direct := runDemo(t, ws, demo.Options{Direct: true})
	brokered := runDemo(t, ws, demo.Options{Self: self, NoRules: true})

	wantEditor, decided := withoutPermissionRequests(direct.Editor, "call_5")
	if len(decided) != 2 {
		t.Fatalf("the direct run has %d messages about call_5, want a request and its answer:\n%s", len(decided), lines(decided))
	}
	sameMessages(t, "the editor's messages", wantEditor, brokered.Editor)
	editorSide, brokerSide := splitByBroker(brokered.Entries)
	sameMessages(t, "the transcript's messages to and from the editor", wantEditor, editorSide)

	id := rememberedAs(t, brokered, "call_4")
	always, once := alwaysAnswer(t, direct.Editor)
	if len(brokerSide) != 4 || !jsonEqual(brokerSide[0].Raw, always.Raw) || brokerSide[0].Note != alwaysNoteText+"; remembered as "+id || !jsonEqual(brokerSide[1].Raw, once.Raw) ||
		!bytes.Equal(brokerSide[2].Raw, decided[0].Raw) || !jsonEqual(brokerSide[3].Raw, decided[1].Raw) ||
		!regexp.MustCompile("^"+rememberedNote(id)+"$").MatchString(brokerSide[3].Note) {
		t.Errorf("the broker's own messages:\n%s\nwant the editor's always to call_4 sent to the agent as once, then call_5's request and the editor's direct answer, allowed by remembered answer %s", lines(brokerSide), id)
	}
}

// alwaysNote is the trace's note on the editor's "always" answer to call_4,
// which the broker answers the agent with allow-once in place of.
const alwaysNoteText = `the agent is answered with the option "allow-once" in its place`

var alwaysNote = regexp.QuoteMeta(alwaysNoteText)

// alwaysAnswer returns the editor's "always" answer in a direct run, and
// the answer the broker sends the agent in its place: the same request's
// allow-once.
func alwaysAnswer(t *testing.T, entries []demo.Entry) (always, once demo.Entry) {
	t.Helper()
	for _, e := range entries {
		if e.From == demo.Editor && strings.Contains(string(e.Raw), `"allow-always"`) {
			once = e
			once.From, once.Raw = demo.Broker, bytes.Replace(e.Raw, []byte(`"allow-always"`), []byte(`"allow-once"`), 1)
			return e, once
		}
	}
	t.Fatalf("the direct run has no \"always\" answer from the editor:\n%s", lines(entries))
	return
}

// splitByBroker splits a brokered transcript into the messages to and from
// the editor and those to and from the broker itself.
func splitByBroker(entries []demo.Entry) (editorSide, brokerSide []demo.Entry) {
	for _, e := range entries {
		if e.From == demo.Editor && e.To == demo.Broker {
			// The editor's answer the broker took to answer the agent in
			// its place (an "always" sent as once): the editor sent it to
			// the agent, and it is on both sides.
			sent := e
			sent.To, sent.Note = demo.Agent, ""
			editorSide = append(editorSide, sent)
			brokerSide = append(brokerSide, e)
			continue
		}
		if e.From == demo.Broker || e.To == demo.Broker {
			brokerSide = append(brokerSide, e)
		} else {
			editorSide = append(editorSide, e)
		}
	}
	return editorSide, brokerSide
}

// rememberedAs returns the entry that the broker's audit log says the
// "always" answer to a tool call was remembered as.
func rememberedAs(t *testing.T, res *demo.Result, toolCall string) string {
	t.Helper()
	for _, r := range res.Audit {
		if r.Method == "session/request_permission" && r.ToolCallID == toolCall {
			if !regexp.MustCompile(`^r[0-9a-f]{8}$`).MatchString(r.Remembered) {
				t.Fatalf("the audit log says %s's answer was remembered as %q, want one entry id", toolCall, r.Remembered)
			}
			return r.Remembered
		}
	}
	t.Fatalf("the audit log has no record of %s", toolCall)
	return ""
}

// rememberedNote is the regular expression of the note on the broker's own
// answer from the remembered entry id.
func rememberedNote(id string) string {
	return regexp.QuoteMeta(`allowed by remembered answer `+id+`: remembered from "npm test -- --watch=false" (`) + `[^)]+\)`
}

// demoSelf returns the test binary, which TestMain put on PATH as
// acp-broker, and lets the broker and agent processes it starts exit
// without the race detector's pause.
func demoSelf(t *testing.T) string {
	t.Helper()
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	self, err := exec.LookPath("acp-broker")
	if err != nil {
		t.Fatal(err)
	}
	return self
}

// runDemo plays the demo in the workspace ws, emptied first, and requires
// that it succeeds with nothing on stderr.
func runDemo(t *testing.T, ws string, opts demo.Options) *demo.Result {
	t.Helper()
	entries, err := os.ReadDir(ws)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		os.RemoveAll(filepath.Join(ws, e.Name()))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	opts.Workspace, opts.Stdout, opts.Stderr = ws, &stdout, &stderr
	res, err := demo.Run(ctx, opts)
	if err != nil {
		t.Fatalf("demo.Run(%+v): %v\nstdout:\n%s\nstderr:\n%s", opts, err, &stdout, &stderr)
	}
	if stderr.Len() != 0 {
		t.Errorf("demo.Run(%+v) stderr:\n%s", opts, &stderr)
	}
	return res
}

// withoutPermissionRequests splits entries into the permission requests
// about the given tool calls, with their answers, and everything else.
func withoutPermissionRequests(entries []demo.Entry, toolCalls ...string) (kept, removed []demo.Entry) {
	asked := make(map[string]bool) // ids of the removed requests
	for _, e := range entries {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ToolCall struct {
					ToolCallID string `json:"toolCallId"`
				} `json:"toolCall"`
			} `json:"params"`
		}
		_ = json.Unmarshal(e.Raw, &m)
		switch {
		case m.Method == "session/request_permission" && e.From == demo.Agent && slices.Contains(toolCalls, m.Params.ToolCall.ToolCallID):
			asked[string(m.ID)] = true
			removed = append(removed, e)
		case m.Method == "" && e.To == demo.Agent && asked[string(m.ID)]:
			delete(asked, string(m.ID))
			removed = append(removed, e)
		default:
			kept = append(kept, e)
		}
	}
	return kept, removed
}

// withoutTold splits what the editor read into what was relayed and what
// the broker told it of its own answers (an agent_message_chunk starting
// "\nacp-broker ", the demo's editor taking no notices).
func withoutTold(entries []demo.Entry) (relayed, told []demo.Entry) {
	for _, e := range entries {
		var m struct {
			Params struct {
				Update struct {
					SessionUpdate string                `json:"sessionUpdate"`
					Content       struct{ Text string } `json:"content"`
				} `json:"update"`
			} `json:"params"`
		}
		_ = json.Unmarshal(e.Raw, &m)
		if m.Params.Update.SessionUpdate == "agent_message_chunk" && strings.HasPrefix(m.Params.Update.Content.Text, "\nacp-broker ") {
			told = append(told, e)
			continue
		}
		relayed = append(relayed, e)
	}
	return relayed, told
}

// sameMessages requires the same messages (direction and bytes; notes
// aside) in the same order.
func sameMessages(t *testing.T, what string, want, got []demo.Entry) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("%s: none expected", what)
	}
	for i := range max(len(want), len(got)) {
		var w, g demo.Entry
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		if w.From != g.From || w.To != g.To || !bytes.Equal(w.Raw, g.Raw) {
			t.Fatalf("%s: message %d differs:\nwant: %s → %s %s\n got: %s → %s %s", what, i+1, w.From, w.To, w.Raw, g.From, g.To, g.Raw)
		}
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

func lines(entries []demo.Entry) string {
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(string(e.From) + " → " + string(e.To) + " " + string(e.Raw) + "\n")
	}
	return b.String()
}
