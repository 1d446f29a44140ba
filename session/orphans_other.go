//go:build !linux

package session

import "syscall"

// Outside Linux there is no child subreaper: descendants that leave the
// agent's process group are re-parented to init and out of the broker's
// reach. The process-group kill still ends everything that stayed in it.

func adoptOrphans()                    {}
func orphans() []int                   { return nil }
func signalOrphans(sig syscall.Signal) {}
func reapOrphans()                     {}
func killOrphans()                     {}
