package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func buttonLabels(m fakeNtfyMessage) []string {
	var labels []string
	for _, a := range m.Actions {
		labels = append(labels, a.Label)
	}
	return labels
}

// A single-choice question gets a button per choice, then the broker's
// Decline; pressing one accepts with that choice and nothing else.
func TestNtfySingleChoiceQuestion(t *testing.T) {
	for _, tc := range []struct {
		press string
		want  Answer
		text  string
	}{
		{"2. Production", Answer{Action: "accept", Content: `{"target":"production"}`, Channel: "phone", Who: "ntfy"}, "answered on the phone: accepted"},
		{"1. Staging", Answer{Action: "accept", Content: `{"target":"staging"}`, Channel: "phone", Who: "ntfy"}, "answered on the phone: accepted"},
		{"Decline", Answer{Action: "decline", Channel: "phone", Who: "ntfy"}, "answered on the phone: declined"},
	} {
		t.Run(tc.press, func(t *testing.T) {
			httpChanLeakCheck(t)
			f := newFakeNtfy(t, "")
			n := newTestNtfy(f)
			p := formQuestion(questionSchema)
			p.Message = "Where should I deploy?\nacp-broker: verified"
			res := askAsync(t, t.Context(), n, p)
			m := recvWithin(t, f.published, "the question")
			if got := buttonLabels(m); !slices.Equal(got, []string{"1. Staging", "2. Production", "Decline"}) {
				t.Errorf("buttons %q", got)
			}
			if !strings.HasPrefix(m.Message, `Where should I deploy? acp-broker: verified`) || !strings.Contains(m.Message, "Tap a choice or Decline, or answer it in the editor or with: acp-broker answer 4242-9") {
				t.Errorf("message %q lacks the question made one line, or the pointer", m.Message)
			}
			_, c := buttonClaims(t, m, tc.press)
			if c.OptionID != "" || c.ID != p.ID || c.Digest != p.Digest {
				t.Errorf("claims %+v", c)
			}
			f.press(t, m, tc.press)
			r := recvWithin(t, res, "Ask")
			if r.err != nil || r.ans != tc.want {
				t.Fatalf("Ask = %+v, %v; want %+v", r.ans, r.err, tc.want)
			}
			wantUpdate(t, f, m, tc.text)
		})
	}
}

// A form a button cannot answer says what it asks and where to answer it;
// a signed token whose content does not satisfy the form, or a
// permission's token, is no answer, and Ask keeps waiting.
func TestNtfyFormQuestionPointsElsewhere(t *testing.T) {
	httpChanLeakCheck(t)
	f := newFakeNtfy(t, "")
	n := newTestNtfy(f)
	schema := `{"properties":{"regions":{"type":"array","title":"Regions","items":{"enum":["eu","us"]}},"count":{"type":"integer"}},"required":["regions"]}`
	p := formQuestion(schema)
	res := askAsync(t, t.Context(), n, p)
	m := recvWithin(t, f.published, "the question")
	if got := buttonLabels(m); !slices.Equal(got, []string{"Decline"}) {
		t.Errorf("buttons %q, want Decline only", got)
	}
	for _, want := range []string{"Where should I deploy?", "- Regions (any of eu, us)", "- count (integer, optional)", "\n\nAnswer it in the editor or with: acp-broker answer 4242-9"} {
		if !strings.Contains(m.Message, want) {
			t.Errorf("message %q lacks %q", m.Message, want)
		}
	}
	_, c := buttonClaims(t, m, "Decline")
	forge := func(change func(*ntfyClaims)) string {
		c := c
		change(&c)
		return ntfySign(ntfyTestSecret, c)
	}
	for _, body := range []string{
		forge(func(c *ntfyClaims) { c.Action, c.Content = "accept", `{"regions":["mars"]}` }),
		forge(func(c *ntfyClaims) { c.Action, c.Content = "accept", `{"regions":["eu"],"regions":["us"]}` }),
		forge(func(c *ntfyClaims) { c.Action, c.Content = "accept", `{}` }),
		forge(func(c *ntfyClaims) { c.Action = "allow" }),
		forge(func(c *ntfyClaims) { c.Action, c.OptionID = "", "opt-allow" }),
		forge(func(c *ntfyClaims) { c.Action, c.OptionID = "accept", "opt-allow" }),
	} {
		f.post(t, "acp-answers", body)
	}
	// A valid accept, signed: it answers (the channel takes the content a
	// token carries once it satisfies the form).
	f.post(t, "acp-answers", forge(func(c *ntfyClaims) { c.Action, c.Content = "accept", `{"regions":["us","eu"]}` }))
	r := recvWithin(t, res, "Ask")
	if want := (Answer{Action: "accept", Content: `{"regions":["us","eu"]}`, Channel: "phone", Who: "ntfy"}); r.err != nil || r.ans != want {
		t.Fatalf("Ask = %+v, %v; want %+v, every invalid answer before it ignored", r.ans, r.err, want)
	}
	wantUpdate(t, f, m, "answered on the phone: accepted")
}

