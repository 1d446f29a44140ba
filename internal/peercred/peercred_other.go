//go:build !linux

package peercred

import (
	"errors"
	"net"
)

// Of would return the uid and pid of the process at the other end of
// conn. Only Linux is supported: elsewhere every peer is refused, so the
// local channel serves nobody rather than anybody.
func Of(conn *net.UnixConn) (uid, pid int, err error) {
	return 0, 0, errors.New("peer credentials are not supported on this system")
}

// Ancestry would return pid and its ancestors. Only Linux is supported.
func Ancestry(pid int) ([]int, error) {
	return nil, errors.New("process ancestry is not supported on this system")
}
