// Package peercred tells who is at the other end of a Unix socket, as the
// kernel recorded it at connect time. The broker's private sockets (the
// local answer channel, the MCP proxies' reports) serve only their own
// user's processes.
package peercred
