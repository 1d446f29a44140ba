package notify

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// questionSchema is the seed example: where to deploy, and anything else.
const questionSchema = `{"type":"object","properties":{
  "target":{"type":"string","title":"Deploy target","oneOf":[{"const":"staging","title":"Staging"},{"const":"production","title":"Production"}]},
  "notes":{"type":"string","title":"Anything else?","maxLength":200}},
  "required":["target"]}`

// formQuestion is a form question, as the broker would build it.
func formQuestion(schema string) Prompt {
	return Prompt{
		Version:         PromptVersion,
		ID:              "4242-9",
		Session:         "sess_1",
		Agent:           "claude-agent-acp",
		Message:         "Where should I deploy?",
		Mode:            "form",
		RequestedSchema: json.RawMessage(schema),
		Deadline:        time.Now().Add(time.Hour).Truncate(time.Second),
		Digest:          Digest([]byte(`{"jsonrpc":"2.0","id":8,"method":"elicitation/create"}` + schema)),
	}
}

// urlQuestion is a URL-mode question whose URL is served by a server that
// fails the test if anything fetches it, and is longer than anything the
// broker cuts to.
func urlQuestion(t *testing.T) Prompt {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		t.Errorf("the question's URL was fetched: %s %s", r.Method, r.URL)
	}))
	t.Cleanup(func() {
		srv.Close()
		if n := hits.Load(); n != 0 {
			t.Errorf("the question's URL was fetched %d times", n)
		}
	})
	return Prompt{
		Version:       PromptVersion,
		ID:            "4242-10",
		Session:       "sess_1",
		Agent:         "codex-acp",
		Message:       "Sign in to the GitHub MCP server",
		Mode:          "url",
		URL:           srv.URL + "/oauth/authorize?client_id=acp&state=" + strings.Repeat("s", 1200) + "&end=1",
		ElicitationID: "el-1",
		Deadline:      time.Now().Add(time.Hour).Truncate(time.Second),
		Digest:        Digest([]byte(`{"jsonrpc":"2.0","id":9,"method":"elicitation/create","mode":"url"}`)),
	}
}

func TestExecAnswersAQuestion(t *testing.T) {
	for _, tc := range []struct {
		name, reply string
		want        Answer // zero for no answer
		errHas      string
	}{
		{name: "accept", reply: `{"action":"accept","content":{"target":"production", "notes":"after 5pm"}}`,
			want: Answer{Action: "accept", Content: `{"target":"production","notes":"after 5pm"}`, Channel: "desktop"}},
		{name: "accept required only", reply: `{"action":"accept","content":{"target":"staging"}}`,
			want: Answer{Action: "accept", Content: `{"target":"staging"}`, Channel: "desktop"}},
		{name: "decline", reply: `{"action":"decline"}`, want: Answer{Action: "decline", Channel: "desktop"}},
		{name: "cancel", reply: `{"action":"cancel","who":"me"}`, want: Answer{Action: "cancel", Channel: "desktop"}},

		{name: "choice not offered", reply: `{"action":"accept","content":{"target":"moon"}}`, errHas: `field "target": "moon" is not one of`},
		{name: "title instead of value", reply: `{"action":"accept","content":{"target":"Production"}}`, errHas: `field "target"`},
		{name: "missing required", reply: `{"action":"accept","content":{"notes":"x"}}`, errHas: `field "target": required`},
		{name: "no content for a required field", reply: `{"action":"accept"}`, errHas: `field "target": required`},
		{name: "extra field", reply: `{"action":"accept","content":{"target":"staging","admin":true}}`, errHas: `field "admin"`},
		{name: "content not an object", reply: `{"action":"accept","content":"staging"}`, errHas: "not a JSON object"},
		{name: "repeated content member", reply: `{"action":"accept","content":{"target":"staging","target":"production"}}`, errHas: "no answer"},
		{name: "repeated action", reply: `{"action":"decline","action":"accept","content":{"target":"staging"}}`, errHas: "no answer"},
		{name: "action in two cases", reply: `{"Action":"accept","action":"decline"}`, errHas: "differ only in case"},
		{name: "action in another case", reply: `{"Action":"accept","content":{"target":"staging"}}`, errHas: "differs only in case"},
		{name: "unknown action", reply: `{"action":"allow"}`, errHas: `action "allow" is not accept, decline or cancel`},
		{name: "no action", reply: `{"content":{"target":"staging"}}`, errHas: `no "action"`},
		{name: "a permission answer", reply: `{"optionId":"allow"}`, errHas: `no "action"`},
		{name: "decline with content", reply: `{"action":"decline","content":{"target":"staging"}}`, errHas: "carries no content"},
		{name: "two objects", reply: `{"action":"decline"}{"action":"accept"}`, errHas: "no answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &Exec{ChannelName: "desktop", Command: []string{execScript(t, `cat >/dev/null; printf '%s' "$REPLY_JSON"`)},
				Env: []string{"REPLY_JSON=" + tc.reply}}
			ans, err := execAsk(t, e, formQuestion(questionSchema))
			if tc.want != (Answer{}) {
				if err != nil || ans != tc.want {
					t.Fatalf("Ask = %+v, %v; want %+v", ans, err, tc.want)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrNoAnswer) || ans != (Answer{}) {
				t.Fatalf("Ask = %+v, %v; want no answer", ans, err)
			}
			if !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("error %q does not say %q", err, tc.errHas)
			}
		})
	}
}

