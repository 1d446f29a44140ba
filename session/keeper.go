package session

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// KeeperCommand is the first argument with which the broker's own
// executable runs Keeper: `acp-broker agent-keeper PATH ARGV...`.
const KeeperCommand = "agent-keeper"

// keeperReportFD is the descriptor on which the keeper tells the broker the
// agent's pid (a decimal line), or why it could not start the agent.
const keeperReportFD = 3

// readKeeperReport reads the keeper's report and closes r.
func readKeeperReport(r *os.File) (int, error) {
	defer r.Close()
	line, err := bufio.NewReader(r).ReadString('\n')
	line = strings.TrimSuffix(line, "\n")
	if pid, perr := strconv.Atoi(line); perr == nil && err == nil && pid > 0 {
		return pid, nil
	}
	if line == "" {
		return 0, errors.New("the agent keeper exited before starting the agent")
	}
	// "errno N: MESSAGE" (see Keeper): the errno lets the broker's caller
	// tell an agent it could not run (exit status 126) from one whose
	// interpreter is missing (127), as it can without a keeper.
	if rest, ok := strings.CutPrefix(line, "errno "); ok {
		if n, msg, ok := strings.Cut(rest, ": "); ok {
			if errno, err := strconv.Atoi(n); err == nil {
				return 0, &keeperStartError{msg: msg, errno: syscall.Errno(errno)}
			}
		}
	}
	return 0, errors.New(line)
}

// keeperStartError is the keeper's report that the agent could not be
// started: its message, unwrapping to the errno of the failed exec.
type keeperStartError struct {
	msg   string
	errno syscall.Errno
}

func (e *keeperStartError) Error() string { return e.msg }
func (e *keeperStartError) Unwrap() error {
	if e.errno == 0 {
		return nil
	}
	return e.errno
}
