//go:build !linux

package session

import (
	"fmt"
	"io"
	"syscall"
)

// Outside Linux there is neither a parent-death signal nor a child
// subreaper, so a keeper could not notice the broker's death nor find what
// left the agent's process group: the agent is the broker's own child, and a
// broker killed with SIGKILL leaves it running.
const keeperSupported = false

func setParentDeathSignal(attr *syscall.SysProcAttr, sig syscall.Signal) {}

// Keeper is not used outside Linux.
func Keeper(args []string, stderr io.Writer) int {
	fmt.Fprintln(stderr, "acp-broker: the agent keeper exists only on Linux")
	return 2
}
