//go:build linux

package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"
)

// setModeParams make a session/set_mode request of about 200 bytes, the
// shape of the small requests an editor sends while the user works.
const setModeParams = `{"sessionId":"s1","modeId":"acceptEdits","_meta":{"client":"bench-editor","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}`

// streamPrompt asks the fake agent to stream count updates of size bytes.
func streamPrompt(size, count int) string {
	return fmt.Sprintf(`{"sessionId":"s1","prompt":[{"type":"text","text":"Explain this repository."}],"_meta":{"bench":{"stream":{"size":%d,"count":%d}}}}`, size, count)
}

const permissionPrompt = `{"sessionId":"s1","prompt":[{"type":"text","text":"Push the branch."}],"_meta":{"bench":{"permission":true}}}`

// BenchmarkRoundTrip measures the editor's wait for the answer to a small
// request: ns/op is the mean, p50-ns and p99-ns the percentiles.
func BenchmarkRoundTrip(b *testing.B) {
	for _, config := range configs {
		b.Run(config, func(b *testing.B) {
			c := dial(b, config)
			var samples []time.Duration
			cpu := meterCPU(b, c)
			for b.Loop() {
				d, err := c.setMode()
				if err != nil {
					b.Fatal(c.explain(err))
				}
				samples = append(samples, d)
			}
			cpu.report(b)
			reportLatency(b, samples)
		})
	}
}

// BenchmarkRoundTripInterleaved is BenchmarkRoundTrip with the three
// connections open at once and used in turn, the order rotating each op, so
// that all three meet the same load on a busy machine: the fairest reading of
// the broker's added latency. One op is one round trip on each connection.
// It reports each configuration's p50 and p99, and added-p50, the broker's
// added median latency over the raw relay's, (broker-direct)/(raw-direct).
func BenchmarkRoundTripInterleaved(b *testing.B) {
	conns := make([]*conn, len(configs))
	for i, config := range configs {
		conns[i] = dial(b, config)
	}
	samples := make([][]time.Duration, len(configs))
	n := 0
	for b.Loop() {
		for k := range configs {
			i := (n + k) % len(configs)
			d, err := conns[i].setMode()
			if err != nil {
				b.Fatalf("%s: %v", configs[i], conns[i].explain(err))
			}
			samples[i] = append(samples[i], d)
		}
		n++
	}
	p50 := make([]float64, len(configs))
	for i, config := range configs {
		slices.Sort(samples[i])
		p50[i] = float64(percentile(samples[i], 50).Nanoseconds())
		b.ReportMetric(p50[i], config+"-p50-ns")
		b.ReportMetric(float64(percentile(samples[i], 99).Nanoseconds()), config+"-p99-ns")
	}
	// configs is direct, raw, broker.
	b.ReportMetric((p50[2]-p50[0])/(p50[1]-p50[0]), "added-p50")
}

// setMode sends a session/set_mode request, waits for its answer, and
// returns how long that took.
func (c *conn) setMode() (time.Duration, error) {
	start := time.Now()
	id, err := c.request("session/set_mode", setModeParams)
	if err != nil {
		return 0, err
	}
	line, err := c.r.line()
	if err != nil {
		return 0, err
	}
	d := time.Since(start)
	c.want = fmt.Appendf(c.want[:0], `{"jsonrpc":"2.0","id":%d,"result":{}}`, id)
	if !bytes.Equal(line, c.want) {
		return d, fmt.Errorf("got %q, want %q", line, c.want)
	}
	return d, nil
}

// BenchmarkPermission measures a prompt turn in which the agent asks the
// editor's permission: a tool_call update, session/request_permission and
// its answer, a tool_call_update, and the prompt's answer. The broker
// intercepts the request and, with no rules configured, asks the editor.
func BenchmarkPermission(b *testing.B) {
	for _, config := range configs {
		b.Run(config, func(b *testing.B) {
			c := dial(b, config)
			var samples []time.Duration
			cpu := meterCPU(b, c)
			for b.Loop() {
				start := time.Now()
				if err := c.permissionTurn(); err != nil {
					b.Fatal(c.explain(err))
				}
				samples = append(samples, time.Since(start))
			}
			cpu.report(b)
			reportLatency(b, samples)
		})
	}
}

