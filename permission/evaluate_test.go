package permission

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/acp-broker/acp-broker/rules"
	"github.com/acp-broker/acp-broker/session"
)

const testOptions = `[{"optionId":"a","name":"Allow","kind":"allow_once"},{"optionId":"r","name":"Reject","kind":"reject_once"}]`

func TestReadPermissionParamsIsExact(t *testing.T) {
	tc := `{"toolCallId":"t","kind":"read"}`
	p, err := readPermissionParams(json.RawMessage(`{"sessionId":"s","toolCall":` + tc + `,"options":` + testOptions + `,"_meta":{}}`))
	if err != nil || p.SessionID != "s" || string(p.ToolCall) != tc || len(p.Options) != 2 || (p.Options[0].OptionID != "a" || p.Options[0].Name != "Allow" || p.Options[0].Kind != "allow_once") {
		t.Fatalf("readPermissionParams = %+v, %v", p, err)
	}
	for _, bad := range []string{
		`{"ToolCall":` + tc + `,"options":` + testOptions + `}`,
		`{"toolcall":` + tc + `}`,
		`{"toolCall":` + tc + `,"ToolCall":` + tc + `}`,
		`{"toolCall":` + tc + `,"toolCall":` + tc + `}`,
		`{"toolCall":` + tc + `,"Options":` + testOptions + `}`,
		`{"toolCall":` + tc + `,"options":[{"optionId":"a","Kind":"allow_once"}]}`,
		`{"toolCall":` + tc + `,"options":[{"optionID":"a","kind":"allow_once"}]}`,
		`{"toolCall":` + tc + `,"options":[{"optionId":"a","kind":1}]}`,
		`{"toolCall":` + tc + `,"options":{}}`,
		`{"toolCall":` + tc + `,"options":[{"optionId":"r","kind":"allow_always"},{"optionId":"r","kind":"reject_once"}]}`,
		`{"toolCall":` + tc + `,"options":[{"optionId":"r\u0031","kind":"allow_once"},{"optionId":"r1","kind":"reject_once"}]}`,
		`{"toolCall":` + tc + `,"sessionID":"s"}`,
		`{"toolCall":` + tc + `,"_Meta":{}}`,
		`{"toolCall":null}`,
		`{"toolCall":{"toolCallId":1}}`,
		`{"toolCall":{"toolCallId":""}}`,
		`{"toolCall":{"toolCallId":null}}`,
		`{"toolCall":"x"}`,
		`{}`,
		`[]`,
	} {
		if p, err := readPermissionParams(json.RawMessage(bad)); err == nil {
			t.Errorf("readPermissionParams(%s) = %+v, want an error", bad, p)
		}
	}
}

func TestReadWriteAndTerminalParamsAreExact(t *testing.T) {
	w, err := readWriteParams(json.RawMessage(`{"sessionId":"s","path":"/p","content":"x","_meta":{"k":1},"future":true}`))
	if err != nil || w.Path != "/p" {
		t.Fatalf("readWriteParams = %+v, %v", w, err)
	}
	for _, bad := range []string{
		`{"path":"/a","path":"/b"}`, `{"path":"/a","Path":"/b"}`, `{"Path":"/b"}`, `{"pATH":"/b"}`,
		`{"path":"/a","content":"x","Content":"y"}`, `{"path":5}`, `{"path":"/a","content":5}`,
		`{"path":"/a","_meta":{"x":1,"X":2}}`, `{"path":"/a","deep":[{"k":1,"k":2}]}`, `[]`,
	} {
		if _, err := readWriteParams(json.RawMessage(bad)); err == nil {
			t.Errorf("readWriteParams(%s) accepted it", bad)
		}
	}
	tp, err := readTerminalParams(json.RawMessage(`{"sessionId":"s","command":"ls","args":["-l"],"cwd":"/w","env":[{"name":"A","value":"1"}],"outputByteLimit":10}`))
	if err != nil || tp.Command != "ls" || len(tp.Args) != 1 || tp.Cwd != "/w" {
		t.Fatalf("readTerminalParams = %+v, %v", tp, err)
	}
	for _, bad := range []string{
		`{"command":"rm","command":"ls"}`, `{"command":"ls","Command":"rm"}`, `{"Command":"rm"}`,
		`{"command":"ls","Args":["-l"]}`, `{"command":"ls","args":"-l"}`, `{"command":"ls","CWD":"/"}`,
		`{"command":"ls","env":[{"name":"A","Name":"B","value":"1"}]}`, `{"command":"ls","env":[{"NAME":"LD_PRELOAD","value":"x"}]}`,
		`{"command":"ls","env":[{"name":"A","value":1}]}`, `{"command":"ls","env":{}}`, `{"command":"ls","Env":[]}`,
	} {
		if _, err := readTerminalParams(json.RawMessage(bad)); err == nil {
			t.Errorf("readTerminalParams(%s) accepted it", bad)
		}
	}
}

