package notify

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// execTestWait bounds every wait in these tests: reaching it is a failure.
const execTestWait = 20 * time.Second

// execTestPrompt is a request offering the four usual options.
func execTestPrompt() Prompt {
	return Prompt{
		Version:  PromptVersion,
		ID:       "4242-1",
		Session:  "sess_1",
		Agent:    "claude-agent-acp",
		Title:    "git push origin main",
		Kind:     "execute",
		Commands: []string{"git push origin main"},
		Reason:   "no rule matched",
		Options: []Option{
			{ID: "allow", Kind: "allow_once", Name: "Allow"},
			{ID: "always", Kind: "allow_always", Name: "Always allow"},
			{ID: "reject", Kind: "reject_once", Name: "Reject"},
			{ID: "never", Kind: "reject_always", Name: "Never"},
		},
		Deadline: time.Date(2026, 11, 30, 8, 12, 3, 0, time.UTC),
		Digest:   Digest([]byte(`{"jsonrpc":"2.0","id":7,"method":"session/request_permission"}`)),
	}
}

// execScript writes a /bin/sh script into a test directory and returns its path.
func execScript(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "channel.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// execAsk runs e.Ask with a context that ends only if the test hangs.
func execAsk(t *testing.T, e *Exec, p Prompt) (Answer, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), execTestWait)
	defer cancel()
	ans, err := e.Ask(ctx, p)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Ask did not return within %v", execTestWait)
	}
	return ans, err
}

