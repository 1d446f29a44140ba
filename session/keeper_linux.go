package session

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
)

// On Linux the agent runs under a keeper: acp-broker's own executable,
// started by the broker in a process group of its own with a parent-death
// signal, and the child subreaper of everything below it. An editor that
// kills the broker with SIGKILL, alone (Emacs) or with its process group
// (Zed), cannot reach the keeper's group; the kernel then signals the
// keeper, which kills every process below it, including those that left the
// agent's process group or session and those whose parents exited, since
// they were re-parented to it. While the broker lives the keeper only
// starts the agent and mirrors its exit status; what the agent leaves behind
// is re-parented to the broker when the keeper exits, and ended there.
const keeperSupported = true

func setParentDeathSignal(attr *syscall.SysProcAttr, sig syscall.Signal) {
	attr.Pdeathsig = sig
}

// Keeper runs the agent (args: its path, then its argv) with the keeper's
// stdio and exits with the agent's status. It reports the agent's pid on
// descriptor 3. If it is signalled (the broker set SIGTERM as its
// parent-death signal) it kills every process below it and exits.
func Keeper(args []string, stderr io.Writer) int {
	report := os.NewFile(keeperReportFD, "keeper report")
	if len(args) < 2 || report == nil {
		fmt.Fprintln(stderr, "acp-broker: agent-keeper is started by acp-broker, not by hand")
		return 2
	}
	syscall.CloseOnExec(keeperReportFD) // the agent must not hold it
	adoptOrphans()
	// Caught before the agent exists: a broker that died before this line
	// killed the keeper by the signal's default action, agent unstarted.
	ended := make(chan os.Signal, 1)
	signal.Notify(ended, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	// The agent's own parent-death signal follows this thread: if the
	// keeper itself is killed, the agent goes with it and its descendants
	// are re-parented to the broker, which ends them.
	runtime.LockOSThread()
	// syscall.ForkExec rather than os/exec, whose probe of the kernel
	// before its first start would cost a throwaway child (see
	// startAndWait).
	agent, err := syscall.ForkExec(args[0], args[1:], &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		var errno syscall.Errno
		errors.As(err, &errno)
		fmt.Fprintf(report, "errno %d: %v\n", errno, &os.PathError{Op: "fork/exec", Path: args[0], Err: err})
		report.Close()
		return 1
	}
	fmt.Fprintf(report, "%d\n", agent)
	report.Close()

	exited := make(chan int, 1)
	go func() { exited <- waitExit(agent) }()
	select {
	case code := <-exited:
		return code
	case <-ended:
		killDescendants()
		return 128 + int(syscall.SIGKILL)
	}
}

// killDescendants kills every live process below this one until none is
// left. A process forked just before its parent was killed is re-parented
// here and found in the next round.
func killDescendants() {
	for range 200 {
		live := descendants()
		if len(live) == 0 {
			return
		}
		for _, pid := range live {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
