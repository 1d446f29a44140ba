package demo

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// lineRE splits a transcript line into its columns: the direction, the label
// (words separated by single spaces) and the summary.
var lineRE = regexp.MustCompile(`^(\S+ → \S+) {2,}(\S+(?: \S+)*) {2,}(.*)$`)

// TestTranscriptLayout pins the exact layout of a few lines: fixed columns,
// so that requests and answers line up, and no trailing spaces.
func TestTranscriptLayout(t *testing.T) {
	var b strings.Builder
	tr := NewTranscript(&b)
	for _, e := range []Entry{
		{From: Editor, To: Agent, Raw: []byte(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)},
		{From: Agent, To: Editor, Raw: []byte(`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}`)},
		{From: Agent, To: Broker, Raw: []byte(`{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"c1"},"options":[{"optionId":"ok","name":"OK","kind":"allow_once"}]}}`)},
		{From: Broker, To: Agent, Raw: []byte(`{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected","optionId":"ok"}}}`), Note: "rule 3: allow git status"},
		{From: Agent, To: Editor, Raw: []byte(`{"jsonrpc":"2.0","method":"_x/ping"}`)},
	} {
		if err := tr.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	want := `editor → agent   session/new                   cwd "/w"
agent → editor   ↳ session/new                 sessionId "s1"
agent → broker   session/request_permission    c1; options allow_once
broker → agent   ↳ session/request_permission  selected "ok" (allow_once) — rule 3: allow git status
agent → editor   _x/ping
`
	if got := b.String(); got != want {
		t.Errorf("transcript:\n%s\nwant:\n%s", got, want)
	}
}

// TestTranscriptLines feeds one conversation, message by message, and checks
// each line's label and summary. The order matters: an answer is labelled
// with the method of the request it answers.
func TestTranscriptLines(t *testing.T) {
	tests := []struct {
		name    string
		entry   Entry
		label   string
		summary string
		cut     bool // the summary is cut at summaryRoom runes; summary is its start
	}{
		{
			name:    "initialize request shows version, client and capabilities",
			entry:   Entry{From: Editor, To: Agent, Raw: []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":false},"terminal":true},"clientInfo":{"name":"zed","version":"0.1"}}}`)},
			label:   "initialize",
			summary: "protocolVersion 1; zed 0.1; capabilities fs.readTextFile terminal",
		},
		{
			name:    "initialize result without capabilities",
			entry:   Entry{From: Agent, To: Editor, Raw: []byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":false}}}`)},
			label:   "↳ initialize",
			summary: "protocolVersion 1; capabilities none",
		},
		{
			name:    "message chunk is quoted and cut",
			entry:   Entry{From: Agent, To: Editor, Raw: []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + strings.Repeat("é", 100) + `"}}}}`)},
			label:   "session/update",
			summary: `agent_message_chunk "` + strings.Repeat("é", textLimit-1) + `…"`,
		},
		{
			name:    "non-text chunk",
			entry:   Entry{From: Agent, To: Editor, Raw: []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"image","data":"AAAA","mimeType":"image/png"}}}}`)},
			label:   "session/update",
			summary: "agent_thought_chunk <image>",
		},
		{
			name:    "tool call shows id, kind, title, status and raw input",
			entry:   Entry{From: Agent, To: Editor, Raw: []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"call_1","title":"git push","kind":"execute","status":"pending","rawInput":{ "command" : "git push" }}}}`)},
			label:   "session/update",
			summary: `tool_call call_1 execute "git push" pending {"command":"git push"}`,
		},
		{
			name:    "other session updates show their type",
			entry:   Entry{From: Agent, To: Editor, Raw: []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"plan","entries":[]}}}`)},
			label:   "session/update",
			summary: "plan",
		},
		{
			name:    "the editor's request and the agent's may share an id",
			entry:   Entry{From: Editor, To: Agent, Raw: []byte(`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"hi"}]}}`)},
			label:   "session/prompt",
			summary: `"hi"`,
		},
		{
			name:    "permission request lists option kinds",
			entry:   Entry{From: Agent, To: Editor, Raw: []byte(`{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"call_1","title":"git push","kind":"execute","rawInput":{"command":"git push"}},"options":[{"optionId":"yes","name":"Yes","kind":"allow_once"},{"optionId":"always","name":"Always","kind":"allow_always"},{"optionId":"no","name":"No","kind":"reject_once"}]}}`)},
			label:   "session/request_permission",
			summary: `call_1 execute "git push"; options allow_once, allow_always, reject_once`,
		},
		{
			name:    "answer to the agent's id 7 is the permission answer, with the option's kind",
			entry:   Entry{From: Editor, To: Agent, Raw: []byte(`{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"selected","optionId":"no"}}}`)},
			label:   "↳ session/request_permission",
			summary: `selected "no" (reject_once)`,
		},
		{
			name:    "fs read is shown by path",
			entry:   Entry{From: Agent, To: Editor, Raw: []byte(`{"jsonrpc":"2.0","id":"r1","method":"fs/read_text_file","params":{"sessionId":"s","path":"/home/u/p/a.go"}}`)},
			label:   "fs/read_text_file",
			summary: `"~/p/a.go"`,
		},
		{
			name:    "string ids match too",
			entry:   Entry{From: Editor, To: Agent, Raw: []byte(`{"jsonrpc":"2.0","id":"r1","result":{"content":"package a\n"}}`)},
			label:   "↳ fs/read_text_file",
			summary: `"package a\n"`,
		},
		{
			name:    "fs write shows path and the start of the content",
			entry:   Entry{From: Agent, To: Editor, Raw: []byte(`{"jsonrpc":"2.0","id":8,"method":"fs/write_text_file","params":{"sessionId":"s","path":"/home/u/p/b.txt","content":"x"}}`)},
			label:   "fs/write_text_file",
			summary: `"~/p/b.txt" ← "x"`,
		},
		{
			name:    "error answer",
			entry:   Entry{From: Editor, To: Agent, Raw: []byte(`{"jsonrpc":"2.0","id":8,"error":{"code":-32602,"message":"Invalid params"}}`)},
			label:   "↳ fs/write_text_file",
			summary: "error -32602: Invalid params",
		},
		{
			name:    "agent's answer to the editor's id 7 ends the turn",
			entry:   Entry{From: Agent, To: Editor, Raw: []byte(`{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}`)},
			label:   "↳ session/prompt",
			summary: "stopReason end_turn",
		},
		{
			name:    "answer to no known request",
			entry:   Entry{From: Agent, To: Editor, Raw: []byte(`{"jsonrpc":"2.0","id":99,"result":null}`)},
			label:   "↳ response 99",
			summary: "null",
		},
		{
			name:    "unknown methods show their params, cut",
			entry:   Entry{From: Editor, To: Agent, Raw: []byte(`{"jsonrpc":"2.0","id":9,"method":"_zed/thing","params":{"a":"` + strings.Repeat("x", 200) + `"}}`)},
			label:   "_zed/thing",
			summary: `{"a":"xxxx`,
			cut:     true,
		},
		{
			name:    "a line that is not JSON",
			entry:   Entry{From: Agent, To: Editor, Raw: []byte(`Starting agent v1.2...`)},
			label:   "(not JSON)",
			summary: `"Starting agent v1.2..."`,
		},
	}
	var b strings.Builder
	tr := NewTranscript(&b)
	const summaryRoom = 90
	tr.FitTo(summaryColumn + summaryRoom) // as on a terminal, where long texts are cut
	tr.Abbreviate("/home/u", "~")
	for _, tt := range tests {
		line := tr.Line(tt.entry)
		m := lineRE.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("%s: line %q does not have three columns", tt.name, line)
		}
		if want := string(tt.entry.From) + " → " + string(tt.entry.To); m[1] != want {
			t.Errorf("%s: direction %q, want %q", tt.name, m[1], want)
		}
		if m[2] != tt.label {
			t.Errorf("%s: label %q, want %q", tt.name, m[2], tt.label)
		}
		if tt.cut {
			if !strings.HasPrefix(m[3], tt.summary) || !strings.HasSuffix(m[3], "…") || len([]rune(m[3])) != summaryRoom {
				t.Errorf("%s: summary %q, want %q… cut at %d runes", tt.name, m[3], tt.summary, summaryRoom)
			}
		} else if m[3] != tt.summary {
			t.Errorf("%s: summary %q, want %q", tt.name, m[3], tt.summary)
		}
	}
	if b.Len() != 0 {
		t.Errorf("Line wrote %q", b.String())
	}

	got := tr.Stats()
	want := Stats{
		Messages: []Count{{Editor, Agent, 6}, {Agent, Editor, 11}},
		Permissions: []Permission{{
			ToolCallID: "call_1", Title: "git push", Kind: "execute",
			DecidedBy: Editor, Outcome: "selected", OptionID: "no", OptionKind: "reject_once",
		}},
		StopReasons: []string{"end_turn"},
		Errors:      1,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stats:\n%+v\nwant:\n%+v", got, want)
	}
	if got.Total() != 17 {
		t.Errorf("Total() = %d, want 17", got.Total())
	}
}

