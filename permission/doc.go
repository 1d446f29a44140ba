// Package permission decides the agent's requests that the broker may answer
// itself: session/request_permission first, and the fs/write_text_file and
// terminal/create requests as defense in depth.
//
// A policy plugs into the relay through session.Policy. It decides on the
// merged tool-call view that package session keeps; it never reads or writes
// the wire itself, and it answers only through the session.Call it was given.
package permission

import "github.com/acp-broker/acp-broker/session"

// Forward is the policy that decides nothing: every intercepted request goes
// to the editor unchanged, and the editor's answer goes back to the agent
// unchanged. It is what the broker does before any rule is configured.
type Forward struct{}

// Intercept forwards the call to the editor at once, keeping its place in the
// agent's message order.
func (Forward) Intercept(c *session.Call) { c.Forward(nil) }
