package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/acp-broker/acp-broker/notify"
)

func TestPrintableDefusesTerminalEscapes(t *testing.T) {
	if got := printable("git push\x1b]0;pwned\x07\x1b[2J ok\u0085é"); got != "git push?]0;pwned??[2J ok?é" {
		t.Fatalf("printable = %q", got)
	}
}

// The fake broker: the test binary, run again as a broker that asks the
// prompts of a JSON file on its local socket and prints each answer it
// gets, a JSON line after fakeAnswerPrefix, until it is sent SIGTERM. It
// is a process of its own, as a broker is: the local socket refuses the
// processes under it, so the answering `acp-broker` must not be its child.
func TestFakeBrokerHelper(t *testing.T) {
	promptFile := os.Getenv("FAKE_BROKER_PROMPTS")
	if promptFile == "" {
		return
	}
	prompts, err := readPrompts(promptFile)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := notify.LocalDir()
	if err != nil {
		t.Fatal(err)
	}
	l, err := notify.ListenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	var mu sync.Mutex
	for _, p := range prompts {
		go func() {
			ans, err := l.Ask(ctx, p)
			if err != nil {
				return
			}
			line, _ := json.Marshal(map[string]any{"id": p.ID, "action": ans.Action, "content": json.RawMessage(cmp.Or(ans.Content, "null")), "optionId": ans.OptionID, "channel": ans.Channel})
			mu.Lock()
			fmt.Printf("%s%s\n", fakeAnswerPrefix, line)
			mu.Unlock()
		}()
	}
	// Until told to stop, not when the last answer is in: the response to
	// it may still be on its way.
	<-ctx.Done()
}

// fakeAnswerPrefix starts the fake broker's lines that are answers.
const fakeAnswerPrefix = "fake broker answer: "

func readPrompts(file string) ([]notify.Prompt, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var prompts []notify.Prompt
	if err := json.Unmarshal(data, &prompts); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	return prompts, nil
}

// fakeBroker is a running fake broker.
type fakeBroker struct {
	cmd     *exec.Cmd
	prompts int
	answers chan string // each answer's JSON line, as it comes
	output  chan []byte // the rest of what it printed, once it has exited
}

// startFakeBroker starts a fake broker asking the prompts of promptFile
// on a socket in runDir (its XDG_RUNTIME_DIR), and returns once they are
// all pending.
func startFakeBroker(runDir, promptFile string) (*fakeBroker, error) {
	prompts, err := readPrompts(promptFile)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-test.run=^TestFakeBrokerHelper$")
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+runDir, "FAKE_BROKER_PROMPTS="+promptFile)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b := &fakeBroker{cmd: cmd, prompts: len(prompts), answers: make(chan string, len(prompts)), output: make(chan []byte, 1)}
	go func() {
		var rest bytes.Buffer
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			if answer, ok := strings.CutPrefix(lines.Text(), fakeAnswerPrefix); ok {
				b.answers <- answer
				continue
			}
			fmt.Fprintln(&rest, lines.Text())
		}
		b.output <- rest.Bytes()
	}()
	var ids []string
	for _, p := range prompts {
		ids = append(ids, p.ID)
	}
	if err := waitPending(filepath.Join(runDir, "acp-broker"), ids); err != nil {
		b.stop()
		return nil, fmt.Errorf("%v; the fake broker said: %s", err, <-b.output)
	}
	return b, nil
}

// wait waits for an answer to each prompt, stops the broker and returns
// the answers in the order they came.
func (b *fakeBroker) wait() ([]string, error) {
	var got []string
	timeout := time.After(testWait)
	for len(got) < b.prompts {
		select {
		case answer := <-b.answers:
			got = append(got, answer)
		case <-timeout:
			b.stop()
			return got, fmt.Errorf("the fake broker had %d answers of %d after %v; it said: %s", len(got), b.prompts, testWait, <-b.output)
		}
	}
	b.stop()
	return got, nil
}

// stop stops the broker and waits for it to exit.
func (b *fakeBroker) stop() {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	_ = b.cmd.Wait()
}

// fakeBrokers are the fake brokers the scripts started, by script.
var fakeBrokers sync.Map // *testscript.TestScript → *fakeBroker

// cmdBroker runs a fake broker for a script:
//
//	broker start PROMPTS.json   start one asking those prompts, and wait until they are pending
//	broker wait                 wait until it has had an answer to each, stop it, and write them to $WORK/answers.jsonl
func cmdBroker(ts *testscript.TestScript, neg bool, args []string) {
	switch {
	case neg:
		ts.Fatalf("unsupported: ! broker")
	case len(args) == 2 && args[0] == "start":
		b, err := startFakeBroker(ts.Getenv("XDG_RUNTIME_DIR"), ts.MkAbs(args[1]))
		ts.Check(err)
		fakeBrokers.Store(ts, b)
		ts.Defer(b.stop)
	case len(args) == 1 && args[0] == "wait":
		b, ok := fakeBrokers.Load(ts)
		if !ok {
			ts.Fatalf("no broker started")
		}
		answers, err := b.(*fakeBroker).wait()
		ts.Check(err)
		ts.Check(os.WriteFile(ts.MkAbs("answers.jsonl"), []byte(strings.Join(answers, "\n")+"\n"), 0o600))
	default:
		ts.Fatalf("usage: broker start PROMPTS.json | broker wait")
	}
}

// testWait bounds what the tests wait for: long enough for a loaded machine.
const testWait = 60 * time.Second

// waitPending waits until the brokers in the socket directory dir list
// every one of ids as pending. Nothing tells a client when a prompt
// becomes pending, so it asks again until it is.
func waitPending(dir string, ids []string) error {
	deadline := time.Now().Add(testWait)
	for {
		var listed []string
		if _, err := os.Stat(dir); err == nil {
			list, _ := notify.ListPending(dir)
			for _, p := range list {
				listed = append(listed, p.ID)
			}
		}
		missing := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return slices.Contains(listed, id) })
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%v not pending after %v (listed: %v)", missing, testWait, listed)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestQuestionScripts runs testdata/script/questions/*.txtar: pending and
// answer with a fake broker asking questions.
func TestQuestionScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script/questions",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Cmds:                map[string]func(*testscript.TestScript, bool, []string){"exits": cmdExits, "broker": cmdBroker},
		Setup: func(env *testscript.Env) error {
			run := filepath.Join(env.WorkDir, "run")
			env.Setenv("XDG_RUNTIME_DIR", run)
			return os.Mkdir(run, 0o700)
		},
	})
}
