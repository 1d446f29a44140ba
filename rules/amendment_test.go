package rules

import (
	"strings"
	"testing"
)

func TestDeriveWithin(t *testing.T) {
	cases := []struct {
		command string
		prefix  []string
		want    string // the entries' commands joined by "; ", or "" for none
	}{
		{"git push origin main", []string{"git"}, "git push *"},
		{"git push origin main", []string{"git", "push"}, "git push *"},
		{"git push origin main", []string{"git", "push", "origin"}, "git push origin main"},
		{"cp README.md README.bak", []string{"cp"}, "cp README.md README.bak"},
		{"go vet ./... && make deploy", []string{"go", "vet"}, "go vet *"},
		{"make deploy", []string{"rm", "-rf"}, ""},
		{"git status", []string{"git", "status", "--short"}, ""},
		{"git push $(x)", []string{"git"}, ""},
		{"git push origin main", nil, ""},
	}
	for _, c := range cases {
		sc := ParseShell(c.command)
		req := &Request{Kind: "execute", Script: &sc}
		entries, why := DeriveWithin(req, Allow, c.prefix)
		var got []string
		for _, e := range entries {
			got = append(got, e.Command)
		}
		if strings.Join(got, "; ") != c.want || (len(entries) == 0 && why == "") {
			t.Errorf("%q within %q: %q (%s), want %q", c.command, c.prefix, got, why, c.want)
		}
	}
}