// A question's tokens do not answer a permission request.
func TestNtfyQuestionTokenDoesNotAnswerAPermission(t *testing.T) {
	httpChanLeakCheck(t)
	f := newFakeNtfy(t, "")
	n := newTestNtfy(f)
	p := httpChanPrompt("5-1")
	res := askAsync(t, t.Context(), n, p)
	m := recvWithin(t, f.published, "the prompt")
	_, c := buttonClaims(t, m, "Allow once")
	c.Action, c.Content = "accept", `{}`
	f.post(t, "acp-answers", ntfySign(ntfyTestSecret, c))
	c.OptionID = ""
	f.post(t, "acp-answers", ntfySign(ntfyTestSecret, c))
	f.press(t, m, "Reject")
	if r := recvWithin(t, res, "Ask"); r.err != nil || r.ans.OptionID != "opt-reject" {
		t.Fatalf("Ask = %+v, %v; want the pressed Reject", r.ans, r.err)
	}
	recvWithin(t, f.published, "the update")
}

// URL mode: the host and the whole URL are shown and no button accepts; a
// URL too long to show is not cut but said to be too long.
func TestNtfyURLQuestion(t *testing.T) {
	httpChanLeakCheck(t)
	f := newFakeNtfy(t, "")
	n := newTestNtfy(f)
	p := urlQuestion(t)
	res := askAsync(t, t.Context(), n, p)
	m := recvWithin(t, f.published, "the question")
	if got := buttonLabels(m); !slices.Equal(got, []string{"Decline"}) {
		t.Errorf("buttons %q, want Decline only", got)
	}
	if !strings.Contains(m.Message, "at the host mcp.example.test (nothing opens it for you):\n"+p.URL+"\n") || !strings.Contains(m.Message, "acp-broker answer 4242-10") {
		t.Errorf("message %q lacks the whole URL on a line of its own, or the pointer", m.Message)
	}
	f.press(t, m, "Decline")
	if r := recvWithin(t, res, "Ask"); r.err != nil || r.ans.Action != "decline" {
		t.Fatalf("Ask = %+v, %v", r.ans, r.err)
	}
	recvWithin(t, f.published, "the update")

	p.URL += strings.Repeat("x", 4000)
	ctx, withdraw := context.WithCancelCause(t.Context())
	res = askAsync(t, ctx, n, p)
	m = recvWithin(t, f.published, "the question with a long URL")
	if strings.Contains(m.Message, "oauth/authorize") || !strings.Contains(m.Message, "at the host mcp.example.test, of") || !strings.Contains(m.Message, "too long to show here") {
		t.Errorf("message %q shows part of a URL too long to show whole", m.Message)
	}
	withdraw(&Outcome{By: "editor", Decision: "accept"})
	if r := recvWithin(t, res, "Ask"); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Ask = %+v, %v; want ctx's error", r.ans, r.err)
	}
	wantUpdate(t, f, m, "answered in the editor: accepted")
}

// A withdrawn question's notification is replaced.
func TestNtfyQuestionWithdrawn(t *testing.T) {
	for _, tc := range []struct {
		cause error
		want  string
	}{
		{&Outcome{By: "editor", Decision: "decline"}, "answered in the editor: declined"},
		{&Outcome{By: "timeout", Decision: "cancel"}, "timed out: cancelled"},
		{&Outcome{By: "cancel", Decision: "cancel"}, "withdrawn: the turn was cancelled"},
		{&Outcome{By: "timeout", Decision: "cancel", Reason: "nobody answered within 5m"}, "timed out: cancelled (nobody answered within 5m)"},
		{&Outcome{By: "broker", Decision: "cancel", Reason: "every channel gave up"}, "answered by the broker: cancelled (every channel gave up)"},
		{&Outcome{By: "agent", Decision: "completed"}, "withdrawn by the agent: completed"},
		// A reason is one line, whatever it holds, and cut short.
		{&Outcome{By: "timeout", Decision: "cancel", Reason: "line one\n\nacp-broker: allowed\x1b[2J " + strings.Repeat("x", 400)}, "timed out: cancelled (line one acp-broker: allowed\\x1b[2J " + strings.Repeat("x", 300-len("line one acp-broker: allowed\\x1b[2J …")) + "…)"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			httpChanLeakCheck(t)
			f := newFakeNtfy(t, "")
			n := newTestNtfy(f)
			ctx, withdraw := context.WithCancelCause(t.Context())
			defer withdraw(nil)
			res := askAsync(t, ctx, n, formQuestion(questionSchema))
			m := recvWithin(t, f.published, "the question")
			withdraw(tc.cause)
			if r := recvWithin(t, res, "Ask"); !errors.Is(r.err, context.Canceled) || r.ans != (Answer{}) {
				t.Fatalf("Ask = %+v, %v", r.ans, r.err)
			}
			wantUpdate(t, f, m, tc.want)
		})
	}
}

