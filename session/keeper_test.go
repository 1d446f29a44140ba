package session

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

// TestReadKeeperReport: the keeper's report is the agent's pid, or the
// errno and message of the exec that failed. Only an errno that says why
// the agent's file cannot be run makes an AgentExecError (the exit statuses
// 126 and 127); a keeper that could not fork, or a report that is no
// errno, is a plain failure, with the keeper's message.
func TestReadKeeperReport(t *testing.T) {
	for _, c := range []struct {
		report string
		pid    int
		errno  syscall.Errno // of the AgentExecError; 0: none
		msg    string        // the error's message; "" if no error
	}{
		{report: "4242\n", pid: 4242},
		{report: "errno 2: fork/exec ./a.sh: no such file or directory\n", errno: syscall.ENOENT, msg: "fork/exec ./a.sh: no such file or directory"},
		{report: "errno 8: fork/exec ./junk: exec format error\n", errno: syscall.ENOEXEC, msg: "fork/exec ./junk: exec format error"},
		{report: "errno 13: fork/exec ./a: permission denied\n", errno: syscall.EACCES, msg: "fork/exec ./a: permission denied"},
		{report: "errno 11: fork/exec ./a: resource temporarily unavailable\n", msg: "fork/exec ./a: resource temporarily unavailable"},
		{report: "errno 12: fork/exec ./a: cannot allocate memory\n", msg: "fork/exec ./a: cannot allocate memory"},
		{report: "errno 0: fork/exec ./a: not an errno\n", msg: "fork/exec ./a: not an errno"},
		{report: "errno x: fork/exec ./a: no number\n", msg: "errno x: fork/exec ./a: no number"},
		{report: "-1\n", msg: "-1"},
		{report: "4242", msg: "4242"}, // cut short: the keeper died writing it
		{report: "", msg: "the agent keeper exited before starting the agent"},
	} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.WriteString(c.report); err != nil {
			t.Fatal(err)
		}
		w.Close()
		pid, err := readKeeperReport(r)
		if pid != c.pid {
			t.Errorf("%q: pid %d, want %d", c.report, pid, c.pid)
		}
		switch {
		case c.msg == "" && err != nil:
			t.Errorf("%q: %v", c.report, err)
		case c.msg != "" && (err == nil || err.Error() != c.msg):
			t.Errorf("%q: error %v, want %q", c.report, err, c.msg)
		}
		var exec *AgentExecError
		if got := errors.As(err, &exec); got != (c.errno != 0) || got && exec.Errno != c.errno {
			t.Errorf("%q: AgentExecError %v (%v), want one with errno %d: %v", c.report, got, exec, c.errno, c.errno != 0)
		}
	}
}
