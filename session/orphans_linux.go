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

// process is one line of the process table.
type process struct {
	pid, ppid int
	zombie    bool
}

// processes reads the process table from /proc.
func processes() []process {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []process
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
		if err != nil {
			continue
		}
		out = append(out, process{pid: pid, ppid: ppid, zombie: string(fields[0]) == "Z"})
	}
	return out
}

// children lists the broker's child processes by reading /proc.
func children() []child {
	self := os.Getpid()
	var out []child
	for _, p := range processes() {
		if p.ppid == self {
			out = append(out, child{pid: p.pid, zombie: p.zombie})
		}
	}
	return out
}

// descendants lists the live processes below this one, at any depth.
func descendants() []int {
	below := map[int][]process{}
	for _, p := range processes() {
		below[p.ppid] = append(below[p.ppid], p)
	}
	var out []int
	for queue := []int{os.Getpid()}; len(queue) > 0; queue = queue[1:] {
		for _, p := range below[queue[0]] {
			if !p.zombie {
				out = append(out, p.pid)
			}
			queue = append(queue, p.pid)
		}
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
