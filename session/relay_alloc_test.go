package session

import (
	"fmt"
	"testing"

	"github.com/acp-broker/acp-broker/jsonrpc"
)

// The relay adds no allocation to what reading the envelope costs for the
// messages that pass through untouched, and asks the mode guard nothing for
// them.

var keySink string

func parseAllocs(frame []byte) float64 {
	return testing.AllocsPerRun(100, func() { _, _ = jsonrpc.Parse(frame) })
}

func TestRelayingAChunkAllocatesNothingBeyondParsing(t *testing.T) {
	r := newBenchRelay(t, "claude-agent-acp")
	frame := updateFrame(1 << 10)
	frame = frame[:len(frame)-1]
	relay := testing.AllocsPerRun(100, func() {
		m, _ := jsonrpc.Parse(frame)
		r.b.relayOne(m, frame)
	})
	if parse := parseAllocs(frame); relay > parse {
		t.Fatalf("relaying a chunk allocates %v times, parsing it %v", relay, parse)
	}
}

func TestRelayingAResponseMakesOneIDKey(t *testing.T) {
	r := newBenchRelay(t, "claude-agent-acp")
	frame := []byte(`{"jsonrpc":"2.0","id":12,"result":{"content":"the file's text"}}`)
	relay := testing.AllocsPerRun(100, func() {
		m, _ := jsonrpc.Parse(frame)
		r.b.relayOne(m, frame)
	})
	// The one key made is the id's, to forget the editor's request.
	parseAndKey := testing.AllocsPerRun(100, func() {
		m, _ := jsonrpc.Parse(frame)
		keySink = m.IDKey()
	})
	if relay > parseAndKey {
		t.Fatalf("relaying a response allocates %v times, parsing it and making its id's key %v", relay, parseAndKey)
	}
}

func TestOrdinaryEditorMessagesDoNotAskTheModeGuard(t *testing.T) {
	r := newBenchRelay(t, "claude-agent-acp")
	r.guard.watches.Store(0)
	for i := range 3 {
		r.roundTrip(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`, i),
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"stopReason":"end_turn"}}`, i))
	}
	if n := r.guard.watches.Load(); n != 0 {
		t.Fatalf("the mode guard was asked %d times for three prompts", n)
	}
	// A mode change is still judged.
	r.roundTrip(t, `{"jsonrpc":"2.0","id":"m","method":"session/set_mode","params":{"sessionId":"s1","modeId":"plan"}}`,
		`{"jsonrpc":"2.0","id":"m","result":{}}`)
	if r.guard.watches.Load() == 0 {
		t.Fatal("the mode guard was not asked about a mode change")
	}
}