// TestEvaluateChoosesTheOptionOrAsks: allow needs allow_once, deny a reject
// option; otherwise, and for params it cannot read, the request is asked.
func TestEvaluateChoosesTheOptionOrAsks(t *testing.T) {
	policy, _, err := rules.Load(rules.LoadOptions{Extra: []string{writeRules(t, "[[rule]]\ndecision = \"allow\"\ncommand = \"git status\"\n[[rule]]\ndecision = \"deny\"\ncommand = \"rm *\"\n")}})
	if err != nil {
		t.Fatal(err)
	}
	allowed := `{"toolCallId":"t","kind":"execute","title":"git status","rawInput":{"command":"git status"}}`
	denied := `{"toolCallId":"t","kind":"execute","title":"rm x","rawInput":{"command":"rm x"}}`
	for _, c := range []struct {
		params, decision, option string
	}{
		{`{"toolCall":` + allowed + `,"options":` + testOptions + `}`, "allow", "a"},
		{`{"toolCall":` + denied + `,"options":` + testOptions + `}`, "deny", "r"},
		{`{"toolCall":` + denied + `,"options":[{"optionId":"n","kind":"reject_always"}]}`, "deny", "n"},
		{`{"toolCall":` + allowed + `,"options":[]}`, "ask", ""},
		{`{"toolCall":` + allowed + `}`, "ask", ""},
		{`{"toolCall":` + allowed + `,"options":[{"optionId":"aa","kind":"allow_always"}]}`, "ask", ""},
		{`{"toolCall":` + denied + `,"options":[{"optionId":"a","kind":"allow_once"}]}`, "ask", ""},
		{`{"ToolCall":` + allowed + `,"options":` + testOptions + `}`, "ask", ""},
		{`{"toolCall":` + allowed + `,"toolCall":` + allowed + `,"options":` + testOptions + `}`, "ask", ""},
		{`{"toolCall":{"toolCallId":"t","kind":"execute","rawInput":{"command":"git status","COMMAND":"ls"}},"options":` + testOptions + `}`, "ask", ""},
	} {
		ev := Evaluate(Inputs{Params: json.RawMessage(c.params), Session: session.Info{ID: "s", Cwd: t.TempDir(), Opened: true}, Policy: policy, Mode: EffectiveMode("", policy)})
		if string(ev.Decision) != c.decision || ev.Option.OptionID != c.option {
			t.Errorf("%s: %s %q (%s: %s), want %s %q", c.params, ev.Decision, ev.Option.OptionID, ev.Source, ev.Reason, c.decision, c.option)
		}
	}
	// A session the editor did not open: what denies still does, nothing
	// is allowed.
	for params, want := range map[string]string{
		`{"toolCall":` + allowed + `,"options":` + testOptions + `}`: "ask",
		`{"toolCall":` + denied + `,"options":` + testOptions + `}`:  "deny",
	} {
		ev := Evaluate(Inputs{Params: json.RawMessage(params), Session: session.Info{ID: "s", Cwd: t.TempDir()}, Policy: policy, Mode: EffectiveMode("", policy)})
		if string(ev.Decision) != want {
			t.Errorf("in a session the editor did not open, %s: %s (%s), want %s", params, ev.Decision, ev.Reason, want)
		}
	}
}

func writeRules(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rules.toml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestStringOfDecodesAsEncodingJSON: the options, session id and title of
// every permission request are decoded by stringOf, which skips
// encoding/json for a string with nothing escaped and must read every
// value exactly as encoding/json does.
func TestStringOfDecodesAsEncodingJSON(t *testing.T) {
	for _, raw := range []string{
		`"allow_once"`, `""`, `"Yes, and don't ask again"`, `"é ü 漢字 😀"`,
		`"a\"b"`, `"\u0041"`, `"tab\there"`, `"\ud800"`, "\"bad \xff utf-8\"", "\"nul \x00\"",
		`"trailing" `, ` "leading"`, `null`, `1`, `true`, `{}`, `[]`, `"`, `"unterminated`,
	} {
		var want string
		wantOK := len(raw) > 0 && raw[0] == '"' && json.Unmarshal([]byte(raw), &want) == nil
		got, ok := stringOf(json.RawMessage(raw))
		if ok != wantOK || got != want {
			t.Errorf("stringOf(%q) = %q, %v; encoding/json reads %q, %v", raw, got, ok, want, wantOK)
		}
	}
	// The point of it: one allocation, the string itself.
	plain := json.RawMessage(`"reject_once"`)
	if allocs := testing.AllocsPerRun(100, func() { _, _ = stringOf(plain) }); allocs > 1 {
		t.Errorf("stringOf allocates %.0f times for a plain string, want 1", allocs)
	}
}