// permissionTurn plays the editor's side of one permission prompt.
func (c *conn) permissionTurn() error {
	id, err := c.request("session/prompt", permissionPrompt)
	if err != nil {
		return err
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	for _, want := range []string{"session/update", "session/request_permission"} {
		line, err := c.r.line()
		if err != nil {
			return err
		}
		if err := json.Unmarshal(line, &m); err != nil || m.Method != want {
			return fmt.Errorf("expected %s, got %.200q", want, line)
		}
	}
	c.buf = fmt.Appendf(c.buf[:0], `{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}`+"\n", m.ID)
	if _, err := c.in.Write(c.buf); err != nil {
		return err
	}
	line, err := c.r.line()
	if err != nil {
		return err
	}
	if !bytes.Contains(line, []byte(`"tool_call_update"`)) {
		return fmt.Errorf("expected the tool_call_update, got %.200q", line)
	}
	if line, err = c.r.line(); err != nil {
		return err
	}
	return isResponse(line, id)
}

// BenchmarkStream1KiB and BenchmarkStream1MiB measure throughput of an
// agent streaming agent_message_chunk updates whose text is 1 KiB or 1 MiB.
// One op is one update; MB/s counts whole lines.
func BenchmarkStream1KiB(b *testing.B) { benchStream(b, 1<<10) }
func BenchmarkStream1MiB(b *testing.B) { benchStream(b, 1<<20) }

func benchStream(b *testing.B, size int) {
	line := updateLine(size)
	for _, config := range configs {
		b.Run(config, func(b *testing.B) {
			c := dial(b, config)
			b.SetBytes(int64(len(line)))
			cpu := meterCPU(b, c)
			b.ResetTimer()
			if err := c.stream(line, size, b.N); err != nil {
				b.Fatal(c.explain(err))
			}
			b.StopTimer()
			cpu.report(b)
		})
	}
}

// stream asks for count updates of size bytes and reads them all, checking
// each line's length and start.
func (c *conn) stream(line []byte, size, count int) error {
	id, err := c.request("session/prompt", streamPrompt(size, count))
	if err != nil {
		return err
	}
	for i := range count {
		n, head, err := c.r.skip()
		if err != nil {
			return err
		}
		if n != len(line)-1 || !bytes.HasPrefix(line, head) {
			return fmt.Errorf("update %d: got %d bytes starting %.128q, want %d starting %.128q", i, n, head, len(line)-1, line)
		}
	}
	resp, err := c.r.line()
	if err != nil {
		return err
	}
	return isResponse(resp, id)
}

// bigMessage is the text size of the updates used to measure peak memory,
// and bigCount how many the agent streams back to back in one op: always
// several, so that what one message leaves behind meets the next whatever b.N.
const (
	bigMessage = 20 << 20
	bigCount   = 3
)

// BenchmarkMemory reports the resident memory of the process between editor
// and agent (the relay or the broker): idle-MB after initialize and
// session/new, peak-MB (VmHWM) after b.N×3 updates of 20 MiB have passed, and
// peak/msg, the peak over the size of one update, the largest message in
// flight. MB are 10^6 bytes; one op is the three updates.
func BenchmarkMemory(b *testing.B) {
	line := updateLine(bigMessage)
	for _, config := range []string{raw, broker} {
		b.Run(config, func(b *testing.B) {
			c := dial(b, config)
			time.Sleep(100 * time.Millisecond) // let start-up settle
			idle, err := procStatus(c.pid(), "VmRSS")
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(bigCount * len(line)))
			cpu := meterCPU(b, c)
			b.ResetTimer()
			for range b.N {
				if err := c.stream(line, bigMessage, bigCount); err != nil {
					b.Fatal(c.explain(err))
				}
			}
			b.StopTimer()
			cpu.report(b)
			peak, err := procStatus(c.pid(), "VmHWM")
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(idle)/1e6, "idle-MB")
			b.ReportMetric(float64(peak)/1e6, "peak-MB")
			b.ReportMetric(float64(peak)/float64(len(line)), "peak/msg")
		})
	}
}

// BenchmarkStartup measures the time from starting the editor's command to
// the answer to initialize: the agent alone (direct), or behind the relay or
// the broker. Shutting down is not timed.
func BenchmarkStartup(b *testing.B) {
	for _, config := range configs {
		b.Run(config, func(b *testing.B) {
			samples := make([]time.Duration, 0, b.N)
			for range b.N {
				start := time.Now()
				c, err := startConn(config)
				if err != nil {
					b.Fatal(err)
				}
				err = c.initialize()
				samples = append(samples, time.Since(start))
				b.StopTimer()
				c.close(b)
				if err != nil {
					b.Fatal(c.explain(err))
				}
				b.StartTimer()
			}
			slices.Sort(samples)
			reportLatency(b, samples)
		})
	}
}
