package notify

import (
	"errors"
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
