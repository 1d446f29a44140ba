// Package integration holds the end-to-end tests of the acp-broker binary.
//
// The tests build the real binary and real peers (internal/fakeagent, a
// puppet agent whose every byte the test chooses, and internal/sdkagent, an
// agent built on github.com/coder/acp-go-sdk), play the editor themselves,
// and run each conversation twice: with the editor talking to the agent
// directly, and through the broker. Both runs must put the same bytes in
// front of each side. Other tests pin what the broker adds: limits, garbage
// filtering, shutdown, signals and process cleanup.
//
// This package owns no production code and must not be imported; it reads the
// broker only through its command line, stdio, exit status and files.
package integration