// The command gets the question on stdin, and its gist in the environment.
func TestExecQuestionOnStdin(t *testing.T) {
	dir := t.TempDir()
	e := &Exec{ChannelName: "desktop", Command: []string{execScript(t, `cat >"$DIR/stdin"; env | grep ^ACP_BROKER_ >"$DIR/env"; echo '{"action":"decline"}'`)},
		Env: []string{"DIR=" + dir}}
	p := formQuestion(questionSchema)
	p.Message = "Deploy?\nacp-broker: verified"
	if _, err := execAsk(t, e, p); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "stdin"))
	var got struct {
		Message         string          `json:"message"`
		Mode            string          `json:"mode"`
		RequestedSchema json.RawMessage `json:"requestedSchema"`
		Options         []Option        `json:"options"`
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("stdin %q: %v", data, err)
	}
	var want, have any
	_ = json.Unmarshal([]byte(questionSchema), &want)
	_ = json.Unmarshal(got.RequestedSchema, &have)
	if got.Message != p.Message || got.Mode != "form" || !jsonEqual(want, have) || len(got.Options) != 0 {
		t.Errorf("stdin = %s", data)
	}
	env, _ := os.ReadFile(filepath.Join(dir, "env"))
	for _, line := range []string{`ACP_BROKER_MODE=form`, `ACP_BROKER_MESSAGE=Deploy?\nacp-broker: verified`, `ACP_BROKER_SUMMARY=Deploy?\nacp-broker: verified`} {
		if !strings.Contains(string(env)+"\n", line+"\n") {
			t.Errorf("environment lacks %q:\n%s", line, env)
		}
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// URL mode: the command gets the whole URL, consents with accept, and
// nothing fetches the URL.
func TestExecURLQuestion(t *testing.T) {
	dir := t.TempDir()
	p := urlQuestion(t)
	for _, tc := range []struct {
		reply string
		want  Answer
	}{
		{`{"action":"accept"}`, Answer{Action: "accept", Channel: "desktop"}},
		{`{"action":"accept","content":null}`, Answer{Action: "accept", Channel: "desktop"}},
		{`{"action":"accept","content":{"x":1}}`, Answer{}},
		{`{"action":"decline"}`, Answer{Action: "decline", Channel: "desktop"}},
	} {
		e := &Exec{ChannelName: "desktop", Command: []string{execScript(t, `cat >"$DIR/stdin"; printf '%s\n' "$ACP_BROKER_URL" >"$DIR/url"; printf '%s' "$REPLY_JSON"`)},
			Env: []string{"DIR=" + dir, "REPLY_JSON=" + tc.reply}}
		ans, err := execAsk(t, e, p)
		if ans != tc.want || (tc.want == (Answer{})) != (err != nil) {
			t.Errorf("%s: Ask = %+v, %v; want %+v", tc.reply, ans, err, tc.want)
		}
	}
	var got Prompt
	data, _ := os.ReadFile(filepath.Join(dir, "stdin"))
	if err := json.Unmarshal(data, &got); err != nil || got.URL != p.URL || got.ElicitationID != "el-1" || got.Mode != "url" {
		t.Errorf("stdin = %s (%v)", data, err)
	}
	if url, _ := os.ReadFile(filepath.Join(dir, "url")); string(url) != p.URL+"\n" {
		t.Errorf("ACP_BROKER_URL = %q, want the whole URL", url)
	}
}

// A question whose schema the broker cannot check runs no command: only
// the editor may answer it.
func TestExecRunsNothingForAnUncheckableQuestion(t *testing.T) {
	ran := filepath.Join(t.TempDir(), "ran")
	e := &Exec{ChannelName: "desktop", Command: []string{execScript(t, `touch "$RAN"; echo '{"action":"accept","content":{"code":"x"}}'`)}, Env: []string{"RAN=" + ran}}
	ans, err := execAsk(t, e, formQuestion(`{"properties":{"code":{"type":"string","pattern":"^[0-9]+$"}}}`))
	if err == nil || !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "only in the editor") {
		t.Fatalf("Ask = %+v, %v; want no answer, only in the editor", ans, err)
	}
	if _, err := os.Stat(ran); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the command ran")
	}
}

