package session

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
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
	return 0, errors.New(line)
}
