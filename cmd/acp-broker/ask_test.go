package main

import "testing"

func TestPrintableDefusesTerminalEscapes(t *testing.T) {
	if got := printable("git push\x1b]0;pwned\x07\x1b[2J ok\u0085é"); got != "git push?]0;pwned??[2J ok?é" {
		t.Fatalf("printable = %q", got)
	}
}