func TestExecAnswers(t *testing.T) {
	noAllowAlways := func(p *Prompt) { p.Options = append(p.Options[:1:1], p.Options[2:]...) }
	huge := func(p *Prompt) { p.Commands = []string{strings.Repeat("x", 1<<20)} }
	tests := []struct {
		name   string
		script string
		env    []string
		prompt func(*Prompt)
		want   string   // the option chosen; "" for no answer
		errHas []string // in the error, for no answer
	}{
		{name: "option id", script: `cat >/dev/null; echo '{"optionId":"always"}'`, want: "always"},
		{name: "decision", script: `cat >/dev/null; echo '{"decision":"reject_once"}'`, want: "reject"},
		{name: "decision reject always", script: `echo '{"decision":"reject_always"}'`, want: "never"},
		{name: "unknown fields ignored", script: `echo '{"note":{"a":[1,{"optionId":"never"}]},"optionId":"allow","who":"me"}'`, want: "allow"},
		{name: "white space around", script: `printf ' \n\t{ "decision" : "allow_always" }\n\n'`, want: "always"},
		{name: "no newline", script: `printf '{"optionId":"reject"}'`, want: "reject"},
		{name: "prompt not read", script: `echo '{"optionId":"allow"}'`, prompt: huge, want: "allow"},
		{name: "env", script: `echo "{\"optionId\":\"$CHOICE\"}"`, env: []string{"CHOICE=never"}, want: "never"},
		{name: "stderr is not the answer", script: `echo '{"optionId":"reject"}'; echo '{"optionId":"allow"}' >&2`, want: "reject"},

		{name: "garbage", script: `echo yes`, errHas: []string{"no answer", "no JSON object"}},
		{name: "empty", script: `cat >/dev/null`, errHas: []string{"no answer", "printed nothing"}},
		{name: "only white space", script: `printf '\n \n'`, errHas: []string{"printed nothing"}},
		{name: "two objects", script: `echo '{"optionId":"allow"}{"optionId":"reject"}'`, errHas: []string{"more than the one JSON object"}},
		{name: "two lines", script: `echo '{"optionId":"allow"}'; echo '{"optionId":"allow"}'`, errHas: []string{"more than the one JSON object"}},
		{name: "trailing garbage", script: `echo '{"optionId":"allow"} ok'`, errHas: []string{"more than the one JSON object"}},
		{name: "truncated", script: `printf '{"optionId":"allow"'`, errHas: []string{"bad JSON"}},
		{name: "duplicate key", script: `echo '{"optionId":"reject","optionId":"allow"}'`, errHas: []string{`"optionId" twice`}},
		{name: "key in another case", script: `echo '{"OptionId":"allow"}'`, errHas: []string{"names no option"}},
		{name: "string", script: `echo '"allow"'`, errHas: []string{"no JSON object"}},
		{name: "array", script: `echo '[{"optionId":"allow"}]'`, errHas: []string{"no JSON object"}},
		{name: "null", script: `echo null`, errHas: []string{"no JSON object"}},
		{name: "number option", script: `echo '{"optionId":1}'`, errHas: []string{`"optionId" is not a string`}},
		{name: "option not offered", script: `echo '{"optionId":"sudo"}'`, errHas: []string{`option "sudo" was not offered`}},
		{name: "decision not offered", script: `echo '{"decision":"allow_always"}'`, prompt: noAllowAlways, errHas: []string{"no allow_always option"}},
		{name: "unknown decision", script: `echo '{"decision":"yes"}'`, errHas: []string{"no yes option"}},
		{name: "option and decision", script: `echo '{"optionId":"allow","decision":"allow_once"}'`, errHas: []string{"both an option and a decision"}},
		{name: "empty object", script: `echo '{}'`, errHas: []string{"names no option"}},
		{name: "exit status", script: `echo '{"optionId":"allow"}'; echo 'cannot reach the display' >&2; exit 3`,
			errHas: []string{"exited with status 3", `stderr: "cannot reach the display"`}},
		{name: "killed", script: `echo '{"optionId":"allow"}'; kill -9 $$`, errHas: []string{"signal: killed"}},
		{name: "too much output", script: `head -c 70000 /dev/zero | tr '\0' ' '; echo '{"optionId":"allow"}'`, errHas: []string{"more than 65536 bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := execTestPrompt()
			if tt.prompt != nil {
				tt.prompt(&p)
			}
			e := &Exec{ChannelName: "desktop", Command: []string{execScript(t, tt.script)}, Env: tt.env}
			ans, err := execAsk(t, e, p)
			if tt.want != "" {
				if err != nil {
					t.Fatalf("Ask: %v", err)
				}
				if want := (Answer{OptionID: tt.want, Channel: "desktop"}); ans != want {
					t.Fatalf("Ask = %+v, want %+v", ans, want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Ask = %+v, want no answer", ans)
			}
			if !errors.Is(err, ErrNoAnswer) {
				t.Errorf("error %q does not wrap ErrNoAnswer", err)
			}
			if ans != (Answer{}) {
				t.Errorf("Ask returned %+v with its error", ans)
			}
			for _, s := range append(tt.errHas, `exec channel "desktop"`) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}

func TestExecCommandMissing(t *testing.T) {
	for _, argv := range [][]string{nil, {filepath.Join(t.TempDir(), "no-such-command")}} {
		e := &Exec{ChannelName: "desktop", Command: argv}
		if ans, err := execAsk(t, e, execTestPrompt()); err == nil {
			t.Errorf("Command %q: Ask = %+v, want an error", argv, ans)
		}
	}
}

// The command gets exactly one JSON object, the versioned prompt, and a
// newline on stdin, then end of input.
func TestExecPromptOnStdin(t *testing.T) {
	got := filepath.Join(t.TempDir(), "prompt.json")
	e := &Exec{
		ChannelName: "desktop",
		Command:     []string{execScript(t, `cat >"$OUT"; echo '{"optionId":"allow"}'`)},
		Env:         []string{"OUT=" + got},
	}
	p := execTestPrompt()
	if _, err := execAsk(t, e, p); err != nil {
		t.Fatalf("Ask: %v", err)
	}
	data, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(data, []byte("}\n")) || bytes.Count(data, []byte("\n")) != 1 {
		t.Fatalf("stdin was %q, want one JSON object on one line", data)
	}
	var fields map[string]any
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatalf("stdin is not one JSON object: %v", err)
	}
	if fields["version"] != float64(1) || fields["digest"] != p.Digest || fields["id"] != p.ID {
		t.Errorf("stdin has version %v, digest %v, id %v; want 1, %s, %s", fields["version"], fields["digest"], fields["id"], p.Digest, p.ID)
	}
	var back Prompt
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, p) {
		t.Errorf("stdin decodes to %+v, want %+v", back, p)
	}
}

// A context that has ended runs nothing.
func TestExecEndedContextRunsNothing(t *testing.T) {
	ran := filepath.Join(t.TempDir(), "ran")
	e := &Exec{ChannelName: "desktop", Command: []string{execScript(t, `touch "$RAN"; echo '{"optionId":"allow"}'`)}, Env: []string{"RAN=" + ran}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ans, err := e.Ask(ctx, execTestPrompt()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Ask = %+v, %v; want context.Canceled", ans, err)
	}
	if _, err := os.Stat(ran); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the command ran: %v", err)
	}
}

// execFIFO makes a named pipe and returns its path and a function that waits
// for a writer to open it and returns its read end.
func execFIFO(t *testing.T) (string, func() *os.File) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	opened := make(chan *os.File, 1)
	go func() {
		f, err := os.OpenFile(path, os.O_RDONLY, 0)
		if err != nil {
			f = nil
		}
		opened <- f
	}()
	var f *os.File
	t.Cleanup(func() {
		if f != nil {
			f.Close()
			return
		}
		// No writer came: open one to let the reader's open return.
		if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		if r := <-opened; r != nil {
			r.Close()
		}
	})
	return path, func() *os.File {
		t.Helper()
		f = execRecv(t, opened, "a writer to open the pipe")
		if f == nil {
			t.Fatal("opening the pipe failed")
		}
		return f
	}
}

// execReadToEnd reads f to its end, which comes when every writer is gone.
func execReadToEnd(t *testing.T, f *os.File, what string) string {
	t.Helper()
	if err := f.SetReadDeadline(time.Now().Add(execTestWait)); err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
	return string(data)
}

func execRecv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(execTestWait):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// When ctx ends first, the command's whole process group is killed and
// reaped, including a process it started in the background, and Ask
// returns ctx's error.
func TestExecCancelKillsProcessGroup(t *testing.T) {
	path, opened := execFIFO(t)
	// The script starts a child that holds the pipe's write end, says both
	// pids on it, lets go of its own copy and waits.
	e := &Exec{
		ChannelName: "desktop",
		Command: []string{execScript(t, `cat >/dev/null
exec 3>"$FIFO"
sleep 1000 &
echo "$$ $!" >&3
exec 3>&-
wait`)},
		Env: []string{"FIFO=" + path},
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	type result struct {
		ans Answer
		err error
	}
	done := make(chan result, 1)
	go func() {
		ans, err := e.Ask(ctx, execTestPrompt())
		done <- result{ans, err}
	}()

	f := opened()
	if err := f.SetReadDeadline(time.Now().Add(execTestWait)); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the pids: %v", err)
	}
	var pids []int
	for _, s := range strings.Fields(line) {
		pid, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("bad pids %q", line)
		}
		pids = append(pids, pid)
	}
	if len(pids) != 2 {
		t.Fatalf("bad pids %q", line)
	}
	select {
	case r := <-done:
		t.Fatalf("Ask returned before ctx ended: %+v, %v", r.ans, r.err)
	default:
	}

	cancel(&Outcome{By: "editor", Decision: "allow"})
	r := execRecv(t, done, "Ask to return")
	if r.err != context.Canceled || r.ans != (Answer{}) {
		t.Fatalf("Ask = %+v, %v; want context.Canceled", r.ans, r.err)
	}
	// The script was reaped: its pid is gone.
	if err := syscall.Kill(pids[0], 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the script (pid %d) is still there: kill 0 = %v", pids[0], err)
	}
	// The background child held the pipe's only write end: its end of
	// input means it is gone too.
	if rest := execReadToEnd(t, f, "the background child to die"); rest != "" {
		t.Errorf("unexpected output %q", rest)
	}
}

// When the command exits, what it left running in its process group is
// killed: a channel leaves nothing behind.
func TestExecAnswerLeavesNothingBehind(t *testing.T) {
	path, opened := execFIFO(t)
	e := &Exec{
		ChannelName: "desktop",
		Command: []string{execScript(t, `exec 3>"$FIFO"
sleep 1000 &
exec 3>&-
echo '{"optionId":"allow"}'`)},
		Env: []string{"FIFO=" + path},
	}
	ans, err := execAsk(t, e, execTestPrompt())
	if err != nil || ans.OptionID != "allow" {
		t.Fatalf("Ask = %+v, %v; want allow", ans, err)
	}
	f := opened()
	execReadToEnd(t, f, "the background child to die")
}

func FuzzParseReply(f *testing.F) {
	for _, s := range []string{
		`{"optionId":"allow"}`, `{"decision":"allow_once"}`, `{"optionId":"a","x":[1,{"y":null}]}`,
		`{"optionId":"a"}{}`, `{"optionId":"a","optionId":"b"}`, `{"OPTIONID":"a"}`, `[]`, `null`, `"x"`,
		`{"optionId":1}`, `{"optionId":"a"} x`, ` {"decision":"reject_once"} ` + "\n", `{"optionId":"\u00e9"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		optionID, decision, err := parseReply(data)
		if err != nil {
			return
		}
		// What is taken is one valid JSON object whose members say the same
		// to encoding/json.
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(data, &fields); err != nil {
			t.Fatalf("parseReply took %q, which is not one JSON object: %v", data, err)
		}
		for key, got := range map[string]string{"optionId": optionID, "decision": decision} {
			var want string
			if raw, ok := fields[key]; ok {
				if err := json.Unmarshal(raw, &want); err != nil {
					t.Fatalf("parseReply took %q with a %s that is not a string", data, key)
				}
			}
			if got != want {
				t.Fatalf("parseReply(%q) %s = %q, encoding/json says %q", data, key, got, want)
			}
		}
	})
}
