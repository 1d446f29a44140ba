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

type row struct {
	label, bench, unit string
	scale              float64
	prec               int
}

var rows = []row{
	{"round trip p50 (µs)", "RoundTrip", "p50-ns", 1e3, 1},
	{"round trip p99 (µs)", "RoundTrip", "p99-ns", 1e3, 1},
	{"round trip p50, interleaved (µs)", "RoundTripInterleaved", "p50-ns", 1e3, 1},
	{"round trip p99, interleaved (µs)", "RoundTripInterleaved", "p99-ns", 1e3, 1},
	{"permission turn p50 (µs)", "Permission", "p50-ns", 1e3, 1},
	{"permission turn p99 (µs)", "Permission", "p99-ns", 1e3, 1},
	{"stream 1 KiB updates (MB/s)", "Stream1KiB", "MB/s", 1, 1},
	{"stream 1 MiB updates (MB/s)", "Stream1MiB", "MB/s", 1, 1},
	{"one 20 MiB update (MB/s)", "Memory", "MB/s", 1, 1},
	{"start-up to initialize p50 (ms)", "Startup", "p50-ns", 1e6, 2},
	{"CPU per round trip (µs) [1]", "RoundTrip", "cpu-ns/op", 1e3, 1},
	{"CPU per permission turn (µs) [1]", "Permission", "cpu-ns/op", 1e3, 1},
	{"CPU per 1 KiB update (µs) [1]", "Stream1KiB", "cpu-ns/op", 1e3, 2},
	{"CPU per 1 MiB update (µs) [1]", "Stream1MiB", "cpu-ns/op", 1e3, 0},
	{"CPU per 20 MiB update (ms) [1]", "Memory", "cpu-ns/op", 3e6, 1},
	{"idle RSS (MB)", "Memory", "idle-MB", 1, 1},
	{"peak RSS, 20 MiB update (MB)", "Memory", "peak-MB", 1, 1},
}

// perRep combines the i-th repetition of the configurations' values.
func perRep(r results, bench, unit string, f func(d, raw, b float64) float64) []float64 {
	d, rw, b := r.get(bench, "direct", unit), r.get(bench, "raw", unit), r.get(bench, "broker", unit)
	n := len(b)
	if len(rw) < n {
		n = len(rw)
	}
	if d != nil && len(d) < n {
		n = len(d)
	}
	var out []float64
	for i := range n {
		var dv float64
		if d != nil {
			dv = d[i]
		}
		out = append(out, f(dv, rw[i], b[i]))
	}
	return out
}

type check struct {
	label  string
	values []float64 // one per repetition
	unit   string
	prec   int
	limit  float64
	atMost bool // pass when the median is <= limit (else >=)
	noGate bool // informational: no target
}

func main() {
	res, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchtable: %v\n", err)
		os.Exit(2)
	}
	reps := len(res.get("Stream1KiB", "broker", "MB/s"))
	fmt.Printf("\nacp-broker benchmarks: median [min–max] over %d repetitions\n\n", reps)
	w := []int{34, 26, 26, 26}
	fmt.Printf("%-*s %-*s %-*s %s\n", w[0], "", w[1], "direct", w[2], "raw relay", "broker")
	for _, rw := range rows {
		fmt.Printf("%-*s %-*s %-*s %s\n", w[0], rw.label,
			w[1], cell(res.get(rw.bench, "direct", rw.unit), rw.scale, rw.prec),
			w[2], cell(res.get(rw.bench, "raw", rw.unit), rw.scale, rw.prec),
			cell(res.get(rw.bench, "broker", rw.unit), rw.scale, rw.prec))
	}

	fmt.Println("\n[1] CPU time of the process the editor started: the agent itself (direct),")
	fmt.Println("    the relay or the broker (not counting the agent behind them).")

	added := func(d, raw, b float64) float64 { return (b - d) / (raw - d) }
	ratio := func(_, raw, b float64) float64 { return b / raw }
	checks := []check{
		{label: "added p50 latency, (broker-direct)/(raw-direct)", values: res["RoundTripInterleaved"]["added-p50"], unit: "×", prec: 2, limit: 1.5, atMost: true},
		{label: "  the same from the separate runs", values: perRep(res, "RoundTrip", "p50-ns", added), unit: "×", prec: 2, noGate: true},
		{label: "added p50 permission turn, same ratio", values: perRep(res, "Permission", "p50-ns", added), unit: "×", prec: 2, noGate: true},
		{label: "throughput 1 KiB, broker/raw", values: perRep(res, "Stream1KiB", "MB/s", ratio), unit: "×", prec: 2, limit: 0.6},
		{label: "throughput 1 MiB, broker/raw", values: perRep(res, "Stream1MiB", "MB/s", ratio), unit: "×", prec: 2, limit: 0.6},
		{label: "idle RSS, broker", values: res.get("Memory", "broker", "idle-MB"), unit: " MB", prec: 1, limit: 30, atMost: true},
		{label: "peak RSS / message in flight, broker", values: res.get("Memory", "broker", "peak/msg"), unit: "×", prec: 2, limit: 3, atMost: true},
		{label: "start-up added, broker-direct p50", values: perRep(res, "Startup", "p50-ns", func(d, _, b float64) float64 { return (b - d) / 1e6 }), unit: " ms", prec: 2, limit: 20, atMost: true},
		{label: "  added by the raw relay, for scale", values: perRep(res, "Startup", "p50-ns", func(d, raw, _ float64) float64 { return (raw - d) / 1e6 }), unit: " ms", prec: 2, noGate: true},
	}
	fmt.Printf("\n%-50s %-26s %-10s %s\n", "target", "measured", "limit", "")
	failed := false
	for _, c := range checks {
		got, verdict, limit := "missing", "FAIL", ""
		if c.noGate {
			verdict = ""
		} else {
			op := "≥"
			if c.atMost {
				op = "≤"
			}
			limit = op + " " + strconv.FormatFloat(c.limit, 'f', -1, 64) + c.unit
		}
		if len(c.values) > 0 {
			got = cellUnit(c.values, 1, c.prec, c.unit)
			m := median(c.values)
			switch {
			case c.noGate:
				verdict = "(no target)"
			case c.atMost && m <= c.limit, !c.atMost && m >= c.limit:
				verdict = "pass"
			}
		}
		if verdict == "FAIL" {
			failed = true
		}
		fmt.Printf("%-50s %-26s %-10s %s\n", c.label, got, limit, verdict)
	}
	if failed {
		os.Exit(1)
	}
}