// TestTranscriptBrokerDecisions pins what later work relies on: an answer the
// broker sends on its own is labelled like any answer, carries its note, and
// is counted as decided by the broker.
func TestTranscriptBrokerDecisions(t *testing.T) {
	tr := NewTranscript(new(strings.Builder))
	tr.Line(Entry{From: Agent, To: Broker, Raw: []byte(`{"jsonrpc":"2.0","id":3,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"c9","title":"rm -rf /","kind":"execute"},"options":[{"optionId":"a","name":"A","kind":"allow_once"},{"optionId":"r","name":"R","kind":"reject_once"}]}}`)})
	line := tr.Line(Entry{From: Broker, To: Agent, Raw: []byte(`{"jsonrpc":"2.0","id":3,"result":{"outcome":{"outcome":"selected","optionId":"r"}}}`), Note: "denied by rule 1"})
	if want := `↳ session/request_permission  selected "r" (reject_once) — denied by rule 1`; !strings.HasSuffix(line, want) || !strings.HasPrefix(line, "broker → agent ") {
		t.Errorf("line %q, want broker → agent … %q", line, want)
	}
	tr.Line(Entry{From: Agent, To: Editor, Raw: []byte(`{"jsonrpc":"2.0","id":4,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"c10"},"options":[]}}`)})
	tr.Line(Entry{From: Editor, To: Agent, Raw: []byte(`{"jsonrpc":"2.0","id":4,"result":{"outcome":{"outcome":"cancelled"}}}`)})

	want := []Permission{
		{ToolCallID: "c9", Title: "rm -rf /", Kind: "execute", DecidedBy: Broker, Outcome: "selected", OptionID: "r", OptionKind: "reject_once"},
		{ToolCallID: "c10", DecidedBy: Editor, Outcome: "cancelled"},
	}
	if got := tr.Stats().Permissions; !reflect.DeepEqual(got, want) {
		t.Errorf("permissions:\n%+v\nwant:\n%+v", got, want)
	}
}

