package mcp

import "syscall"

// childAttr makes the kernel kill the server if the proxy dies without
// ending it: a server must not outlive the only path that governs it.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
