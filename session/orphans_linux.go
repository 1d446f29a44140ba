package session

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>.
const prSetChildSubreaper = 36

// adoptOrphans makes the broker the child subreaper of everything the agent
// starts: a descendant whose parent exits is re-parented to the broker rather
// than to init, even after it left the agent's process group with setsid, so
// the broker can still find and end it.
func adoptOrphans() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
}

type child struct {
	pid    int
	zombie bool
}

// children lists the broker's child processes by reading /proc.
func children() []child {
	self := os.Getpid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []child
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name is in parentheses and may contain anything, so the
		// fields are read after the last ')': state, then ppid.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := bytes.Fields(stat[i+1:])
		if len(fields) < 2 {
			continue
		}
		ppid, err := strconv.Atoi(string(fields[1]))
		if err != nil || ppid != self {
			continue
		}
		out = append(out, child{pid: pid, zombie: string(fields[0]) == "Z"})
	}
	return out
}

// orphans returns the live children of the broker. Called once the agent
// has been reaped, these are descendants it left behind.
func orphans() []int {
	var pids []int
	for _, c := range children() {
		if !c.zombie {
			pids = append(pids, c.pid)
		}
	}
	return pids
}

// signalOrphans signals each orphan and the process group it may lead.
func signalOrphans(sig syscall.Signal) {
	for _, pid := range orphans() {
		_ = syscall.Kill(-pid, sig)
		_ = syscall.Kill(pid, sig)
	}
}

// reapOrphans collects the exit status of orphans that have exited, by pid,
// so that no status the os/exec package waits for is taken from it.
func reapOrphans() {
	for _, c := range children() {
		if c.zombie {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(c.pid, &ws, syscall.WNOHANG, nil)
		}
	}
}

// killOrphans kills every orphan until none is left. Killing one may orphan
// its own children, which are then adopted and killed in the next round.
func killOrphans() {
	for range 50 {
		reapOrphans()
		live := orphans()
		if len(live) == 0 {
			return
		}
		signalOrphans(syscall.SIGKILL)
		time.Sleep(5 * time.Millisecond)
	}
}