func TestTruncate(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 3, ""},
		{"abc", 3, "abc"},
		{"abcd", 3, "ab…"},
		{"日本語テキスト", 4, "日本語…"},
	} {
		if got := truncate(tt.s, tt.n); got != tt.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

// TestTranscriptFit: not fitted, nothing is cut; fitted to a terminal,
// every line fits it, a note that does not fit goes under the summary, and
// on a narrow terminal the summary goes under the label.
func TestTranscriptFit(t *testing.T) {
	long := strings.Repeat("word ", 40)
	request := Entry{From: Agent, To: Broker, Raw: []byte(`{"jsonrpc":"2.0","id":3,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"c9","title":"` + long + `","kind":"execute"},"options":[{"optionId":"r","name":"R","kind":"reject_once"}]}}`)}
	answer := Entry{From: Broker, To: Agent, Raw: []byte(`{"jsonrpc":"2.0","id":3,"result":{"outcome":{"outcome":"selected","optionId":"r"}}}`), Note: "denied by rule no-words: " + long}

	tr := NewTranscript(new(strings.Builder))
	if line := tr.Line(request); !strings.Contains(line, strings.TrimSpace(long)) || strings.Contains(line, "…") {
		t.Errorf("not fitted, the title was cut: %q", line)
	}
	if line := tr.Line(answer); strings.Contains(line, "\n") || !strings.HasSuffix(line, " — denied by rule no-words: "+strings.TrimSpace(long)) {
		t.Errorf("not fitted, the note was cut or wrapped: %q", line)
	}

	for _, width := range []int{120, 70} {
		tr := NewTranscript(new(strings.Builder))
		tr.FitTo(width)
		indent := strings.Repeat(" ", summaryColumn)
		if width-summaryColumn < minSummary {
			indent = "    "
		}
		lines := strings.Split(tr.Line(request)+"\n"+tr.Line(answer), "\n")
		for _, l := range lines {
			if n := len([]rune(l)); n > width {
				t.Errorf("width %d: line of %d runes: %q", width, n, l)
			}
		}
		var note []string
		for _, l := range lines {
			if rest, ok := strings.CutPrefix(l, indent); ok && !strings.HasPrefix(rest, " ") && (strings.HasPrefix(rest, "— ") || len(note) > 0) {
				note = append(note, rest)
			}
		}
		if got := strings.Join(note, " "); got != "— denied by rule no-words: "+strings.TrimSpace(long) {
			t.Errorf("width %d: the note, wrapped under the summary, reads %q", width, got)
		}
	}
}

// TestTranscriptColour: decisions are coloured only when asked for.
func TestTranscriptColour(t *testing.T) {
	request := Entry{From: Agent, To: Broker, Raw: []byte(`{"jsonrpc":"2.0","id":3,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"c9","title":"x"},"options":[{"optionId":"a","name":"A","kind":"allow_once"},{"optionId":"r","name":"R","kind":"reject_once"}]}}`)}
	allowed := Entry{From: Broker, To: Agent, Raw: []byte(`{"jsonrpc":"2.0","id":3,"result":{"outcome":{"outcome":"selected","optionId":"a"}}}`), Note: "allowed by rule 1"}
	for _, colour := range []bool{false, true} {
		tr := NewTranscript(new(strings.Builder))
		tr.Colour(colour)
		tr.Line(request)
		line := tr.Line(allowed)
		want := `selected "a" (allow_once) — allowed by rule 1`
		if colour {
			want = "\x1b[32m" + `selected "a" (allow_once)` + "\x1b[0m — \x1b[32mallowed\x1b[0m by rule 1"
		}
		if !strings.HasSuffix(line, want) {
			t.Errorf("Colour(%v): %q, want it to end %q", colour, line, want)
		}
	}
}
