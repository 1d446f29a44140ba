package peercred

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

func TestAncestryReachesThisProcess(t *testing.T) {
	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	chain, err := Ancestry(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if chain[0] != cmd.Process.Pid || !slices.Contains(chain, os.Getpid()) {
		t.Fatalf("ancestry of a child = %v, want it to hold %d", chain, os.Getpid())
	}
	self, err := Ancestry(os.Getpid())
	if err != nil || slices.Contains(self, cmd.Process.Pid) {
		t.Fatalf("own ancestry = %v, %v", self, err)
	}
	if _, err := Ancestry(1 << 30); err == nil {
		t.Fatal("the ancestry of a process that does not exist was read")
	}
}
