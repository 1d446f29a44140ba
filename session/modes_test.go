package session

import (
	"encoding/json"
	"testing"
)

func TestModeReport(t *testing.T) {
	tests := []struct {
		name, obj    string
		id, configID string
		found        bool
	}{
		{"session modes", `{"sessionId":"s","modes":{"currentModeId":"auto","availableModes":[]}}`, "auto", "", true},
		{"current_mode_update", `{"sessionUpdate":"current_mode_update","currentModeId":"plan"}`, "plan", "", true},
		{"config option v1", `{"configOptions":[{"id":"model","category":"model","currentValue":"opus"},{"id":"mode","category":"mode","currentValue":"agent"}]}`, "agent", "mode", true},
		{"config option v2", `{"configOptions":[{"configId":"m","category":"mode","currentValue":"yolo"}]}`, "yolo", "m", true},
		{"config option wins", `{"modes":{"currentModeId":"default"},"configOptions":[{"id":"mode","category":"mode","currentValue":"auto"}]}`, "auto", "mode", true},
		{"repeated member", `{"currentModeId":"default","currentModeId":"auto"}`, AmbiguousMode, "", true},
		{"case twin", `{"modes":{"currentModeId":"default","CurrentModeId":"auto"}}`, AmbiguousMode, "", true},
		{"not a string value", `{"configOptions":[{"id":"mode","category":"mode","currentValue":true}]}`, AmbiguousMode, "mode", true},
		{"unreadable mode", `{"modes":{"currentModeId":7}}`, AmbiguousMode, "", true},
		{"no mode", `{"sessionId":"s","configOptions":[{"id":"model","category":"model","currentValue":"x"}]}`, "", "", false},
		{"nothing", `{}`, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, found := modeReport(json.RawMessage(tt.obj))
			if m.id != tt.id || m.configID != tt.configID || found != tt.found {
				t.Errorf("got %q %q %v, want %q %q %v", m.id, m.configID, found, tt.id, tt.configID, tt.found)
			}
		})
	}
}

func TestTrackerFollowsModesWhereverTheyChange(t *testing.T) {
	tr := newTracker()
	tr.editorRequest(msg(t, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/p","mcpServers":[]}}`))
	tr.agentResponse(msg(t, `{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1","modes":{"currentModeId":"auto","availableModes":[]},"configOptions":[{"id":"mode","category":"mode","currentValue":"auto"}]}}`))
	check := func(want string) {
		t.Helper()
		if got := tr.info("s1").AgentMode; got != want {
			t.Fatalf("mode %q, want %q", got, want)
		}
	}
	check("auto")
	tr.editorRequest(msg(t, `{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{"sessionId":"s1","modeId":"default"}}`))
	check("auto") // not before the agent agrees
	tr.agentResponse(msg(t, `{"jsonrpc":"2.0","id":2,"result":{}}`))
	check("default")
	tr.editorRequest(msg(t, `{"jsonrpc":"2.0","id":3,"method":"session/set_mode","params":{"sessionId":"s1","modeId":"plan"}}`))
	tr.agentResponse(msg(t, `{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"no"}}`))
	check("default") // refused: unchanged
	tr.update(json.RawMessage(`{"sessionId":"s1","update":{"sessionUpdate":"current_mode_update","currentModeId":"acceptEdits"}}`))
	check("acceptEdits")
	tr.editorRequest(msg(t, `{"jsonrpc":"2.0","id":4,"method":"session/set_config_option","params":{"sessionId":"s1","configId":"mode","value":"plan"}}`))
	tr.agentResponse(msg(t, `{"jsonrpc":"2.0","id":4,"result":{}}`))
	check("plan")
	tr.editorRequest(msg(t, `{"jsonrpc":"2.0","id":5,"method":"session/set_config_option","params":{"sessionId":"s1","configId":"model","value":"opus"}}`))
	tr.agentResponse(msg(t, `{"jsonrpc":"2.0","id":5,"result":{}}`))
	check("plan") // another option
	tr.update(json.RawMessage(`{"sessionId":"s1","update":{"sessionUpdate":"config_option_update","configOptions":[{"id":"mode","category":"mode","currentValue":"bypassPermissions"}]}}`))
	check("bypassPermissions")
	if changed := tr.takeModeChanges(); len(changed) == 0 || changed[len(changed)-1] != "s1" {
		t.Errorf("changes %q do not name s1", changed)
	}
	if changed := tr.takeModeChanges(); changed != nil {
		t.Errorf("changes %q taken twice", changed)
	}
}
