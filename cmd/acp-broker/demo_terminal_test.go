//go:build linux

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// TestDemoOnATerminal runs acp-broker demo with its stdout on a pseudo-
// terminal, as a user at a terminal does: every line fits the terminal's
// width, the decisions are coloured, and NO_COLOR turns the colours off
// (and nothing else).
func TestDemoOnATerminal(t *testing.T) {
	self := demoSelf(t)
	ansi := regexp.MustCompile("\x1b\\[[0-9;]*m")
	for _, tt := range []struct {
		name    string
		cols    int
		noColor bool
		layout  *regexp.Regexp // a line the layout for this width has
	}{
		{"80 columns, in colour", 80, false, regexp.MustCompile(`(?m)^broker → agent   ↳ session/request_permission\n    \S`)},
		{"80 columns, NO_COLOR", 80, true, regexp.MustCompile(`(?m)^broker → agent   ↳ session/request_permission\n    selected "reject" \(reject_once\)$`)},
		{"120 columns, in colour", 120, false, regexp.MustCompile(`(?m)^broker → agent   ↳ session/request_permission  \S`)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := runOnTerminal(t, self, tt.cols, tt.noColor, "demo")
			plain := ansi.ReplaceAllString(out, "")
			for i, line := range strings.Split(plain, "\n") {
				if n := utf8.RuneCountInString(line); n > tt.cols {
					t.Errorf("line %d has %d columns, more than the terminal's %d:\n%s", i+1, n, tt.cols, line)
				}
			}
			if !strings.Contains(plain, "…") {
				t.Errorf("nothing was cut to fit %d columns:\n%s", tt.cols, plain)
			}
			if !tt.layout.MatchString(plain) {
				t.Errorf("no line matches %s:\n%s", tt.layout, plain)
			}
			green, red := strings.Contains(out, "\x1b[32m"), strings.Contains(out, "\x1b[31m")
			switch {
			case tt.noColor && ansi.MatchString(out):
				t.Errorf("NO_COLOR is set, but the output has colour escapes:\n%q", out)
			case !tt.noColor && (!green || !red):
				t.Errorf("the decisions are not coloured (green %v, red %v):\n%q", green, red, out)
			}
			if !strings.Contains(plain, "The broker exited with status 0.") || !strings.Contains(plain, "Next steps") {
				t.Errorf("the demo did not run to its end:\n%s", plain)
			}
		})
	}
}

// runOnTerminal runs self with args, its stdout on a new pseudo-terminal of
// cols columns (stdin and stderr are not), and returns what it printed
// there, with the terminal's \r\n as \n. Its TERM is xterm-256color,
// whatever the test's is; with noColor, NO_COLOR=1 is in its environment;
// without, no NO_COLOR at all.
func runOnTerminal(t *testing.T, self string, cols int, noColor bool, args ...string) string {
	t.Helper()
	master, slave := openPTY(t, cols)
	cmd := exec.Command(self, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NO_COLOR=") && !strings.HasPrefix(kv, "TERM=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "TERM=xterm-256color")
	if noColor {
		cmd.Env = append(cmd.Env, "NO_COLOR=1")
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = slave, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close() // the child has it; reads end (EIO) once it exits
	output := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(master) // ends with EIO when the last writer is gone
		output <- b
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("acp-broker %s: %v\nstderr:\n%s", strings.Join(args, " "), err, &stderr)
		}
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("acp-broker %s did not finish", strings.Join(args, " "))
	}
	out := <-output
	master.Close()
	if stderr.Len() != 0 {
		t.Errorf("stderr:\n%s", &stderr)
	}
	return strings.ReplaceAll(string(out), "\r\n", "\n")
}

// openPTY opens a new pseudo-terminal cols columns wide and returns its
// two ends.
func openPTY(t *testing.T, cols int) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening a pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlocking the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("naming the pseudo-terminal: %v", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening the pseudo-terminal's other end: %v", err)
	}
	t.Cleanup(func() { slave.Close() })
	if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: uint16(cols)}); err != nil {
		t.Fatalf("setting the pseudo-terminal's size: %v", err)
	}
	return master, slave
}

// TestDemoStyleOffATerminal: output that is not a terminal is neither
// fitted nor coloured, whatever NO_COLOR says.
func TestDemoStyleOffATerminal(t *testing.T) {
	f, err := os.Create(t.TempDir() + "/out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, w := range []io.Writer{f, new(bytes.Buffer)} {
		if width, colour := demoStyle(w, func(string) string { return "" }); width != 0 || colour {
			t.Errorf("demoStyle(%T) = %d, %v; want 0, false", w, width, colour)
		}
	}
}

// TestDemoStyleOnATerminal: on a terminal the demo is fitted to its width
// and coloured, but not coloured when NO_COLOR is set or TERM is "dumb".
func TestDemoStyleOnATerminal(t *testing.T) {
	_, slave := openPTY(t, 80)
	for _, tt := range []struct {
		env    map[string]string
		colour bool
	}{
		{map[string]string{"TERM": "xterm-256color"}, true},
		{map[string]string{}, true},
		{map[string]string{"TERM": "xterm-256color", "NO_COLOR": "1"}, false},
		{map[string]string{"TERM": "dumb"}, false},
	} {
		width, colour := demoStyle(slave, func(name string) string { return tt.env[name] })
		if width != 80 || colour != tt.colour {
			t.Errorf("demoStyle(a terminal of 80 columns) with %v = %d, %v; want 80, %v", tt.env, width, colour, tt.colour)
		}
	}
}
