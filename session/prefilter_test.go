package session

import (
	"encoding/json"
	"strings"
	"testing"
)

// A streamed chunk costs the tracker no allocation: it is not read beyond
// the bytes that show it concerns no tool call and no mode.
func TestTrackerSkipsAChunkWithoutAllocating(t *testing.T) {
	tr := newTracker()
	params := update("s1", `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`+strings.Repeat(`Here is \"a quote\" and a backslash \\ `, 30)+`"}}`)
	if n := testing.AllocsPerRun(100, func() { tr.update(params) }); n != 0 {
		t.Fatalf("the tracker allocated %v times per chunk", n)
	}
}

// Every spelling under which a peer may read what the tracker reads is seen
// as possibly concerning it.
func TestMayConcernTrackerSeesEverySpelling(t *testing.T) {
	for _, body := range []string{
		`{"sessionUpdate":"tool_call","toolCallId":"c1"}`,
		`{"sessionUpdate":"agent_message_chunk","TOOLCALLID":"c1"}`,
		`{"sessionUpdate":"agent_message_chunk","toolcallid":1}`,
		`{"sessionUpdate":"agent_message_chunk","\u0074oolCallId":"c1"}`,
		`{"sessionUpdate":"agent_message_chunk","toolCallI\u0064":"c1"}`,
		`{"sessionUpdate":"subagent_update","sessionId":"child"}`,
		`{"sessionUpdate":"current_mode_update","currentModeId":"plan"}`,
		`{"sessionUpdate":"config_option_update","configOptions":[]}`,
		`{"sessionUpdate":"agent_message_chunk","SessionUpdate":"current_mode_update"}`,
		`{"sessionUpdate":"curr\u0065nt_mode_update"}`,
		`"acp-broker-1"`,
		`"\u0061cp-broker-1"`,
	} {
		if !mayConcernTracker(update("s1", body)) {
			t.Errorf("mayConcernTracker(%s) = false", body)
		}
	}
	for _, body := range []string{
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"toolCall Id \"current_mode_update\\\" _update\""}}`,
		`{"sessionUpdate":"plan","entries":[{"content":"read the code","status":"pending"}]}`,
		`{"sessionUpdate":"usage_update","used":1}`,
	} {
		if mayConcernTracker(update("s1", body)) {
			t.Errorf("mayConcernTracker(%s) = true", body)
		}
	}
}

// FuzzMayConcernTracker checks that an update the tracker skips is one that
// reading in full changes nothing of: no session, tool call or mode.
func FuzzMayConcernTracker(f *testing.F) {
	for _, s := range []string{
		`{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}`,
		`{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"c1","status":"pending"}}`,
		`{"sessionId":"s1","update":{"sessionUpdate":"tool_call","TOOLCALLID":"c1"},"sessionId":"s2"}`,
		`{"sessionId":"s1","update":{"sessionUpdate":"current_mode_update","currentModeId":"plan"}}`,
		`{"sessionId":"s1","update":{"sessionUpdate":"subagent_update","sessionId":"c"}}`,
		`{"sessionId":"s1","update":"acp-broker-1"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, params string) {
		if mayConcernTracker([]byte(params)) {
			return
		}
		tr := newTracker()
		tr.agent.ProtocolVersion = json.RawMessage("2") // subagents are read
		tr.open(Info{ID: "s1", Opened: true})
		if tr.readUpdate(json.RawMessage(params)) {
			t.Fatalf("skipped an update about a tool call of the broker's: %s", params)
		}
		if sessions, toolCalls := tr.counts(); sessions != 1 || toolCalls != 0 || tr.takeModeChanges() != nil {
			t.Fatalf("skipped an update that changes what is tracked (%d sessions, %d tool calls): %s", sessions, toolCalls, params)
		}
	})
}
