//go:build linux

package bench

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// roleEnv makes the test binary play a part other than the test runner: the
// fake agent or the raw relay. Every process in a configuration is therefore
// a real subprocess, started the way an editor or the broker starts it.
const roleEnv = "ACP_BROKER_BENCH_ROLE"

const (
	roleAgent = "agent"
	roleRelay = "relay"
)

// prebuiltEnv names an already-built broker to measure (a release build, or
// one built with extra instrumentation) instead of building ./cmd/acp-broker.
const prebuiltEnv = "ACP_BROKER_BENCH_BINARY"

const brokerPackage = "github.com/acp-broker/acp-broker/cmd/acp-broker"

var (
	// self is this test binary, re-executed as the agent and the relay.
	self string
	// brokerBin is the acp-broker binary; set only when benchmarks run.
	brokerBin string
	// home is the home, configuration and state directory, and the working
	// directory, of every process started: the broker reads no rules and
	// writes no audit log of the user's.
	home string
	// decidedHome is the home of the decided configuration: its user rule
	// file allows the fake agent's tool call.
	decidedHome string
)

// decidingRules allow the command of the fake agent's tool call (git push),
// so that the broker answers its permission request itself.
const decidingRules = `[[rule]]
id = "bench-push"
decision = "allow"
reason = "the bench agent's tool call"
command = ["git push"]
`

func TestMain(m *testing.M) {
	switch role := os.Getenv(roleEnv); role {
	case "":
	case roleAgent:
		os.Exit(runAgent(os.Stdin, os.Stdout))
	case roleRelay:
		os.Exit(runRelay())
	default:
		fmt.Fprintf(os.Stderr, "bench: unknown %s=%q\n", roleEnv, role)
		os.Exit(2)
	}
	flag.Parse()
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	var err error
	if self, err = os.Executable(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: finding the test binary: %v\n", err)
		return 1
	}
	if home, err = os.MkdirTemp("", "acpb-bench-home-"); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	defer os.RemoveAll(home)
	// The user layer's file, as rules.DefaultLocations finds it under the
	// XDG_CONFIG_HOME that childEnv sets.
	decidedHome = filepath.Join(home, "decided")
	userRules := filepath.Join(decidedHome, "config", "acp-broker", "config.toml")
	if err := os.MkdirAll(filepath.Dir(userRules), 0o700); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	if err := os.WriteFile(userRules, []byte(decidingRules), 0o600); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	// The broker is built only for benchmarks, so `go test ./bench/` stays quick.
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		if brokerBin = os.Getenv(prebuiltEnv); brokerBin == "" {
			dir, err := os.MkdirTemp("", "acpb-bench-")
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench: %v\n", err)
				return 1
			}
			defer os.RemoveAll(dir)
			brokerBin = filepath.Join(dir, "acp-broker")
			if err := goBuild("-o", brokerBin, brokerPackage); err != nil {
				fmt.Fprintf(os.Stderr, "bench: error: cannot build acp-broker, so there is nothing to measure:\n%v\n", err)
				return 1
			}
		}
	}
	return m.Run()
}

func goBuild(args ...string) error {
	cmd := exec.Command("go", append([]string{"build"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// childEnv is the environment of a process playing role, in home unless
// home is "" (then it inherits this process's). A race-enabled binary would
// otherwise sleep a second at exit.
func childEnv(role, home string) []string {
	env := append(os.Environ(), roleEnv+"="+role, "GORACE=atexit_sleep_ms=0")
	if home != "" {
		env = append(env, "HOME="+home, "XDG_CONFIG_HOME="+home+"/config", "XDG_STATE_HOME="+home+"/state")
	}
	return env
}
