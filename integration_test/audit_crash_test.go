//go:build linux

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests in this file pin the audit log's promise under a crash: every
// answer the agent has seen has its line in the log, even when the broker
// is killed with SIGKILL the moment after, since each line reaches the
// kernel (one write(2)) before the answer is sent.

// TestAuditHoldsEveryAnswerAfterSIGKILL: the broker answers requests its
// rules allow and deny, relays an editor's answer and refuses a write; it
// is killed with SIGKILL right after the agent saw the last answer, or ends
// normally; either way the log holds a line for every one of them.
func TestAuditHoldsEveryAnswerAfterSIGKILL(t *testing.T) {
	t.Parallel()
	for _, end := range []string{"sigkill", "exit"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			d := startDecider(t, deciderOptions{rules: decideRules})
			d.explainOff = "the test is about the audit log, not the decisions"
			const rounds = 10
			var ids []string
			for i := 1; i <= rounds; i++ {
				allowed, denied, asked := fmt.Sprint(4*i), fmt.Sprint(4*i+1), fmt.Sprint(4*i+2)
				d.decided(execReq(allowed, "git status"), "allow")
				d.decided(execReq(denied, "git push --force origin main"), "reject")
				d.asked(execReq(asked, "make build"), answer(asked, "allow"))
				d.refused(fmt.Sprintf(`{"jsonrpc":"2.0","id":"w%d","method":"fs/write_text_file","params":{"sessionId":"sess_1","path":"$CWD/gen/x%d.go","content":"x"}}`, i, i))
				ids = append(ids, "p"+allowed, "p"+denied, "p"+asked)
			}
			// The agent has read the last answer (refused waits for it).
			if end == "sigkill" {
				if err := d.cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				<-d.exited
			} else {
				d.finish()
			}
			records := readAudit(t, d.audit)
			byID, writes := map[string]int{}, 0
			for _, r := range records {
				switch r.Method {
				case "session/request_permission":
					byID[r.ToolCallID]++
				case "fs/write_text_file":
					writes++
				}
			}
			for _, id := range ids {
				if byID[id] != 1 {
					t.Errorf("request %s has %d audit lines, want 1", id, byID[id])
				}
			}
			if writes != rounds {
				t.Errorf("%d refused writes have an audit line, want %d", writes, rounds)
			}
			if t.Failed() {
				data, _ := os.ReadFile(d.audit)
				t.Logf("the audit log:\n%s", data)
			}
		})
	}
}

// TestAuditLineBeforeTheAnswer: the audit log is a pipe that the test reads
// only at the end, shrunk to one page, so that the broker's write of a line
// waits once it is full. The broker stops answering there: no answer goes
// out whose line is not in the pipe. Killed then with SIGKILL, the pipe
// holds a line for every answer the agent saw.
func TestAuditLineBeforeTheAnswer(t *testing.T) {
	t.Parallel()
	pipe := filepath.Join(t.TempDir(), "audit.pipe")
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Fatal(err)
	}
	// Opened without waiting for a writer; the broker opens the other end.
	r, err := os.OpenFile(pipe, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const fSetPipeSize = 1031 // F_SETPIPE_SZ
	if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, r.Fd(), fSetPipeSize, 4096); errno != 0 {
		t.Fatalf("F_SETPIPE_SZ: %v", errno)
	}
	d := startDecider(t, deciderOptions{rules: decideRules, args: []string{"--audit", pipe}})
	d.explainOff = "the test is about the audit log, not the decisions"

	// A few hundred bytes a line: the page is full after a dozen.
	const most = 200
	var seen []string
	for i := 1; i <= most; i++ {
		id := fmt.Sprint(i)
		req := d.expand(execReq(id, "git status"))
		d.AgentSend(req)
		// A second is far more than an answer takes; one that does not
		// come is held by the full pipe.
		line, err := d.in.take(time.Second, nil)
		if err == errTimeout {
			break
		}
		if err != nil {
			t.Fatalf("agent: %v", err)
		}
		if want := selected(id, "allow"); string(line) != want {
			t.Fatalf("agent received\n  %s\nwant\n  %s", clip(string(line)), want)
		}
		seen = append(seen, "p"+id)
	}
	if len(seen) == most {
		t.Fatalf("all %d requests were answered: the pipe never filled, so nothing was tested", most)
	}
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.exited

	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	logged := map[string]bool{}
	for line := range bytes.Lines(data) {
		var rec auditRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			continue // a line cut short where the pipe filled
		}
		logged[rec.ToolCallID] = true
	}
	for _, id := range seen {
		if !logged[id] {
			t.Errorf("the agent was answered request %s, which has no audit line", id)
		}
	}
	t.Logf("%d answers seen before the pipe filled", len(seen))
	if t.Failed() {
		t.Logf("the pipe held:\n%s", data)
	}
}

// TestAuditThatCannotBeWrittenAllowsNothing: with an audit log every write
// to which fails (/dev/full), what the rules allow is not given by the
// broker: the permission request goes to the editor, whose answer is
// relayed, and a terminal is refused. A deny is still a deny.
func TestAuditThatCannotBeWrittenAllowsNothing(t *testing.T) {
	t.Parallel()
	d := startDecider(t, deciderOptions{rules: decideRules, args: []string{"--audit", "/dev/full"}})
	d.noisy = true // every write of the log fails, and is logged
	d.explainOff = "rules explain writes no audit log: it allows what the broker, unable to record it, asks"
	d.asked(execReq("1", "git status"), answer("1", "allow"))
	d.decided(execReq("2", "git push --force origin main"), "reject")
	if msg := d.refused(`{"jsonrpc":"2.0","id":"t1","method":"terminal/create","params":{"sessionId":"sess_1","command":"git","args":["status"],"cwd":"$CWD"}}`); !strings.Contains(msg, "audit log") {
		t.Errorf("the refusal %q does not say the audit log is why", msg)
	}
	d.WaitStderr("the failed write", func(l string) bool { return strings.Contains(l, "cannot write the audit log") })
	d.finish()
}
