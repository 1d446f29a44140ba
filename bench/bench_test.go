//go:build linux

package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
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
	p50 := interleave(b, configs, func(_ string, c *conn) error {
		_, err := c.setMode()
		return err
	})
	// configs is direct, raw, broker.
	b.ReportMetric((p50[2]-p50[0])/(p50[1]-p50[0]), "added-p50")
}

// interleave opens a connection for each config and, each op, runs turn on
// every one in turn, the order rotating each op. It reports each config's
// p50 and p99 (config-p50-ns, config-p99-ns) and returns the p50s.
func interleave(b *testing.B, names []string, turn func(config string, c *conn) error) []float64 {
	conns := make([]*conn, len(names))
	for i, config := range names {
		conns[i] = dial(b, config)
	}
	samples := make([][]time.Duration, len(names))
	n := 0
	for b.Loop() {
		for k := range names {
			i := (n + k) % len(names)
			start := time.Now()
			if err := turn(names[i], conns[i]); err != nil {
				b.Fatalf("%s: %v", names[i], conns[i].explain(err))
			}
			samples[i] = append(samples[i], time.Since(start))
		}
		n++
	}
	p50 := make([]float64, len(names))
	for i, config := range names {
		slices.Sort(samples[i])
		p50[i] = float64(percentile(samples[i], 50).Nanoseconds())
		b.ReportMetric(p50[i], config+"-p50-ns")
		b.ReportMetric(float64(percentile(samples[i], 99).Nanoseconds()), config+"-p99-ns")
	}
	return p50
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
// intercepts the request and, with no rules configured, asks the editor,
// which answers at once.
func BenchmarkPermission(b *testing.B) {
	for _, config := range configs {
		b.Run(config, func(b *testing.B) { benchTurns(b, config, (*conn).permissionTurn) })
	}
}

// BenchmarkPermissionDecided is BenchmarkPermission with the broker in a
// home whose user rules allow the tool call: the broker answers the request
// itself, and the editor sees the tool_call, the tool_call_update and the
// prompt's answer. Only the broker can decide, so its baseline is the raw
// relay's BenchmarkPermission, where the editor answers at once; the
// sub-benchmark is named broker.
func BenchmarkPermissionDecided(b *testing.B) {
	b.Run(broker, func(b *testing.B) { benchTurns(b, decided, (*conn).decidedTurn) })
}

// BenchmarkPermissionInterleaved runs the permission turns of
// BenchmarkPermission (direct, raw, broker) and of
// BenchmarkPermissionDecided (decided) on four connections in turn, as
// BenchmarkRoundTripInterleaved does, so that the added latency and the
// decided turn's ratio to the raw relay compare turns that met the same load.
func BenchmarkPermissionInterleaved(b *testing.B) {
	interleave(b, []string{direct, raw, broker, decided}, func(config string, c *conn) error {
		if config == decided {
			return c.decidedTurn()
		}
		return c.permissionTurn()
	})
}

// benchTurns times turn on one connection of config.
func benchTurns(b *testing.B, config string, turn func(*conn) error) {
	c := dial(b, config)
	var samples []time.Duration
	cpu := meterCPU(b, c)
	for b.Loop() {
		start := time.Now()
		if err := turn(c); err != nil {
			b.Fatal(c.explain(err))
		}
		samples = append(samples, time.Since(start))
	}
	cpu.report(b)
	reportLatency(b, samples)
}

// permissionTurn plays the editor's side of one permission prompt, allowing
// the tool call once.
func (c *conn) permissionTurn() error { return c.answeredTurn("allow-once") }

// answeredTurn is permissionTurn with the editor choosing optionID.
func (c *conn) answeredTurn(optionID string) error {
	id, err := c.request("session/prompt", permissionPrompt)
	if err != nil {
		return err
	}
	if _, err := c.expect("session/update", `"sessionUpdate":"tool_call",`); err != nil {
		return err
	}
	line, err := c.expect("session/request_permission")
	if err != nil {
		return err
	}
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return err
	}
	c.buf = fmt.Appendf(c.buf[:0], `{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":%q}}}`+"\n", m.ID, optionID)
	if _, err := c.in.Write(c.buf); err != nil {
		return err
	}
	return c.toolCallDone(id)
}

// decidedTurn plays the editor's side of a permission prompt the broker
// answers itself: the editor is not asked, and the agent reports the tool
// call completed, which it does only when it was allowed once.
func (c *conn) decidedTurn() error {
	id, err := c.request("session/prompt", permissionPrompt)
	if err != nil {
		return err
	}
	if _, err := c.expect("session/update", `"sessionUpdate":"tool_call",`); err != nil {
		return err
	}
	if err := c.toolCallDone(id); err != nil {
		if strings.Contains(err.Error(), "session/request_permission") {
			return fmt.Errorf("the broker did not decide the request, the editor was asked: %w", err)
		}
		return err
	}
	return nil
}

// toolCallDone reads the end of a permission turn: the tool_call_update
// saying the call completed, then the answer to prompt id.
func (c *conn) toolCallDone(id int) error {
	if _, err := c.expect("session/update", `"sessionUpdate":"tool_call_update",`, `"status":"completed"`); err != nil {
		return err
	}
	line, err := c.r.line()
	if err != nil {
		return err
	}
	return isResponse(line, id)
}

// expect reads the next line and checks that it is a method message
// containing each of parts.
func (c *conn) expect(method string, parts ...string) ([]byte, error) {
	line, err := c.r.line()
	if err != nil {
		return nil, err
	}
	var m struct {
		Method string `json:"method"`
	}
	if err := json.Unmarshal(line, &m); err != nil || m.Method != method {
		return nil, fmt.Errorf("expected %s %q, got %.300q", method, parts, line)
	}
	for _, p := range parts {
		if !bytes.Contains(line, []byte(p)) {
			return nil, fmt.Errorf("expected %s %q, got %.300q", method, parts, line)
		}
	}
	return line, nil
}

