package peercred

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// maxAncestry bounds the walk up a parent chain, against a /proc that lies.
const maxAncestry = 4096

// Ancestry returns pid and its ancestors, parent after child, up to the
// first process with no parent in this pid namespace (init, or a process
// whose parent is outside it). It fails if any process in the chain cannot
// be read, for instance because it has exited meanwhile: a caller deciding
// on the chain must then refuse.
func Ancestry(pid int) ([]int, error) {
	var chain []int
	for pid > 0 && len(chain) < maxAncestry {
		chain = append(chain, pid)
		ppid, err := parentOf(pid)
		if err != nil {
			return chain, err
		}
		pid = ppid
	}
	if pid > 0 {
		return chain, fmt.Errorf("the parent chain of pid %d is longer than %d processes", chain[0], maxAncestry)
	}
	return chain, nil
}

// parentOf reads a process's parent pid from /proc/PID/stat. The command
// name (second field) may hold spaces and parentheses, so the fields are
// read after its last ')'.
func parentOf(pid int) (int, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unreadable", pid)
	}
	fields := bytes.Fields(stat[i+1:])
	if len(fields) < 2 {
		return 0, fmt.Errorf("/proc/%d/stat: unreadable", pid)
	}
	ppid, err := strconv.Atoi(string(fields[1])) // state, then ppid
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return ppid, nil
}
