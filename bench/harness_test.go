//go:build linux

package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The three ways the editor reaches the agent.
const (
	direct = "direct"
	raw    = "raw"
	broker = "broker"
)

var configs = []string{direct, raw, broker}

// decided is the broker in decidedHome, whose rules allow the fake agent's
// tool call: the broker answers the permission request itself.
const decided = "decided"

// conn is the fake editor's end of one connection: the process it started
// (the agent itself, the relay, or the broker) and that process's stdio.
type conn struct {
	dir    string // the process's home and working directory, the session's cwd
	cmd    *exec.Cmd
	in     *os.File // the process's stdin
	out    *os.File // the process's stdout
	r      *lineReader
	stderr *tail
	nextID int
	// nextSink is the id of the next sink prompt, 0 before the first.
	nextSink int
	buf      []byte
	want     []byte
}

// startConn starts the process for config; it has not been sent anything yet.
func startConn(config string) (*conn, error) {
	var cmd *exec.Cmd
	dir := home
	switch config {
	case direct:
		cmd = exec.Command(self)
		cmd.Env = childEnv(roleAgent, dir)
	case raw:
		cmd = exec.Command(self)
		cmd.Env = childEnv(roleRelay, dir)
	case broker, decided:
		if brokerBin == "" {
			return nil, fmt.Errorf("acp-broker was not built: run with -bench")
		}
		if config == decided {
			dir = decidedHome
		}
		// Default flags: what a user runs. The broker's environment reaches
		// the agent, which is how the test binary knows to play it.
		cmd = exec.Command(brokerBin, "--", self)
		cmd.Env = childEnv(roleAgent, dir)
	default:
		return nil, fmt.Errorf("unknown configuration %q", config)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd.Dir = dir
	c := &conn{dir: dir, cmd: cmd, in: inW, out: outR, r: newLineReader(outR), stderr: &tail{}}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, c.stderr
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	return c, nil
}

// dial starts a connection and initializes it with one session, s1.
func dial(tb testing.TB, config string) *conn {
	tb.Helper()
	c, err := startConn(config)
	if err != nil {
		tb.Fatalf("%s: starting: %v", config, err)
	}
	tb.Cleanup(func() { c.close(tb) })
	if err := c.initialize(); err != nil {
		tb.Fatalf("%s: %v", config, c.explain(err))
	}
	if _, err := c.call("session/new", fmt.Sprintf(`{"cwd":%q,"mcpServers":[]}`, c.dir)); err != nil {
		tb.Fatalf("%s: session/new: %v", config, c.explain(err))
	}
	return c
}

const initializeParams = `{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true},"clientInfo":{"name":"bench-editor","version":"0.0.0"}}`

func (c *conn) initialize() error {
	_, err := c.call("initialize", initializeParams)
	return err
}

// request writes a request and returns its id.
func (c *conn) request(method, params string) (int, error) {
	id := c.nextID
	c.nextID++
	c.buf = fmt.Appendf(c.buf[:0], `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
	_, err := c.in.Write(c.buf)
	return id, err
}

// call sends a request and returns the next line, which must be its response.
func (c *conn) call(method, params string) ([]byte, error) {
	id, err := c.request(method, params)
	if err != nil {
		return nil, err
	}
	line, err := c.r.line()
	if err != nil {
		return nil, err
	}
	if err := isResponse(line, id); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	return line, nil
}

// isResponse checks that line is a successful response to request id.
func isResponse(line []byte, id int) error {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(line, &m) != nil || string(m.ID) != strconv.Itoa(id) || m.Result == nil {
		return fmt.Errorf("expected the result of request %d, got %.200q", id, line)
	}
	return nil
}

// close ends the connection as an editor does, by closing the process's
// stdin, and waits for it to exit.
func (c *conn) close(tb testing.TB) {
	c.in.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			tb.Errorf("exit: %v", c.explain(err))
		}
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
		tb.Errorf("the process did not exit within 10s of its stdin closing; killed it: %s", c.stderr)
	}
	c.out.Close()
}

func (c *conn) explain(err error) error {
	if s := c.stderr.String(); s != "" {
		return fmt.Errorf("%w; stderr: %s", err, s)
	}
	return err
}

// pid is the process the editor started: the broker or the relay in those
// configurations.
func (c *conn) pid() int { return c.cmd.Process.Pid }

// tail keeps the last few KiB written to it, for error messages.
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - 4096; over > 0 {
		t.b = t.b[over:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.b))
}

// procStatus reads a field of /proc/<pid>/status given in kB, as bytes.
func procStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		rest, ok := bytes.CutPrefix(line, []byte(field+":"))
		if !ok {
			continue
		}
		kb, ok := bytes.CutSuffix(bytes.TrimSpace(rest), []byte(" kB"))
		if !ok {
			break
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(kb)), 10, 64)
		return n << 10, err
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s in kB", pid, field)
}

// cpuTime is the CPU time a process has used so far, summed over its
// threads, in nanoseconds as the scheduler counts them.
func cpuTime(pid int) (time.Duration, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread has exited
		}
		f := bytes.Fields(b)
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s/%s/schedstat: %w", dir, t.Name(), err)
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}

// cpuMeter measures the CPU time the process the editor started (the agent,
// the relay or the broker) spends per op: unlike wall time, it hardly
// depends on what else the machine is doing.
type cpuMeter struct {
	pid   int
	start time.Duration
}

func meterCPU(b *testing.B, c *conn) *cpuMeter {
	t, err := cpuTime(c.pid())
	if err != nil {
		b.Fatal(err)
	}
	return &cpuMeter{pid: c.pid(), start: t}
}

// report reports cpu-ns/op; call it after the timed loop.
func (m *cpuMeter) report(b *testing.B) {
	t, err := cpuTime(m.pid)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(t-m.start)/float64(b.N), "cpu-ns/op")
}

// percentile returns the p-th percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}

// reportLatency reports the median and 99th percentile of the samples.
func reportLatency(b *testing.B, samples []time.Duration) {
	slices.Sort(samples)
	b.ReportMetric(float64(percentile(samples, 50).Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(percentile(samples, 99).Nanoseconds()), "p99-ns")
}

// TestHarness checks, quickly, that the fake editor, the fake agent, the raw
// relay and the broker (built unless -short) speak to each other as the
// benchmarks expect, that every path passes the same bytes as the direct
// pipe, and that the editor's checks fail when they should.
func TestHarness(t *testing.T) {
	checked := []string{direct, raw}
	if !testing.Short() {
		if brokerBin == "" {
			dir := t.TempDir()
			brokerBin = filepath.Join(dir, "acp-broker")
			t.Cleanup(func() { brokerBin = "" })
			if err := goBuild("-o", brokerBin, brokerPackage); err != nil {
				t.Fatal(err)
			}
		}
		checked = append(checked, broker, decided)
	}
	var got [][]byte
	for _, config := range checked {
		c := dial(t, config)
		if _, err := c.call("session/set_mode", setModeParams); err != nil {
			t.Fatalf("%s: %v", config, c.explain(err))
		}
		var all []byte
		id, err := c.request("session/prompt", streamPrompt(300, 5))
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			line, err := c.r.line()
			if err != nil {
				t.Fatalf("%s: %v", config, c.explain(err))
			}
			all = append(append(all, line...), '\n')
		}
		line, err := c.r.line()
		if err != nil {
			t.Fatalf("%s: %v", config, c.explain(err))
		}
		if err := isResponse(line, id); err != nil {
			t.Fatalf("%s: %v", config, err)
		}
		got = append(got, all)
		if err := c.streamExact(updateLine(5000), 5000); err != nil {
			t.Errorf("%s: streamExact: %v", config, c.explain(err))
		}
		if err := c.sinkExact(5000); err != nil {
			t.Errorf("%s: sinkExact: %v", config, c.explain(err))
		}
		sinkLine, idAt := sinkPrompt(300, false)
		if err := c.sink(sinkLine, idAt, 50); err != nil {
			t.Errorf("%s: 50 sink prompts: %v", config, c.explain(err))
		}
		// Where the broker decides, the editor must not be asked, and
		// elsewhere it must be: each turn fails on the other's traffic.
		if config == decided {
			if err := c.decidedTurn(); err != nil {
				t.Fatalf("%s: decided turn: %v", config, c.explain(err))
			}
			if err := c.permissionTurn(); err == nil || !strings.Contains(err.Error(), "tool_call_update") {
				t.Errorf("%s: an asked turn passed where the broker decides: %v", config, err)
			}
		} else {
			if err := c.permissionTurn(); err != nil {
				t.Fatalf("%s: permission turn: %v", config, c.explain(err))
			}
			if err := c.decidedTurn(); err == nil || !strings.Contains(err.Error(), "session/request_permission") {
				t.Errorf("%s: a decided turn passed where the editor is asked: %v", config, err)
			}
		}
	}
	want := bytes.Repeat(updateLine(300), 5)
	for i, config := range checked {
		if !bytes.Equal(got[i], want) {
			t.Errorf("%s: the stream arrived changed:\n got %q\nwant %q", config, got[i], want)
		}
	}
	var v any
	if err := json.Unmarshal(updateLine(4096), &v); err != nil {
		t.Errorf("an update line is not JSON: %v", err)
	}
	line, _ := sinkPrompt(4096, true)
	if err := json.Unmarshal(line, &v); err != nil {
		t.Errorf("a sink prompt is not JSON: %v", err)
	}
}

// TestHarnessRefuses checks that the fake agent and editor notice what the
// benchmarks must not take for a pass: a prompt changed on the way, and a
// tool call the editor did not allow.
func TestHarnessRefuses(t *testing.T) {
	line, idAt := sinkPrompt(5000, true)
	line[len(line)-100] = 'X'
	if err := dial(t, direct).sink(line, idAt, 1); err == nil || !strings.Contains(err.Error(), "differ") {
		t.Errorf("a prompt changed in one byte: %v", err)
	}
	line, idAt = sinkPrompt(5000, false)
	line = append(line[:len(line)-200:len(line)-200], line[len(line)-199:]...)
	if err := dial(t, direct).sink(line, idAt, 1); err == nil || !strings.Contains(err.Error(), "bytes after _meta") {
		t.Errorf("a prompt one byte short: %v", err)
	}
	if err := dial(t, direct).answeredTurn("reject"); err == nil || !strings.Contains(err.Error(), "completed") {
		t.Errorf("a rejected tool call: %v", err)
	}
}
