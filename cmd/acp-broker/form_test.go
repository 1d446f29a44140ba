package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// terminal is the far side of a pseudo-terminal: what the program drew on
// it, and the keys to type.
type terminal struct {
	ptmx *os.File
	mu   sync.Mutex
	seen bytes.Buffer
	mark int           // where in seen, its escapes left out, the next waitFor looks
	more chan struct{} // closed and replaced when something was drawn
}

// read copies what the program draws, and answers the terminal's queries
// (background colour, device attributes, cursor position) as a terminal
// would, so that nothing waits for a reply that never comes.
func (term *terminal) read() {
	buf := make([]byte, 4096)
	for {
		n, err := term.ptmx.Read(buf)
		term.mu.Lock()
		term.seen.Write(buf[:n])
		for query, reply := range map[string]string{
			"\x1b]11;?": "\x1b]11;rgb:0000/0000/0000\x1b\\",
			"\x1b[c":    "\x1b[?62c",
			"\x1b[6n":   "\x1b[1;1R",
		} {
			for range bytes.Count(buf[:n], []byte(query)) {
				term.ptmx.WriteString(reply)
			}
		}
		close(term.more)
		term.more = make(chan struct{})
		term.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// escapes are the terminal's control sequences, which waitFor reads past.
var escapes = regexp.MustCompile("\x1b\\[[0-9;?<=>]*[ -/]*[@-~]|\x1b\\][^\x07\x1b]*(?:\x07|\x1b\\\\)|\x1b[()][A-Z0-9]|\x1b[=>78]")

// waitFor waits until the program has drawn text, its control sequences
// left out, after what the last waitFor found.
func (term *terminal) waitFor(t *testing.T, text string) {
	t.Helper()
	timeout := time.After(testWait)
	for {
		term.mu.Lock()
		shown := escapes.ReplaceAllString(term.seen.String(), "")
		i := strings.Index(shown[term.mark:], text)
		if i >= 0 {
			term.mark += i + len(text)
		}
		more := term.more
		term.mu.Unlock()
		if i >= 0 {
			return
		}
		select {
		case <-more:
		case <-timeout:
			t.Fatalf("the form never showed %q; after what was found it showed:\n%q", text, shown[term.mark:])
		}
	}
}

func (term *terminal) typeKeys(t *testing.T, keys string) {
	t.Helper()
	if _, err := term.ptmx.WriteString(keys); err != nil {
		t.Fatal(err)
	}
}

// formQuestion is the question the terminal tests answer.
const formQuestion = `[{"version":1,"id":"12-1","session":"sess_1","agent":"claude-agent-acp","options":null,"message":"Deploy where?","mode":"form",
 "requestedSchema":{"type":"object","properties":{
  "target":{"type":"string","title":"Deploy target","oneOf":[{"const":"staging","title":"Staging"},{"const":"production","title":"Production"}]},
  "notes":{"type":"string","title":"Anything else?"},
  "regions":{"type":"array","title":"Regions","items":{"enum":["eu","us","asia"]},"minItems":1},
  "notify":{"type":"boolean","title":"Tell the team"}},"required":["target","notify"]},
 "digest":"d12"}]`

// defaultsQuestion is a question whose every field has a default.
const defaultsQuestion = `[{"version":1,"id":"12-1","session":"sess_1","agent":"claude-agent-acp","options":null,"message":"Deploy where?","mode":"form",
 "requestedSchema":{"type":"object","properties":{
  "target":{"type":"string","title":"Deploy target","oneOf":[{"const":"staging","title":"Staging"},{"const":"production","title":"Production"}],"default":"production"},
  "notes":{"type":"string","title":"Anything else?","default":"after 5pm"},
  "replicas":{"type":"integer","title":"Replicas","minimum":1,"default":3},
  "regions":{"type":"array","title":"Regions","items":{"enum":["eu","us","asia"]},"default":["us","asia"]},
  "notify":{"type":"boolean","title":"Tell the team","default":true},
  "dry":{"type":"boolean","title":"Dry run","default":false}},"required":["target","notify"]},
 "digest":"d12"}]`

// answerOnTerminal starts a fake broker asking question (a prompts file's
// JSON) and runs `acp-broker answer 12-1` on a pseudo-terminal with the
// TERM given. The returned function waits for it to exit and returns its
// stdout and the answer the broker got.
func answerOnTerminal(t *testing.T, termName, question string) (*terminal, func() (stdout string, action, content string)) {
	t.Helper()
	work := t.TempDir()
	run := filepath.Join(work, "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	prompts := filepath.Join(work, "prompts.json")
	if err := os.WriteFile(prompts, []byte(question), 0o600); err != nil {
		t.Fatal(err)
	}
	broker, err := startFakeBroker(run, prompts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(broker.stop)

	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 50, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	// acp-broker is this test binary, put in PATH by testscript.Main.
	cmd := exec.Command("acp-broker", "answer", "12-1")
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+run, "TERM="+termName)
	var stdout bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, &stdout, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	term := &terminal{ptmx: ptmx, more: make(chan struct{})}
	go term.read()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	return term, func() (string, string, string) {
		t.Helper()
		select {
		case err := <-exited:
			if err != nil {
				term.mu.Lock()
				t.Fatalf("acp-broker answer: %v\nstdout %q\nterminal %q", err, stdout.String(), term.seen.String())
			}
		case <-time.After(testWait):
			term.mu.Lock()
			t.Fatalf("acp-broker answer did not finish; the terminal shows:\n%q", term.seen.String())
		}
		answers, err := broker.wait()
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Action  string
			Content json.RawMessage
		}
		if err := json.Unmarshal([]byte(answers[0]), &got); err != nil {
			t.Fatalf("answer %q: %v", answers[0], err)
		}
		return stdout.String(), got.Action, string(got.Content)
	}
}

// On a terminal, `acp-broker answer ID` asks with a form: the action, then
// each field, a list for choices (several for a multi-select), a line of
// text, yes or no; what it sends is what was picked.
func TestAnswerFormOnATerminal(t *testing.T) {
	term, wait := answerOnTerminal(t, "xterm-256color", formQuestion)
	// A field's keys are typed once it has the focus: its title drawn
	// with the focused field's bar.
	term.waitFor(t, "question 12-1 from claude-agent-acp")
	term.waitFor(t, "┃ Deploy where?")
	term.typeKeys(t, "\r") // Answer
	term.waitFor(t, "┃ Deploy target")
	term.typeKeys(t, "\x1b[B\r") // down to Production
	term.waitFor(t, "┃ Anything else?")
	term.typeKeys(t, "after 5pm\r")
	term.waitFor(t, "┃ Regions")
	term.typeKeys(t, "x\x1b[B\x1b[Bx\r") // eu and asia
	term.waitFor(t, "┃ Tell the team")
	term.typeKeys(t, "y") // yes, and the form is done

	stdout, action, content := wait()
	if stdout != "answered 12-1 (claude-agent-acp): accept\n" {
		t.Errorf("stdout = %q", stdout)
	}
	want := `{"target":"production","notes":"after 5pm","regions":["eu","asia"],"notify":true}`
	if action != "accept" || content != want {
		t.Errorf("the broker got %s %s; want accept %s", action, content, want)
	}
}

// On a dumb terminal there is no form: the plain prompts, a line each.
func TestAnswerOnADumbTerminal(t *testing.T) {
	term, wait := answerOnTerminal(t, "dumb", formQuestion)
	term.waitFor(t, "accept, decline or cancel? (an empty line accepts)")
	term.typeKeys(t, "\r")
	term.waitFor(t, "target (Deploy target): required")
	term.waitFor(t, "2) Production [production]")
	term.typeKeys(t, "2\r")
	term.waitFor(t, "notes (Anything else?): optional")
	term.typeKeys(t, "\r")
	term.waitFor(t, "regions (Regions): optional")
	term.typeKeys(t, "eu, 3\r")
	term.waitFor(t, "notify (Tell the team): required")
	term.typeKeys(t, "y\r")

	stdout, action, content := wait()
	if stdout != "answered 12-1 (claude-agent-acp): accept\n" {
		t.Errorf("stdout = %q", stdout)
	}
	if want := `{"target":"production","regions":["eu","asia"],"notify":true}`; action != "accept" || content != want {
		t.Errorf("the broker got %s %s; want accept %s", action, content, want)
	}
}

// On a terminal, each field the schema gives a default starts with it: a
// choice picked, text and a number filled in, a multi-select's picks made,
// yes or no chosen. Enter on each sends the defaults.
func TestAnswerFormDefaultsOnATerminal(t *testing.T) {
	term, wait := answerOnTerminal(t, "xterm-256color", defaultsQuestion)
	term.waitFor(t, "┃ Deploy where?")
	term.typeKeys(t, "\r") // Answer
	for _, title := range []string{"Deploy target", "Anything else?", "Replicas", "Regions", "Tell the team", "Dry run"} {
		term.waitFor(t, "┃ "+title)
		term.typeKeys(t, "\r")
	}
	stdout, action, content := wait()
	if stdout != "answered 12-1 (claude-agent-acp): accept\n" {
		t.Errorf("stdout = %q", stdout)
	}
	want := `{"target":"production","notes":"after 5pm","replicas":3,"regions":["us","asia"],"notify":true,"dry":false}`
	if action != "accept" || content != want {
		t.Errorf("the broker got %s %s; want accept %s", action, content, want)
	}
}