// BenchmarkStream1KiB and BenchmarkStream1MiB measure throughput of an
// agent streaming agent_message_chunk updates whose text is 1 KiB or 1 MiB,
// back to back. One op is one update; MB/s counts whole lines.
func BenchmarkStream1KiB(b *testing.B) { benchStream(b, 1<<10) }
func BenchmarkStream1MiB(b *testing.B) { benchStream(b, 1<<20) }

func benchStream(b *testing.B, size int) {
	line := updateLine(size)
	for _, config := range configs {
		b.Run(config, func(b *testing.B) {
			c := dial(b, config)
			if err := c.streamExact(line, size); err != nil {
				b.Fatal(c.explain(err))
			}
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

// BenchmarkStream20MiB measures one 20 MiB update at a time: one op is a
// prompt, the one update the agent streams for it, read whole, and the
// prompt's answer.
func BenchmarkStream20MiB(b *testing.B) {
	line := updateLine(bigMessage)
	for _, config := range configs {
		b.Run(config, func(b *testing.B) {
			c := dial(b, config)
			if err := c.streamExact(line, bigMessage); err != nil {
				b.Fatal(c.explain(err))
			}
			b.SetBytes(int64(len(line)))
			cpu := meterCPU(b, c)
			for b.Loop() {
				if err := c.stream(line, bigMessage, 1); err != nil {
					b.Fatal(c.explain(err))
				}
			}
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

// streamExact asks for one update of size bytes and checks that it arrives
// byte for byte as the agent wrote it, line.
func (c *conn) streamExact(line []byte, size int) error {
	id, err := c.request("session/prompt", streamPrompt(size, 1))
	if err != nil {
		return err
	}
	got, err := c.r.line()
	if err != nil {
		return err
	}
	if !bytes.Equal(got, line[:len(line)-1]) {
		return fmt.Errorf("the update of %d bytes arrived changed: got %d bytes starting %.128q", len(line)-1, len(got), got)
	}
	if got, err = c.r.line(); err != nil {
		return err
	}
	return isResponse(got, id)
}

// BenchmarkRequests1KiB and BenchmarkRequests1MiB measure throughput of the
// editor sending session/prompt requests whose text is 1 KiB or 1 MiB,
// pipelined: a writer sends them back to back while the editor reads the
// agent's answers, which come at once. One op is one request; MB/s counts
// the requests' whole lines.
func BenchmarkRequests1KiB(b *testing.B) { benchRequests(b, 1<<10) }
func BenchmarkRequests1MiB(b *testing.B) { benchRequests(b, 1<<20) }

func benchRequests(b *testing.B, size int) {
	line, idAt := sinkPrompt(size, false)
	for _, config := range configs {
		b.Run(config, func(b *testing.B) {
			c := dial(b, config)
			if err := c.sinkExact(size); err != nil {
				b.Fatal(c.explain(err))
			}
			b.SetBytes(int64(len(line)))
			cpu := meterCPU(b, c)
			b.ResetTimer()
			if err := c.sink(line, idAt, b.N); err != nil {
				b.Fatal(c.explain(err))
			}
			b.StopTimer()
			cpu.report(b)
		})
	}
}

// BenchmarkRequests20MiB measures one 20 MiB request at a time: one op is a
// session/prompt whose text is 20 MiB, sent whole, and its answer.
func BenchmarkRequests20MiB(b *testing.B) {
	line, idAt := sinkPrompt(bigMessage, false)
	for _, config := range configs {
		b.Run(config, func(b *testing.B) {
			c := dial(b, config)
			if err := c.sinkExact(bigMessage); err != nil {
				b.Fatal(c.explain(err))
			}
			b.SetBytes(int64(len(line)))
			cpu := meterCPU(b, c)
			for b.Loop() {
				if err := c.sink(line, idAt, 1); err != nil {
					b.Fatal(c.explain(err))
				}
			}
			cpu.report(b)
		})
	}
}

// sink sends count copies of the sink prompt line, numbered from the
// connection's next sink id, from a writer goroutine while it reads and
// checks the agent's answers, in order.
func (c *conn) sink(line []byte, idAt, count int) error {
	first := c.nextSink
	if first == 0 {
		first = firstSinkID
	}
	c.nextSink = first + count
	if c.nextSink > 9_999_999 {
		return fmt.Errorf("more than %d sink prompts on one connection", 9_999_999-firstSinkID)
	}
	written := make(chan error, 1)
	go func() {
		for i := range count {
			renumber(line, idAt, first+i)
			if _, err := c.in.Write(line); err != nil {
				written <- err
				return
			}
		}
		written <- nil
	}()
	var err error
	for i := 0; i < count && err == nil; i++ {
		var got []byte
		if got, err = c.r.line(); err == nil {
			c.want = append(strconv.AppendInt(append(c.want[:0], `{"jsonrpc":"2.0","id":`...), int64(first+i), 10), `,"result":{"stopReason":"end_turn"}}`...)
			if !bytes.Equal(got, c.want) {
				err = fmt.Errorf("got %.300q, want %q", got, c.want)
			}
		}
	}
	if err != nil {
		c.in.Close() // unblocks the writer; the connection is done
	}
	if werr := <-written; err == nil {
		err = werr
	}
	return err
}

// sinkExact sends one sink prompt of size bytes that the agent compares
// byte for byte with what the editor built.
func (c *conn) sinkExact(size int) error {
	line, idAt := sinkPrompt(size, true)
	return c.sink(line, idAt, 1)
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
