// Command benchtable reads the output of the bench package's benchmarks
// (`go test -bench`, any -count) and prints the figures as a table, direct /
// raw relay / broker, followed by the performance targets, each checked
// within every repetition and marked pass or FAIL. It exits with status 1
// when a target fails or its figures are missing.
//
// Each cell is the median over the repetitions, with the range in brackets.
package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// results maps "Benchmark/config" and a unit to the values of the
// repetitions, in the order they ran.
type results map[string]map[string][]float64

var line = regexp.MustCompile(`^Benchmark(\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

func parse(r io.Reader) (results, error) {
	res := results{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		f := strings.Fields(m[2])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			if res[m[1]] == nil {
				res[m[1]] = map[string][]float64{}
			}
			res[m[1]][f[i+1]] = append(res[m[1]][f[i+1]], v)
		}
	}
	return res, sc.Err()
}

// get returns a configuration's values: from its sub-benchmark, or, for a
// benchmark that runs all configurations at once, from its "config-unit"
// metric.
func (r results) get(bench, config, unit string) []float64 {
	if v, ok := r[bench+"/"+config]; ok {
		return v[unit]
	}
	return r[bench][config+"-"+unit]
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// cell formats the median and range of v scaled by 1/scale.
func cell(v []float64, scale float64, prec int) string { return cellUnit(v, scale, prec, "") }

// cellUnit is cell with a unit after the median.
func cellUnit(v []float64, scale float64, prec int, unit string) string {
	if len(v) == 0 {
		return "-"
	}
	s := make([]float64, len(v))
	for i, x := range v {
		s[i] = x / scale
	}
	out := strconv.FormatFloat(median(s), 'f', prec, 64) + unit
	if len(s) > 1 {
		out += fmt.Sprintf(" [%s–%s]", strconv.FormatFloat(slices.Min(s), 'f', prec, 64), strconv.FormatFloat(slices.Max(s), 'f', prec, 64))
	}
	return out
}

// row is one line of the figures: bench's unit for each configuration,
// scaled by 1/scale. A row with only is the one configuration that runs it,
// shown in the broker column.
type row struct {
	label, bench, unit string
	scale              float64
	prec               int
	only               string
}

var rows = []row{
	{label: "round trip p50 (µs)", bench: "RoundTrip", unit: "p50-ns", scale: 1e3, prec: 1},
	{label: "round trip p99 (µs)", bench: "RoundTrip", unit: "p99-ns", scale: 1e3, prec: 1},
	{label: "round trip p50, interleaved (µs)", bench: "RoundTripInterleaved", unit: "p50-ns", scale: 1e3, prec: 1},
	{label: "round trip p99, interleaved (µs)", bench: "RoundTripInterleaved", unit: "p99-ns", scale: 1e3, prec: 1},
	{label: "permission turn p50 (µs)", bench: "Permission", unit: "p50-ns", scale: 1e3, prec: 1},
	{label: "permission turn p99 (µs)", bench: "Permission", unit: "p99-ns", scale: 1e3, prec: 1},
	{label: "permission turn p50, interleaved (µs)", bench: "PermissionInterleaved", unit: "p50-ns", scale: 1e3, prec: 1},
	{label: "permission turn p99, interleaved (µs)", bench: "PermissionInterleaved", unit: "p99-ns", scale: 1e3, prec: 1},
	{label: "decided turn p50 (µs) [2]", bench: "PermissionDecided", unit: "p50-ns", scale: 1e3, prec: 1, only: "broker"},
	{label: "decided turn p99 (µs) [2]", bench: "PermissionDecided", unit: "p99-ns", scale: 1e3, prec: 1, only: "broker"},
	{label: "decided turn p50, interleaved (µs) [2]", bench: "PermissionInterleaved", unit: "p50-ns", scale: 1e3, prec: 1, only: "decided"},
	{label: "decided turn p99, interleaved (µs) [2]", bench: "PermissionInterleaved", unit: "p99-ns", scale: 1e3, prec: 1, only: "decided"},
	{label: "updates 1 KiB, streamed (MB/s)", bench: "Stream1KiB", unit: "MB/s", scale: 1, prec: 1},
	{label: "updates 1 MiB, streamed (MB/s)", bench: "Stream1MiB", unit: "MB/s", scale: 1, prec: 1},
	{label: "updates 20 MiB, one at a time (MB/s)", bench: "Stream20MiB", unit: "MB/s", scale: 1, prec: 1},
	{label: "updates 20 MiB, 3 back to back (MB/s)", bench: "Memory", unit: "MB/s", scale: 1, prec: 1},
	{label: "requests 1 KiB, pipelined (MB/s)", bench: "Requests1KiB", unit: "MB/s", scale: 1, prec: 1},
	{label: "requests 1 MiB, pipelined (MB/s)", bench: "Requests1MiB", unit: "MB/s", scale: 1, prec: 1},
	{label: "requests 20 MiB, one at a time (MB/s)", bench: "Requests20MiB", unit: "MB/s", scale: 1, prec: 1},
	{label: "start-up to initialize p50 (ms)", bench: "Startup", unit: "p50-ns", scale: 1e6, prec: 2},
	{label: "CPU per round trip (µs) [1]", bench: "RoundTrip", unit: "cpu-ns/op", scale: 1e3, prec: 1},
	{label: "CPU per permission turn (µs) [1]", bench: "Permission", unit: "cpu-ns/op", scale: 1e3, prec: 1},
	{label: "CPU per decided turn (µs) [1] [2]", bench: "PermissionDecided", unit: "cpu-ns/op", scale: 1e3, prec: 1, only: "broker"},
	{label: "CPU per 1 KiB update (µs) [1]", bench: "Stream1KiB", unit: "cpu-ns/op", scale: 1e3, prec: 2},
	{label: "CPU per 1 MiB update (µs) [1]", bench: "Stream1MiB", unit: "cpu-ns/op", scale: 1e3, prec: 0},
	{label: "CPU per 20 MiB update (ms) [1]", bench: "Stream20MiB", unit: "cpu-ns/op", scale: 1e6, prec: 1},
	{label: "CPU per 1 KiB request (µs) [1]", bench: "Requests1KiB", unit: "cpu-ns/op", scale: 1e3, prec: 2},
	{label: "CPU per 1 MiB request (µs) [1]", bench: "Requests1MiB", unit: "cpu-ns/op", scale: 1e3, prec: 0},
	{label: "CPU per 20 MiB request (ms) [1]", bench: "Requests20MiB", unit: "cpu-ns/op", scale: 1e6, prec: 1},
	{label: "idle RSS (MB)", bench: "Memory", unit: "idle-MB", scale: 1, prec: 1},
	{label: "peak RSS, 3×20 MiB updates (MB)", bench: "Memory", unit: "peak-MB", scale: 1, prec: 1},
}

// perRep combines the i-th repetition of three configurations' values,
// direct's missing (0) when bench has no direct figures.
func perRep(r results, bench, unit string, f func(d, raw, b float64) float64) []float64 {
	return combine(r.get(bench, "direct", unit), r.get(bench, "raw", unit), r.get(bench, "broker", unit), f)
}

// combine applies f to the i-th values of d, raw and b; d may be nil.
func combine(d, raw, b []float64, f func(d, raw, b float64) float64) []float64 {
	n := min(len(raw), len(b))
	if d != nil {
		n = min(n, len(d))
	}
	var out []float64
	for i := range n {
		var dv float64
		if d != nil {
			dv = d[i]
		}
		out = append(out, f(dv, raw[i], b[i]))
	}
	return out
}

// A check is one target: its figure, one per repetition, and its limit.
type check struct {
	label  string
	values []float64
	unit   string
	prec   int
	op     string // "≤", "<" or "≥"; "" for a figure given for scale, with no target
	limit  float64
}

func (c check) passes(m float64) bool {
	switch c.op {
	case "≤":
		return m <= c.limit
	case "<":
		return m < c.limit
	case "≥":
		return m >= c.limit
	}
	return false
}

func main() {
	res, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchtable: %v\n", err)
		os.Exit(2)
	}
	if !report(os.Stdout, res) {
		os.Exit(1)
	}
}

// report prints the figures and the targets, and reports whether every
// target passed.
func report(out io.Writer, res results) bool {
	reps := len(res.get("Stream1KiB", "broker", "MB/s"))
	fmt.Fprintf(out, "\nacp-broker benchmarks: median [min–max] over %d repetitions\n\n", reps)
	w := []int{40, 26, 26, 26}
	fmt.Fprintf(out, "%-*s %-*s %-*s %s\n", w[0], "", w[1], "direct", w[2], "raw relay", "broker")
	for _, rw := range rows {
		d, r, b := res.get(rw.bench, "direct", rw.unit), res.get(rw.bench, "raw", rw.unit), res.get(rw.bench, "broker", rw.unit)
		if rw.only != "" {
			d, r, b = nil, nil, res.get(rw.bench, rw.only, rw.unit)
		}
		fmt.Fprintf(out, "%-*s %-*s %-*s %s\n", w[0], rw.label,
			w[1], cell(d, rw.scale, rw.prec), w[2], cell(r, rw.scale, rw.prec), cell(b, rw.scale, rw.prec))
	}

	fmt.Fprintln(out, "\n[1] CPU time of the process the editor started: the agent itself (direct),")
	fmt.Fprintln(out, "    the relay or the broker (not counting the agent behind them).")
	fmt.Fprintln(out, "[2] the broker answers the permission request from its user rules; the")
	fmt.Fprintln(out, "    editor sees no request (BenchmarkPermissionDecided fails if it does).")
	fmt.Fprintln(out, "An added ratio is +Inf in a repetition where the raw relay added nothing")
	fmt.Fprintln(out, "over direct: too noisy to compare, and counted as failing.")

	// added is the broker's added cost over the raw relay's. Where the raw
	// relay added none (the machine's noise), the ratio says nothing: +Inf,
	// which fails its target instead of passing as a negative ratio would.
	added := func(d, raw, b float64) float64 {
		if raw <= d {
			return math.Inf(1)
		}
		return (b - d) / (raw - d)
	}
	ratio := func(_, raw, b float64) float64 { return b / raw }
	// decidedOverRaw is the decided turn's p50 over the raw relay's forwarded
	// turn, each repetition against its own.
	decidedOverRaw := func(bench string) []float64 {
		return combine(nil, res.get("Permission"+bench, "raw", "p50-ns"), res.get("Permission"+bench, "decided", "p50-ns"), ratio)
	}
	separateDecided := combine(nil, res.get("Permission", "raw", "p50-ns"), res.get("PermissionDecided", "broker", "p50-ns"), ratio)
	throughput := func(what, bench string) check {
		return check{label: what + ": broker/raw MB/s", values: perRep(res, bench, "MB/s", ratio), unit: "×", prec: 2, op: "≥", limit: 0.9}
	}
	cpu := func(what, bench, op string, limit float64) check {
		return check{label: "CPU per " + what + ": broker/raw cpu-ns/op", values: perRep(res, bench, "cpu-ns/op", ratio), unit: "×", prec: 2, op: op, limit: limit}
	}
	checks := []check{
		{label: "round trip, interleaved: added p50 (broker−direct)/(raw−direct)", values: perRep(res, "RoundTripInterleaved", "p50-ns", added), unit: "×", prec: 2, op: "≤", limit: 1.2},
		{label: "  the same from the separate runs", values: perRep(res, "RoundTrip", "p50-ns", added), unit: "×", prec: 2},
		{label: "permission turn, interleaved: added p50, same formula", values: perRep(res, "PermissionInterleaved", "p50-ns", added), unit: "×", prec: 2, op: "≤", limit: 1.5},
		{label: "  the same from the separate runs", values: perRep(res, "Permission", "p50-ns", added), unit: "×", prec: 2},
		{label: "decided turn, interleaved: p50 decided/raw's forwarded turn", values: decidedOverRaw("Interleaved"), unit: "×", prec: 2, op: "≤", limit: 1.0},
		{label: "  the same from the separate runs", values: separateDecided, unit: "×", prec: 2},
		throughput("updates 1 KiB", "Stream1KiB"),
		throughput("updates 1 MiB", "Stream1MiB"),
		throughput("updates 20 MiB, one at a time", "Stream20MiB"),
		throughput("requests 1 KiB", "Requests1KiB"),
		throughput("requests 1 MiB", "Requests1MiB"),
		throughput("requests 20 MiB, one at a time", "Requests20MiB"),
		cpu("1 KiB update", "Stream1KiB", "≤", 1.5),
		cpu("20 MiB update", "Stream20MiB", "≤", 1.5),
		cpu("1 MiB update", "Stream1MiB", "", 0),
		cpu("1 KiB request", "Requests1KiB", "", 0),
		cpu("1 MiB request", "Requests1MiB", "", 0),
		cpu("20 MiB request", "Requests20MiB", "", 0),
		cpu("round trip", "RoundTrip", "", 0),
		cpu("permission turn", "Permission", "", 0),
		{label: "start-up: added p50 (broker−direct)/(raw−direct)", values: perRep(res, "Startup", "p50-ns", added), unit: "×", prec: 2, op: "≤", limit: 2},
		{label: "  added by the broker, broker−direct", values: perRep(res, "Startup", "p50-ns", func(d, _, b float64) float64 { return (b - d) / 1e6 }), unit: " ms", prec: 2},
		{label: "  added by the raw relay, raw−direct", values: perRep(res, "Startup", "p50-ns", func(d, raw, _ float64) float64 { return (raw - d) / 1e6 }), unit: " ms", prec: 2},
		{label: "idle RSS, broker", values: res.get("Memory", "broker", "idle-MB"), unit: " MB", prec: 1, op: "≤", limit: 30},
		{label: "peak RSS / message in flight, broker peak-MB/20 MiB", values: res.get("Memory", "broker", "peak/msg"), unit: "×", prec: 2, op: "≤", limit: 3},
		{label: "rules read + decide p99, 1,000 rules (rules/ BenchmarkDecide)", values: res.get("Decide", "rules=1000", "p99-µs"), unit: " µs", prec: 1, op: "<", limit: 50},
		{label: "  p50, 1,000 rules", values: res.get("Decide", "rules=1000", "p50-µs"), unit: " µs", prec: 1},
		{label: "  p99, 0 rules", values: res.get("Decide", "rules=0", "p99-µs"), unit: " µs", prec: 1},
		{label: "  p50, 0 rules", values: res.get("Decide", "rules=0", "p50-µs"), unit: " µs", prec: 1},
	}
	fmt.Fprintf(out, "\n%-66s %-26s %-8s %s\n", "target", "measured", "limit", "")
	failed := false
	for _, c := range checks {
		got, verdict, limit := "missing", "FAIL", ""
		if c.op == "" {
			verdict = "(no target)"
		} else {
			limit = c.op + " " + strconv.FormatFloat(c.limit, 'f', -1, 64) + c.unit
		}
		if len(c.values) > 0 {
			got = cellUnit(c.values, 1, c.prec, c.unit)
			if c.op != "" && c.passes(median(c.values)) {
				verdict = "pass"
			}
		}
		if verdict == "FAIL" {
			failed = true
		}
		fmt.Fprintf(out, "%-66s %-26s %-8s %s\n", c.label, got, limit, verdict)
	}
	return !failed
}
