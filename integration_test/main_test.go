//go:build linux

package integration

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Paths of the binaries built once by TestMain.
var (
	binDir       string // holds fakeagent and sdkagent, prepended to PATH for the broker
	homeDir      string // HOME for every process the tests start
	brokerBin    string
	fakeAgentBin string
	sdkAgentBin  string
	mcpServerBin string
	// noProxyConfig turns the MCP proxy off, for tests of the relay alone:
	// with it the broker changes no message.
	noProxyConfig string
)

// tmpDir is TMPDIR for every process the tests start: what a broker killed
// with SIGKILL (as the tests' cleanup does) leaves there, its MCP proxies'
// socket directory say, goes with the run.
var tmpDir string

// waitTimeout bounds every wait in this package: a hang fails the test instead
// of blocking CI.
const waitTimeout = 60 * time.Second

// adapterWait bounds every wait of the real-adapter tests: Node starting a
// large bundle, and the adapter's own work, take minutes on a busy machine.
const adapterWait = 3 * time.Minute

// adapterShutdownGrace is the real-adapter brokers' --shutdown-grace: an
// adapter exits at end of input, but on a busy machine gemini-cli took more
// than the default 5 s (and was killed, status 137). One that never exits
// still fails the test, within adapterWait.
const adapterShutdownGrace = "2m"

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "acpb-it-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	// The broker reads rule files from the user's config directory and
	// appends an audit log to the state directory: give it an empty home, so
	// the developer's own rules do not change the results and nothing is
	// written outside the temporary directory.
	homeDir = filepath.Join(dir, "home")
	if err := os.Mkdir(homeDir, 0o700); err != nil {
		fmt.Fprintf(os.Stderr, "integration: %v\n", err)
		return 1
	}
	tmpDir = filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmpDir, 0o700); err != nil {
		fmt.Fprintf(os.Stderr, "integration: %v\n", err)
		return 1
	}
	brokerBin = filepath.Join(dir, "acp-broker")
	fakeAgentBin = filepath.Join(dir, "fakeagent")
	sdkAgentBin = filepath.Join(dir, "sdkagent")
	mcpServerBin = filepath.Join(dir, "mcpserver")
	noProxyConfig = filepath.Join(dir, "no-mcp-proxy.toml")
	if err := os.WriteFile(noProxyConfig, []byte("[mcp]\nproxy = false\n"), 0o600); err != nil {
		fmt.Fprintf(os.Stderr, "integration: %v\n", err)
		return 1
	}

	const module = "github.com/acp-broker/acp-broker"
	if err := goBuild("-o", dir+string(filepath.Separator),
		module+"/integration_test/internal/fakeagent",
		module+"/integration_test/internal/sdkagent",
		module+"/integration_test/internal/mcpserver"); err != nil {
		fmt.Fprintf(os.Stderr, "integration: building the fake agents failed:\n%v\n", err)
		return 1
	}

	// ACP_BROKER_TEST_BINARY runs the suite against an already-built broker
	// (a release build, say) instead of building one from this tree.
	if prebuilt := os.Getenv("ACP_BROKER_TEST_BINARY"); prebuilt != "" {
		brokerBin = prebuilt
	} else {
		args := []string{"-o", brokerBin}
		if raceEnabled {
			// A race in the broker fails the tests that provoke it: the race
			// runtime prints a report on stderr and changes the exit status.
			args = append(args, "-race")
		}
		args = append(args, module+"/cmd/acp-broker")
		if err := goBuild(args...); err != nil {
			fmt.Fprintf(os.Stderr, "integration: building acp-broker failed:\n%v\n", err)
			return 1
		}
	}
	return m.Run()
}

// readSources reads every Go source and module file of the module. The
// binaries are built by a `go build` subprocess, which go test's result
// cache cannot see; files a test reads are part of the cache key, so a
// change anywhere in the broker reruns this package rather than replaying a
// stale pass. Only reads made while tests run count (go test starts
// recording them in m.Run), so every test that starts a process calls it
// through trackSources.
var sourcesRead = sync.OnceValue(func() error { return readSources("..") })

// trackSources makes the module's sources part of go test's cache key for
// this run.
func trackSources(t testing.TB) {
	t.Helper()
	if err := sourcesRead(); err != nil {
		t.Fatalf("reading the module's sources: %v", err)
	}
}

func readSources(root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".go") || d.Name() == "go.mod" || d.Name() == "go.sum") {
			_, err = os.ReadFile(path)
		}
		return err
	})
}

func goBuild(args ...string) error {
	cmd := exec.Command("go", append([]string{"build"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}
