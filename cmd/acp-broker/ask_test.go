package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
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
// prompts of a JSON file on its local socket and writes each answer it
// gets, one JSON line each, to a file. It is a process of its own, as a
// broker is: the local socket refuses the processes under it, so the
// answering `acp-broker` must not be its child.
func TestFakeBrokerHelper(t *testing.T) {
	promptFile := os.Getenv("FAKE_BROKER_PROMPTS")
	if promptFile == "" {
		return
	}
	data, err := os.ReadFile(promptFile)
	if err != nil {
		t.Fatal(err)
	}
	var prompts []notify.Prompt
	if err := json.Unmarshal(data, &prompts); err != nil {
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
	out, err := os.OpenFile(os.Getenv("FAKE_BROKER_ANSWERS"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range prompts {
		wg.Go(func() {
			ans, err := l.Ask(ctx, p)
			if err != nil {
				return
			}
			line, _ := json.Marshal(map[string]any{"id": p.ID, "action": ans.Action, "content": json.RawMessage(cmp.Or(ans.Content, "null")), "optionId": ans.OptionID, "channel": ans.Channel})
			mu.Lock()
			out.Write(append(line, '\n'))
			mu.Unlock()
		})
	}
	wg.Wait()
}

// fakeBrokers are the fake brokers the scripts started, by script.
var fakeBrokers sync.Map // *testscript.TestScript → *exec.Cmd

// cmdBroker runs a fake broker for a script:
//
//	broker start PROMPTS.json   start one asking those prompts, and wait until they are pending
//	broker wait                 wait until it has had an answer to each and exited
//
// Its answers are in $WORK/answers.jsonl.
func cmdBroker(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: broker start PROMPTS.json | broker wait")
	}
	switch args[0] {
	case "start":
		if len(args) != 2 {
			ts.Fatalf("usage: broker start PROMPTS.json")
		}
		var prompts []notify.Prompt
		if err := json.Unmarshal([]byte(ts.ReadFile(args[1])), &prompts); err != nil {
			ts.Fatalf("%s: %v", args[1], err)
		}
		self, err := os.Executable()
		ts.Check(err)
		cmd := exec.Command(self, "-test.run=^TestFakeBrokerHelper$")
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+ts.Getenv("XDG_RUNTIME_DIR"),
			"FAKE_BROKER_PROMPTS="+ts.MkAbs(args[1]), "FAKE_BROKER_ANSWERS="+ts.MkAbs("answers.jsonl"))
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		ts.Check(cmd.Start())
		fakeBrokers.Store(ts, cmd)
		ts.Defer(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		})
		var ids []string
		for _, p := range prompts {
			ids = append(ids, p.ID)
		}
		waitPending(ts, ids)
	case "wait":
		c, ok := fakeBrokers.Load(ts)
		if !ok {
			ts.Fatalf("no broker started")
		}
		cmd := c.(*exec.Cmd)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			ts.Check(err)
		case <-time.After(testWait):
			ts.Fatalf("the fake broker is still waiting for answers")
		}
	default:
		ts.Fatalf("unknown broker command %q", args[0])
	}
}

// testWait bounds what the tests wait for: long enough for a loaded machine.
const testWait = 60 * time.Second

// waitPending waits until the brokers in the script's socket directory
// list every one of ids as pending. Nothing tells a client when a prompt
// becomes pending, so it asks again until it is.
func waitPending(ts *testscript.TestScript, ids []string) {
	dir := filepath.Join(ts.Getenv("XDG_RUNTIME_DIR"), "acp-broker")
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
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%v not pending after %v (listed: %v)", missing, testWait, listed)
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
