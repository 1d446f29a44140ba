package rules

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// ruleFile writes n rules of the shapes users write: commands mostly, then
// paths, URLs and MCP tools, a tenth of them deny rules.
func ruleFile(n int) string {
	var b strings.Builder
	programs := []string{"git", "npm", "go", "cargo", "make", "docker", "kubectl", "python", "node", "ls"}
	for i := range n {
		decision := "allow"
		if i%10 == 0 {
			decision = "deny"
		}
		fmt.Fprintf(&b, "[[rule]]\nid = \"r%d\"\ndecision = %q\n", i, decision)
		switch i % 4 {
		case 0, 1:
			fmt.Fprintf(&b, "command = [\"%s sub%d *\", \"%s other%d\"]\n", programs[i%len(programs)], i, programs[(i+3)%len(programs)], i)
		case 2:
			fmt.Fprintf(&b, "kind = \"edit\"\npath = \"./dir%d/**\"\n", i)
		case 3:
			fmt.Fprintf(&b, "url = \"domain:site%d.example.com\"\n", i)
		}
	}
	return b.String()
}

var typicalRequests = []string{
	cmdCall("git status && npm test -- --watch=false"),
	`{"kind":"edit","content":[{"type":"diff","path":"/work/repo/dir42/a.go","oldText":"a","newText":"b"}]}`,
	`{"kind":"fetch","rawInput":{"url":"https://site7.example.com/docs"}}`,
	`{"kind":"execute","rawInput":{"command":["/bin/bash","-lc","go test ./... && go vet ./..."]}}`,
}

// BenchmarkDecide decides typical requests (read, parsed and decided, as the
// broker does per request) against 0, 100 and 1,000 rules, and reports the
// 50th and 99th percentile of one decision. rules=0 is the baseline: the
// cost of reading the request and applying the defaults.
func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{0, 100, 1000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			f, err := Parse("bench.toml", User, ruleFile(n))
			if err != nil {
				b.Fatal(err)
			}
			p := NewPolicy([]*File{f}, testHome, nil)
			ctx := Context{Cwd: testCwd, Home: testHome}
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				p.Decide(ReadToolCallJSON(json.RawMessage(typicalRequests[i%len(typicalRequests)]), ctx))
				times = append(times, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(times)
			if len(times) > 0 {
				b.ReportMetric(float64(times[len(times)/2].Nanoseconds())/1e3, "p50-µs")
				b.ReportMetric(float64(times[len(times)*99/100].Nanoseconds())/1e3, "p99-µs")
			}
		})
	}
}

// BenchmarkDecideRead is BenchmarkDecide without reading: the requests are
// read once, and only the decision against the rules is timed.
func BenchmarkDecideRead(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			f, err := Parse("bench.toml", User, ruleFile(n))
			if err != nil {
				b.Fatal(err)
			}
			p := NewPolicy([]*File{f}, testHome, nil)
			ctx := Context{Cwd: testCwd, Home: testHome}
			var reqs []*Request
			for _, r := range typicalRequests {
				reqs = append(reqs, ReadToolCallJSON(json.RawMessage(r), ctx))
			}
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				p.Decide(reqs[i%len(reqs)])
				times = append(times, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(times)
			if len(times) > 0 {
				b.ReportMetric(float64(times[len(times)/2].Nanoseconds())/1e3, "p50-µs")
				b.ReportMetric(float64(times[len(times)*99/100].Nanoseconds())/1e3, "p99-µs")
			}
		})
	}
}

// BenchmarkLoad parses and indexes rule files of 10 (the baseline) and
// 1,000 rules.
func BenchmarkLoad(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			src := ruleFile(n)
			for b.Loop() {
				f, err := Parse("bench.toml", User, src)
				if err != nil {
					b.Fatal(err)
				}
				NewPolicy([]*File{f}, testHome, nil)
			}
		})
	}
}
