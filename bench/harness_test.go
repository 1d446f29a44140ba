//go:build linux

package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
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

// conn is the fake editor's end of one connection: the process it started
// (the agent itself, the relay, or the broker) and that process's stdio.
type conn struct {
	cmd    *exec.Cmd
	in     *os.File // the process's stdin
	out    *os.File // the process's stdout
	r      *lineReader
	stderr *tail
	nextID int
	buf    []byte
	want   []byte
}

// startConn starts the process for config; it has not been sent anything yet.
func startConn(config string) (*conn, error) {
	var cmd *exec.Cmd
	switch config {
	case direct:
		cmd = exec.Command(self)
		cmd.Env = childEnv(roleAgent)
	case raw:
		cmd = exec.Command(self)
		cmd.Env = childEnv(roleRelay)
	case broker:
		if brokerBin == "" {
			return nil, fmt.Errorf("acp-broker was not built: run with -bench")
		}
		// Default flags: what a user runs. The broker's environment reaches
		// the agent, which is how the test binary knows to play it.
		cmd = exec.Command(brokerBin, "--", self)
		cmd.Env = childEnv(roleAgent)
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
	cmd.Dir = home
	c := &conn{cmd: cmd, in: inW, out: outR, r: newLineReader(outR), stderr: &tail{}}
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
	if _, err := c.call("session/new", fmt.Sprintf(`{"cwd":%q,"mcpServers":[]}`, home)); err != nil {
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

// TestHarness checks, quickly and without the broker, that the fake editor,
// the fake agent and the raw relay speak to each other as the benchmarks
// expect, and that the relay passes the same bytes as the direct pipe.
func TestHarness(t *testing.T) {
	var got [][]byte
	for _, config := range []string{direct, raw} {
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
		if err := c.permissionTurn(); err != nil {
			t.Fatalf("%s: %v", config, c.explain(err))
		}
		got = append(got, all)
	}
	if want := bytes.Repeat(updateLine(300), 5); !bytes.Equal(got[0], want) {
		t.Errorf("direct stream:\n got %q\nwant %q", got[0], want)
	}
	if !bytes.Equal(got[0], got[1]) {
		t.Errorf("the raw relay changed the stream:\n got %q\nwant %q", got[1], got[0])
	}
	var v any
	if err := json.Unmarshal(updateLine(4096), &v); err != nil {
		t.Errorf("an update line is not JSON: %v", err)
	}
}
