package permission

import (
	"testing"

	"github.com/acp-broker/acp-broker/rules"
	"github.com/acp-broker/acp-broker/session"
)

// The tracker and the rules name an ambiguously reported mode alike.
func TestAmbiguousModeIsOneValue(t *testing.T) {
	if session.AmbiguousMode != rules.AmbiguousMode {
		t.Fatalf("session.AmbiguousMode %q != rules.AmbiguousMode %q", session.AmbiguousMode, rules.AmbiguousMode)
	}
}

func TestSessionMode(t *testing.T) {
	config := &rules.Policy{Mode: "dont-ask"}
	claude := func(mode string) session.Info {
		return session.Info{Agent: "@agentclientprotocol/claude-agent-acp", AgentMode: mode}
	}
	tests := []struct {
		override string
		p        *rules.Policy
		s        session.Info
		want     string
	}{
		{"", nil, claude("acceptEdits"), "accept-edits"},
		{"", config, claude("plan"), "plan"},
		{"", config, claude("default"), "dont-ask"},
		{"", config, claude("auto"), "dont-ask"},
		{"", nil, claude(""), "default"},
		{"bypass", config, claude("plan"), "bypass"},
		{"", nil, session.Info{Agent: "other", AgentMode: "plan"}, "default"},
		{"", nil, session.Info{Agent: "gemini-cli", AgentMode: "autoEdit"}, "accept-edits"},
	}
	for _, tt := range tests {
		if got := SessionMode(tt.override, tt.p, tt.s); got != tt.want {
			t.Errorf("SessionMode(%q, %v, %s/%s) = %q, want %q", tt.override, tt.p != nil, tt.s.Agent, tt.s.AgentMode, got, tt.want)
		}
	}
}
