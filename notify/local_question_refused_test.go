package notify

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// Every answer the socket refuses for a pending prompt (content that does
// not fit the form, an option to a question, another version's digest, an
// option a request does not offer) is reported to the prompt's
// WithRefusals, before the response, so that the request's audit line
// names it; an answer that comes after the request was answered is not the
// request's to report.
func TestLocalRefusalsAreReported(t *testing.T) {
	l, dir := localListen(t)
	var mu sync.Mutex
	var refused []string
	ctx := WithRefusals(t.Context(), func(why string) {
		mu.Lock()
		refused = append(refused, why)
		mu.Unlock()
	})
	q := localQuestion("16-1")
	done := localStartAsk(t, l, ctx, q)
	perm := localPrompt("16-2")
	permDone := localStartAsk(t, l, ctx, perm)
	for _, req := range []localRequest{
		{Op: "answer", ID: q.ID, Digest: q.Digest, Action: "accept", Content: json.RawMessage(`{"target":"moon"}`)},
		{Op: "answer", ID: q.ID, Digest: q.Digest, OptionID: "opt-allow"},
		{Op: "answer", ID: q.ID, Digest: Digest([]byte("another version")), Action: "decline"},
		{Op: "answer", ID: perm.ID, Digest: perm.Digest, OptionID: "opt-never-offered"},
	} {
		if resp, err := callLocal(l.Path(), req); err != nil || resp.OK {
			t.Fatalf("%+v: %+v, %v; want refused", req, resp, err)
		}
	}
	localStillWaiting(t, done)
	localStillWaiting(t, permDone)
	mu.Lock()
	got := append([]string(nil), refused...)
	mu.Unlock()
	want := []string{`"moon" is not one of`, "it takes an action", "digest mismatch", `option "opt-never-offered" was not offered`}
	if len(got) != len(want) {
		t.Fatalf("reported %q; want one for each of %q", got, want)
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("report %d = %q; want it to say %q", i, got[i], want[i])
		}
	}

	if err := AnswerQuestion(dir, mustFind(t, dir, q.ID), "decline", nil); err != nil {
		t.Fatal(err)
	}
	if r := execRecv(t, done, "Ask to return"); r.err != nil || r.ans.Action != "decline" {
		t.Fatalf("Ask = %+v, %v", r.ans, r.err)
	}
	if resp, err := callLocal(l.Path(), localRequest{Op: "answer", ID: q.ID, Digest: q.Digest, Action: "cancel"}); err != nil || resp.OK {
		t.Fatalf("a second answer: %+v, %v; want refused", resp, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(refused) != len(want) {
		t.Errorf("reported %q after the question was answered; want nothing more", refused[len(want):])
	}
}

func mustFind(t *testing.T, dir, id string) Pending {
	t.Helper()
	p, err := FindPending(dir, id)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A late answer to a question the broker ended itself is refused in the
// words the other channels use, the reason included.
func TestLocalLateAnswerSaysWhy(t *testing.T) {
	l, dir := localListen(t)
	ctx, withdraw := context.WithCancelCause(t.Context())
	q := localQuestion("18-1")
	done := localStartAsk(t, l, ctx, q)
	p := mustFind(t, dir, q.ID)
	withdraw(&Outcome{By: "timeout", Decision: "cancel", Reason: "nobody answered within 5m"})
	if r := execRecv(t, done, "Ask to return"); r.err != context.Canceled {
		t.Fatalf("Ask = %+v, %v; want context.Canceled", r.ans, r.err)
	}
	resp, err := callLocal(l.Path(), localRequest{Op: "answer", ID: p.ID, Digest: p.Digest, Action: "decline"})
	if want := "no longer pending: timed out: cancelled (nobody answered within 5m)"; err != nil || resp.OK || !strings.Contains(resp.Error, want) {
		t.Errorf("a late answer = %+v, %v; want refused with %q", resp, err, want)
	}
}
