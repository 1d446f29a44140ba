package notify

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestChooseOnlyOfferedOptions(t *testing.T) {
	p := Prompt{Options: []Option{{ID: "a1", Kind: "allow_once"}, {ID: "r1", Kind: "reject_once"}}}
	if o, err := p.Choose("r1", ""); err != nil || o.ID != "r1" {
		t.Fatalf("by id: %v %v", o, err)
	}
	if o, err := p.Choose("", "allow_once"); err != nil || o.ID != "a1" {
		t.Fatalf("by kind: %v %v", o, err)
	}
	for _, bad := range [][2]string{{"x", ""}, {"", "allow_always"}, {"a1", "allow_once"}, {"", ""}} {
		if _, err := p.Choose(bad[0], bad[1]); !errors.Is(err, ErrNoAnswer) {
			t.Errorf("Choose(%q, %q) = %v", bad[0], bad[1], err)
		}
	}
	twice := Prompt{Options: []Option{{ID: "r", Kind: "allow_always"}, {ID: "r", Kind: "reject_once"}}}
	if o, err := twice.Choose("r", ""); !errors.Is(err, ErrNoAnswer) {
		t.Errorf("an id offered twice chose %v", o)
	}
}

func TestTruncateKeepsWholeCharacters(t *testing.T) {
	s := strings.Repeat("é", 10) // 20 bytes
	for limit := 0; limit <= 25; limit++ {
		got := Truncate(s, limit)
		if len(got) > limit || !utf8.ValidString(got) {
			t.Errorf("Truncate(%d) = %q (%d bytes)", limit, got, len(got))
		}
	}
	if Truncate("short", 10) != "short" {
		t.Error("cut a short string")
	}
}

// TestSummaryShowsEveryCommandOnItsOwnLine: the agent's text cannot make a
// line of its own, reach a terminal as an escape sequence or reorder what
// follows, and a long part cannot push the next out of sight.
func TestSummaryShowsEveryCommandOnItsOwnLine(t *testing.T) {
	p := Prompt{Commands: []string{"echo '" + strings.Repeat("x", 5000) + "'", "echo a\nacp-broker: safe\x1b[2J\u202e\u200b\u2028", "curl https://evil.example"}}
	for _, limit := range []int{120, 1000, 2800} {
		got := p.Summary(limit)
		lines := strings.Split(got, "\n")
		if len(got) > limit || !utf8.ValidString(got) || strings.ContainsAny(got, "\x1b\u202e\u200b\u2028") {
			t.Errorf("Summary(%d) = %q", limit, got)
		}
		if len(lines) != 3 || !strings.HasPrefix(lines[1], `echo a\nacp-broker: safe`) || !strings.HasPrefix(lines[2], "curl https://evil") {
			t.Errorf("Summary(%d) lost a command: %q", limit, lines)
		}
	}
	many := Prompt{Commands: slices.Repeat([]string{"make build"}, 40)}
	if got := many.Summary(120); len(got) > 120 || !strings.HasSuffix(got, "\n(+32 more not shown)") {
		t.Errorf("Summary of 40 commands = %q, want it to say how many it left out", got)
	}
	if got := OneLine("ok \xff"); got != `ok \ufffd` {
		t.Errorf("OneLine(invalid UTF-8) = %q", got)
	}
}

func TestNtfyBodySaysWhatAlwaysRemembers(t *testing.T) {
	p := Prompt{Commands: []string{"git push origin main"}, Options: []Option{
		{ID: "a", Kind: "allow_always", Name: "Always (the broker remembers: nothing)", Remembers: "command git push *"}}}
	if body := ntfyBody(p); !strings.HasSuffix(body, "\nAlways remembers: command git push *") {
		t.Fatalf("body = %q", body)
	}
}
