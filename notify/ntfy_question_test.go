package notify

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

func buttonLabels(m fakeNtfyMessage) []string {
	var labels []string
	for _, a := range m.Actions {
		labels = append(labels, a.Label)
	}
	return labels
}

// A single-choice question gets a button per choice; pressing one accepts
// with that choice and nothing else.
func TestNtfySingleChoiceQuestion(t *testing.T) {
	for _, tc := range []struct {
		press string
		want  Answer
		text  string
	}{
		{"Production", Answer{Action: "accept", Content: `{"target":"production"}`, Channel: "phone", Who: "ntfy"}, "answered on the phone: accepted"},
		{"Staging", Answer{Action: "accept", Content: `{"target":"staging"}`, Channel: "phone", Who: "ntfy"}, "answered on the phone: accepted"},
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
			if got := buttonLabels(m); !slices.Equal(got, []string{"Staging", "Production", "Decline"}) {
				t.Errorf("buttons %q", got)
			}
			if !strings.HasPrefix(m.Message, `Where should I deploy?\nacp-broker: verified`) || !strings.Contains(m.Message, "acp-broker answer 4242-9") {
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

// URL mode: the whole URL is shown, no button accepts, and nothing fetches
// it; a URL too long to show is not cut but said to be too long.
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
	if !strings.Contains(m.Message, "\n"+p.URL+"\n") || !strings.Contains(m.Message, "acp-broker answer 4242-10") {
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
	if strings.Contains(m.Message, "oauth/authorize") || !strings.Contains(m.Message, "too long to show here") {
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

// A choice whose label reads as the broker's Decline, or two choices that
// read alike, get no buttons: the human could not tell which is which. The
// one Decline button declines.
func TestNtfyChoicesThatReadAlikeGetNoButtons(t *testing.T) {
	for name, schema := range map[string]string{
		"reads as Decline": `{"properties":{"go":{"type":"string","oneOf":[{"const":"deploy-now","title":"DECLINE"},{"const":"wait","title":"Wait"}]}}}`,
		"reads alike":      `{"properties":{"go":{"type":"string","oneOf":[{"const":"production","title":"Staging"},{"const":"staging","title":"staging"}]}}}`,
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