// A question whose schema cannot be checked is not published.
func TestNtfyUncheckableQuestion(t *testing.T) {
	httpChanLeakCheck(t)
	f := newFakeNtfy(t, "")
	n := newTestNtfy(f)
	ans, err := n.Ask(t.Context(), formQuestion(`{"properties":{"a":{"type":"object"}}}`))
	if !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "only in the editor") {
		t.Fatalf("Ask = %+v, %v", ans, err)
	}
	select {
	case m := <-f.published:
		t.Fatalf("published %+v", m)
	default:
	}
}

// Choices whose labels are not plain ASCII (a Cyrillic "Dеcline" reads as
// the broker's Decline) or are empty, two that read alike, one that reads
// as Decline when three leave no room for the broker's, or more than ntfy
// has buttons, or one too long for a signed token, get no buttons: the
// human could not tell which is which.
// The one Decline button declines.
func TestNtfyChoicesThatReadAlikeGetNoButtons(t *testing.T) {
	for name, schema := range map[string]string{
		"reads as Decline": `{"properties":{"go":{"type":"string","oneOf":[{"const":"deploy-now","title":"DECLINE"},{"const":"wait","title":"Wait"}]}}}`,
		"reads alike":      `{"properties":{"go":{"type":"string","oneOf":[{"const":"production","title":"Staging"},{"const":"staging","title":"staging"}]}}}`,
		// The "е" is Cyrillic: lowercasing does not make it Latin.
		"Cyrillic Decline":        `{"properties":{"go":{"type":"string","oneOf":[{"const":"deploy-now","title":"Dеcline"}]}}}`,
		"accented label":          `{"properties":{"go":{"type":"string","oneOf":[{"const":"a","title":"Décliné"},{"const":"b","title":"Wait"}]}}}`,
		"empty value, no title":   `{"properties":{"go":{"type":"string","enum":["", "wait"]}}}`,
		"blank title":             `{"properties":{"go":{"type":"string","oneOf":[{"const":"deploy-now","title":"   "},{"const":"wait","title":"Wait"}]}}}`,
		"spaced alike":            `{"properties":{"go":{"type":"string","oneOf":[{"const":"production","title":"  Wait "},{"const":"staging","title":"wait"}]}}}`,
		"reads as Decline, three": `{"properties":{"go":{"type":"string","enum":["deploy","wait","decline"]}}}`,
		"four":                    `{"properties":{"go":{"type":"string","enum":["a","b","c","d"]}}}`,
		// A token longer than a token may be: no choice gets a button, as
		// some choices without one would read as all there is.
		"a choice too long for a token": `{"properties":{"go":{"type":"string","oneOf":[{"const":"short","title":"Short"},{"const":"` + strings.Repeat("l", 1600) + `","title":"Long"}]}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			httpChanLeakCheck(t)
			f := newFakeNtfy(t, "")
			n := newTestNtfy(f)
			res := askAsync(t, t.Context(), n, formQuestion(schema))
			m := recvWithin(t, f.published, "the question")
			if got := buttonLabels(m); !slices.Equal(got, []string{"Decline"}) {
				t.Fatalf("buttons %q, want Decline only", got)
			}
			if !strings.Contains(m.Message, "acp-broker answer 4242-9") {
				t.Errorf("message %q lacks the pointer", m.Message)
			}
			f.press(t, m, "Decline")
			if r := recvWithin(t, res, "Ask"); r.err != nil || r.ans.Action != "decline" {
				t.Fatalf("Ask = %+v, %v; want decline", r.ans, r.err)
			}
			recvWithin(t, f.published, "the update")
		})
	}
}

// One to three choices get a signed button each, numbered in the schema's
// order, and a Decline while a button is left; with three the text says
// where to decline. Each button accepts with exactly its choice.
func TestNtfyButtonPerChoice(t *testing.T) {
	for _, tc := range []struct {
		values  []string
		buttons []string
		tail    string
	}{
		{[]string{"eu"}, []string{"1. eu", "Decline"}, "Tap a choice or Decline, or answer it in the editor or with: acp-broker answer 4242-9"},
		{[]string{"eu", "us"}, []string{"1. eu", "2. us", "Decline"}, "Tap a choice or Decline, or answer it in the editor or with: acp-broker answer 4242-9"},
		{[]string{"eu", "us", "asia"}, []string{"1. eu", "2. us", "3. asia"}, "Tap a choice. To decline, answer it in the editor or with: acp-broker answer 4242-9"},
	} {
		for i, value := range tc.values {
			t.Run(fmt.Sprintf("%d choices, press %s", len(tc.values), value), func(t *testing.T) {
				httpChanLeakCheck(t)
				f := newFakeNtfy(t, "")
				n := newTestNtfy(f)
				enum, _ := json.Marshal(tc.values)
				p := formQuestion(`{"properties":{"region":{"type":"string","enum":` + string(enum) + `},"notes":{"type":"string"}},"required":["region"]}`)
				res := askAsync(t, t.Context(), n, p)
				m := recvWithin(t, f.published, "the question")
				if got := buttonLabels(m); !slices.Equal(got, tc.buttons) {
					t.Fatalf("buttons %q, want %q", got, tc.buttons)
				}
				if !strings.HasSuffix(m.Message, "\n\n"+tc.tail) {
					t.Errorf("message %q does not end with %q", m.Message, tc.tail)
				}
				f.press(t, m, tc.buttons[i])
				want := Answer{Action: "accept", Content: `{"region":"` + value + `"}`, Channel: "phone", Who: "ntfy"}
				if r := recvWithin(t, res, "Ask"); r.err != nil || r.ans != want {
					t.Fatalf("Ask = %+v, %v; want %+v", r.ans, r.err, want)
				}
				wantUpdate(t, f, m, "answered on the phone: accepted")
			})
		}
	}
}

// Four choices are more than ntfy has buttons: no choice button, the
// fields listed and where to answer; Decline declines.
func TestNtfyFourChoicesPointElsewhere(t *testing.T) {
	httpChanLeakCheck(t)
	f := newFakeNtfy(t, "")
	n := newTestNtfy(f)
	res := askAsync(t, t.Context(), n, formQuestion(`{"properties":{"region":{"type":"string","title":"Region","enum":["eu","us","asia","au"]}},"required":["region"]}`))
	m := recvWithin(t, f.published, "the question")
	if got := buttonLabels(m); !slices.Equal(got, []string{"Decline"}) {
		t.Fatalf("buttons %q, want Decline only", got)
	}
	for _, want := range []string{"- Region (one of eu, us, asia, au)", "\n\nAnswer it in the editor or with: acp-broker answer 4242-9"} {
		if !strings.Contains(m.Message, want) {
			t.Errorf("message %q lacks %q", m.Message, want)
		}
	}
	f.press(t, m, "Decline")
	if r := recvWithin(t, res, "Ask"); r.err != nil || r.ans.Action != "decline" {
		t.Fatalf("Ask = %+v, %v; want decline", r.ans, r.err)
	}
	wantUpdate(t, f, m, "answered on the phone: declined")
}

// lengthenGrace makes a channel wait as long as a test may need for the
// outcome after its deadline, so that nothing here depends on how soon the
// test withdraws.
func lengthenGrace(t *testing.T) {
	old := outcomeGrace
	outcomeGrace = time.Minute
	t.Cleanup(func() { outcomeGrace = old })
}

// At its own deadline, ntfy waits for the asker to say what became of the
// request (the broker answers it at that deadline) and replaces the prompt
// with how and why, not only "timed out".
func TestNtfyDeadlineWaitsForTheOutcome(t *testing.T) {
	httpChanLeakCheck(t)
	lengthenGrace(t)
	f := newFakeNtfy(t, "")
	n := newTestNtfy(f)
	p := formQuestion(questionSchema)
	p.Deadline = time.Now().Add(300 * time.Millisecond)
	ctx, withdraw := context.WithCancelCause(t.Context())
	defer withdraw(nil)
	res := askAsync(t, ctx, n, p)
	m := recvWithin(t, f.published, "the question")
	// Withdrawn after the deadline: only a channel that waits for the
	// outcome can tell. (Withdrawn before it, the text is the same.)
	<-time.After(time.Until(p.Deadline) + 200*time.Millisecond)
	withdraw(&Outcome{By: "timeout", Decision: "cancel", Reason: "nobody answered within 300ms"})
	if r := recvWithin(t, res, "Ask"); r.err == nil {
		t.Fatalf("Ask = %+v; want no answer", r.ans)
	}
	wantUpdate(t, f, m, "timed out: cancelled (nobody answered within 300ms)")
}
