// Command acp-broker sits between an editor and an ACP agent, relays their
// conversation unchanged, and puts permission decisions in the user's hands.
//
// This package only wires flags to the plain packages and turns their results
// into an exit status; it decodes no JSON itself.
package main

import (
	"os"
)

func main() {
	os.Exit(execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
