package rules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if id := os.Getenv("ACP_BROKER_REMEMBERER"); id != "" {
		os.Exit(rememberer(id))
	}
	os.Exit(m.Run())
}

// rememberer is one process of TestConcurrentRememberers: it waits for the
// common start time, remembers "tool<id> run", then waits until it can see
// every other process's answer applied by a policy it loads.
func rememberer(id string) int {
	state := os.Getenv("ACP_BROKER_STATE")
	startNS, _ := strconv.ParseInt(os.Getenv("ACP_BROKER_START"), 10, 64)
	time.Sleep(time.Until(time.Unix(0, startNS)))
	if _, err := StoreIn(state).Add(Entry{Decision: Allow, Scope: "user", Command: "tool" + id + " run x", LearnedAt: time.Now().UTC().Format(time.RFC3339)}); err != nil {
		fmt.Println("add:", err)
		return 1
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, _, err := Load(LoadOptions{Locations: Locations{StateDir: state}})
		if err != nil {
			fmt.Println("load:", err)
			return 1
		}
		seen := 0
		for i := range 20 {
			call, _ := json.Marshal(map[string]any{"kind": "execute", "rawInput": map[string]string{"command": fmt.Sprintf("tool%d run x", i)}})
			if p.Decide(ReadToolCallJSON(call, Context{Cwd: "/"})).Decision == Allow {
				seen++
			}
		}
		if seen == 20 {
			return 0
		}
		if time.Now().After(deadline) {
			fmt.Printf("saw %d of 20 answers applied\n", seen)
			return 1
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
