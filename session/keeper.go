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
	// "errno N: MESSAGE" (see Keeper): the errno tells an agent the system
	// would not run (exit status 126, or 127 for a missing interpreter)
	// from a keeper that could not fork, as it can without a keeper.
	if rest, ok := strings.CutPrefix(line, "errno "); ok {
		if n, msg, ok := strings.Cut(rest, ": "); ok {
			if errno, err := strconv.Atoi(n); err == nil {
				return 0, agentExecError(msg, syscall.Errno(errno))
			}
		}
	}
	return 0, errors.New(line)
}

// AgentExecError is the system's refusal to run the agent's file: its exec
// failed with one of the errors that say why that file cannot be run
// (ENOENT: it or its #! interpreter is missing). A failure of the broker or
// the keeper themselves (no descriptors, no process left, no keeper
// executable) is never one.
type AgentExecError struct {
	Message string
	Errno   syscall.Errno
}

func (e *AgentExecError) Error() string { return e.Message }
func (e *AgentExecError) Unwrap() error { return e.Errno }

// agentExecError is the error of an exec of the agent that failed with
// errno: an AgentExecError if errno is about the file run, else (a fork
// that failed: EAGAIN, ENOMEM) a plain error with the same message.
func agentExecError(msg string, errno syscall.Errno) error {
	switch errno {
	case syscall.ENOENT, syscall.EACCES, syscall.EPERM, syscall.ENOEXEC, syscall.ETXTBSY,
		syscall.EISDIR, syscall.ENOTDIR, syscall.ELOOP, syscall.ENAMETOOLONG, syscall.EINVAL:
		return &AgentExecError{Message: msg, Errno: errno}
	}
	return errors.New(msg)
}