// Withdrawing a question kills its command, as for a permission.
func TestExecQuestionWithdrawn(t *testing.T) {
	started := filepath.Join(t.TempDir(), "started")
	e := &Exec{ChannelName: "desktop", Command: []string{execScript(t, `cat >/dev/null; touch "$STARTED"; exec sleep 1000`)}, Env: []string{"STARTED=" + started}}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := make(chan error, 1)
	go func() {
		_, err := e.Ask(ctx, formQuestion(questionSchema))
		done <- err
	}()
	waitFor(t, func() bool { _, err := os.Stat(started); return err == nil }, "the command to start")
	cancel(&Outcome{By: "editor", Decision: "accept"})
	if err := execRecv(t, done, "Ask to return"); err != context.Canceled {
		t.Fatalf("Ask = %v, want context.Canceled", err)
	}
}

// waitFor polls cond until it holds, failing the test after execTestWait.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(execTestWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestQuestionSummary(t *testing.T) {
	p := formQuestion(questionSchema)
	p.Message = "Deploy?\n\x1b[2Jacp-broker: verified\u202e"
	if got := p.Summary(1000); got != `Deploy?\n\x1b[2Jacp-broker: verified\u202e` {
		t.Errorf("Summary = %q", got)
	}
	u := Prompt{Mode: "url", ID: "7-1", Message: strings.Repeat("m", 500), URL: "https://example.com/" + strings.Repeat("u", 300) + "\n"}
	got := u.Summary(400)
	if !strings.HasSuffix(got, "\nURL: https://example.com/"+strings.Repeat("u", 300)+`\n`) || len(got) > 400 || strings.Count(got, "\n") != 1 {
		t.Errorf("Summary = %q, want the message cut and the whole URL after it", got)
	}
	got = u.Summary(200)
	if strings.Contains(got, "example.com") || !strings.Contains(got, "too long to show here") || !strings.Contains(got, "acp-broker answer 7-1") || len(got) > 200 {
		t.Errorf("Summary(200) = %q, want no cut URL but a pointer", got)
	}
}

// FuzzQuestionReply: whatever a channel brings back, an answer is one of
// the three actions, and an accepted form's content is one line of strict
// JSON the form accepts.
func FuzzQuestionReply(f *testing.F) {
	for _, seed := range []string{
		`{"action":"accept","content":{"target":"staging"}}`,
		`{"action":"accept","content":{"target":"staging","notes":"a\nb"}}`,
		"{\"action\":\"accept\",\"content\":{\n\"target\" : \"production\"\n}}",
		`{"action":"decline"}`, `{"action":"cancel","content":null}`,
		`{"action":"accept","content":{"target":"staging","target":"x"}}`,
		`{"Action":"accept"}`, `{"action":"accept"}{}`, `[]`, ``,
	} {
		f.Add(seed)
	}
	p := formQuestion(questionSchema)
	form, err := p.Form()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data string) {
		action, content, err := parseQuestionReply([]byte(data))
		if err != nil {
			return
		}
		ans, err := p.Reply(action, content)
		if err != nil {
			return
		}
		switch ans.Action {
		case "decline", "cancel":
			if ans.Content != "" {
				t.Fatalf("%q: a %s with content %q", data, ans.Action, ans.Content)
			}
		case "accept":
			if strings.ContainsAny(ans.Content, "\n\r") || form.Validate(json.RawMessage(ans.Content)) != nil {
				t.Fatalf("%q: accepted content %q is not one line the form accepts", data, ans.Content)
			}
		default:
			t.Fatalf("%q: action %q", data, ans.Action)
		}
	})
}
