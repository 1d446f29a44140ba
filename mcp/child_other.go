//go:build !linux

package mcp

import "syscall"

// childAttr: only Linux can tie the server's life to the proxy's.
func childAttr() *syscall.SysProcAttr { return nil }
