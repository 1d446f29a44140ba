package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/acp-broker/acp-broker/session"
)

// newKeeperCmd is the process the broker starts the agent under (see
// session.Keeper); its arguments are the agent's path and argv, untouched.
func newKeeperCmd(stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:                session.KeeperCommand + " PATH ARGV...",
		Short:              "Run the agent for acp-broker (started by acp-broker, not by hand)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := session.Keeper(args, stderr); code != 0 {
				return statusError(code)
			}
			return nil
		},
	}
}
