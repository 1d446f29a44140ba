package permission

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/acp-broker/acp-broker/jsonrpc"
	"github.com/acp-broker/acp-broker/rules"
)

// editorOnly is a request put to the editor alone, which ends unanswered
// when its context does.
type editorOnly struct {
	ctx       context.Context
	cancelled chan struct{}
	forwarded bool
}

func (h *editorOnly) Context() context.Context { return h.ctx }
func (h *editorOnly) ForwardAnswering(func(*jsonrpc.Message) string) bool {
	h.forwarded = true
	return true
}
func (h *editorOnly) SelectOptionAs(string, func()) bool { return false }
func (h *editorOnly) RespondCancelledAs(func()) bool     { return false }
func (h *editorOnly) SessionCancelled() <-chan struct{}  { return h.cancelled }
func (h *editorOnly) SessionID() string                  { return "s1" }
func (h *editorOnly) Raw() []byte                        { return nil }

// A request asked in the editor costs one goroutine while it waits (the
// timeout, the turn's cancel and the call's end are watched together), and
// still gets its "unanswered" line when its call ends.
func TestAskWatchesARequestWithOneGoroutine(t *testing.T) {
	// A goroutine an earlier test left may end meanwhile, or the runtime
	// start one: a request asked in a few engines in turn must cost one
	// goroutine in one of them (one that costs more does in every one).
	var started []int
	for range 3 {
		n := askInTheEditor(t)
		if n == 1 {
			return
		}
		started = append(started, n)
	}
	t.Errorf("asking in the editor started %v goroutines, want 1", started)
}

// askInTheEditor asks a request in the editor and returns how many
// goroutines that started; it checks that the request still gets its
// "unanswered" line when its call ends.
func askInTheEditor(t *testing.T) int {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	audit, err := OpenAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{Audit: audit, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Asker: &Asker{Route: "editor", Timeout: time.Hour}}
	params, err := readPermissionParams(json.RawMessage(`{"sessionId":"s1","toolCall":{"toolCallId":"t1"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, end := context.WithCancel(context.Background())
	h := &editorOnly{ctx: ctx, cancelled: make(chan struct{})}
	before := runtime.NumGoroutine()
	e.ask(h, params, &rules.Request{}, Record{Session: "s1", Method: "session/request_permission"}, time.Now(), "default", "no rule decides it", nil)
	n := runtime.NumGoroutine() - before
	if !h.forwarded {
		t.Fatal("the request was not forwarded to the editor")
	}
	end()
	if err := e.Close(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), `"decision":"unanswered"`) {
		t.Fatalf("the audit log holds no unanswered line:\n%s", log)
	}
	return n
}

// TestNobodyAnswered: a timeout's reason gives its duration as people write
// it (the question's said 5m0s once).
func TestNobodyAnswered(t *testing.T) {
	for d, want := range map[time.Duration]string{5 * time.Minute: "nobody answered within 5m", 90 * time.Minute: "nobody answered within 1h30m", 300 * time.Millisecond: "nobody answered within 300ms"} {
		if got := nobodyAnswered(d); got != want {
			t.Errorf("nobodyAnswered(%v) = %q, want %q", d, got, want)
		}
	}
}
