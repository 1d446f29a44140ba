package rules

import (
	"errors"
	"strings"
	"testing"
)

func TestAgentTableRejectsWithPositionAndHint(t *testing.T) {
	tests := []struct {
		name      string
		layer     Layer
		src       string
		where     string
		msg, hint string
	}{
		{"typo in modes", User, "[agent]\nmodes = \"kep\"\n", "rules.toml:2:1", `modes "kep" is not one of "govern", "keep"`, `did you mean "keep"?`},
		{"modes not a string", User, "[agent]\nmodes = false\n", "rules.toml:2:1", "modes must be a string", ""},
		{"asking mode allowed", User, "[agent]\nallow_modes = [\"auto\", \"default\"]\n", "rules.toml:2:1", `"default" is not a mode in which a known agent decides by itself`, "auto, bypassPermissions, dontAsk, agent, agent-full-access, yolo"},
		{"empty allow_modes", User, "[agent]\nallow_modes = []\n", "rules.toml:2:1", "allow_modes is an empty list", ""},
		{"unknown key", User, "[agent]\nallow_mode = [\"auto\"]\n", "rules.toml:2:1", `unknown key "allow_mode" in [agent]`, `did you mean "allow_modes"?`},
		{"not a table", User, "agent = \"keep\"\n", "rules.toml:1:1", "agent must be a table", ""},
		{"project file", Project, "\n[agent]\nallow_modes = [\"auto\"]\n", "rules.toml:2:1", "[agent] cannot be set in a project file", "user config"},
		{"project file keep", Project, "[agent]\nmodes = \"keep\"\n", "rules.toml:1:1", "[agent] cannot be set in a project file", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("rules.toml", tt.layer, tt.src)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a ConfigError", err)
			}
			if !strings.HasPrefix(ce.Error(), tt.where) || !strings.Contains(ce.Msg, tt.msg) || !strings.Contains(ce.Hint, tt.hint) {
				t.Errorf("got %q (hint %q), want %s: %q (hint %q)", ce.Error(), ce.Hint, tt.where, tt.msg, tt.hint)
			}
		})
	}
}

func TestAgentSettingsOnlyFromUserAndManaged(t *testing.T) {
	parse := func(layer Layer, src string) *File {
		f, err := Parse(string(layer)+".toml", layer, src)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	user := parse(User, "[agent]\nallow_modes = [\"auto\"]\n")
	p := NewPolicy([]*File{user}, "/home/u", nil)
	if _, ok := p.SwitchFrom(claudeName, "auto"); ok {
		t.Error("an allowed mode is switched")
	}
	if to, ok := p.SwitchFrom(claudeName, "bypassPermissions"); !ok || to != "default" {
		t.Errorf("bypassPermissions: %q %v, want default true", to, ok)
	}
	if _, ok := p.SwitchFrom("someone-else", "bypassPermissions"); ok {
		t.Error("an unknown agent is switched")
	}
	// A remembered or project file never sets them, even if it got there.
	forged := &File{Layer: Project, Trusted: true, AgentModes: "keep", AllowModes: []string{"yolo"}}
	p = NewPolicy([]*File{forged}, "/home/u", nil)
	if p.KeepsAgentModes() || p.ModeAllowed("yolo") {
		t.Error("a project file's [agent] applies")
	}
	// The managed layer's modes wins over the user's.
	managed := parse(Managed, "[agent]\nmodes = \"govern\"\n")
	keep := parse(User, "[agent]\nmodes = \"keep\"\n")
	if p = NewPolicy([]*File{managed, keep}, "/home/u", nil); p.KeepsAgentModes() {
		t.Error("the user's keep beats the managed govern")
	}
	if p = NewPolicy([]*File{keep}, "/home/u", nil); !p.KeepsAgentModes() {
		t.Error("keep does not apply")
	}
	if _, ok := p.SwitchFrom(geminiName, "yolo"); ok {
		t.Error("keep switches")
	}
}

const (
	claudeName = "@agentclientprotocol/claude-agent-acp"
	geminiName = "gemini-cli"
)

func TestUngovernedCapsAtAsk(t *testing.T) {
	p := NewPolicy(nil, "/home/u", nil)
	allow := Verdict{Decision: Allow, Source: "rule"}
	if v := p.Ungoverned(allow, claudeName, "auto"); v.Decision != Ask || v.Source != "agent mode" {
		t.Errorf("auto: %+v, want ask from agent mode", v)
	}
	if v := p.Ungoverned(allow, claudeName, AmbiguousMode); v.Decision != Ask {
		t.Errorf("ambiguous: %+v, want ask", v)
	}
	if v := p.Ungoverned(Verdict{Decision: Deny, Source: "rule"}, claudeName, "auto"); v.Decision != Deny {
		t.Errorf("a deny: %+v, want deny", v)
	}
	for _, mode := range []string{"default", "acceptEdits", "plan", ""} {
		if v := p.Ungoverned(allow, claudeName, mode); v.Decision != Allow {
			t.Errorf("%q: %+v, want allow", mode, v)
		}
	}
	if BrokerMode(claudeName, "acceptEdits") != "accept-edits" || BrokerMode(geminiName, "autoEdit") != "accept-edits" ||
		BrokerMode(geminiName, "plan") != "plan" || BrokerMode("other", "plan") != "" || BrokerMode(claudeName, "bypassPermissions") != "" {
		t.Error("BrokerMode maps modes wrongly")
	}
}
