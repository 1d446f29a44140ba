package rules

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
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
		switch {
		case i%4 < 2:
			fmt.Fprintf(&b, "command = [\"%s sub%d *\", \"%s other%d\"]\n", programs[i%len(programs)], i, programs[(i+3)%len(programs)], i)
		case i%4 == 2:
			fmt.Fprintf(&b, "kind = \"edit\"\npath = \"./dir%d/**\"\n", i)
		case i%8 == 3:
			fmt.Fprintf(&b, "url = \"domain:site%d.example.com\"\n", i)
		default:
			fmt.Fprintf(&b, "mcp = \"server%d/*\"\n", i)
		}
	}
	return b.String()
}

// benchSession lays out a session as the broker meets one: a home directory
// holding the project, a git checkout with the files the requests name, so
// that resolving paths and looking for git directories walk real
// directories, not a path that stops at its first component. The temporary
// directory stands for the home directory (/tmp/BenchmarkDecide…/001 for
// /home/u): the project is as deep as ~/src/project, one name deeper.
func benchSession(b *testing.B) (home, cwd string) {
	b.Helper()
	home = b.TempDir()
	cwd = filepath.Join(home, "src", "project")
	for _, dir := range []string{".git/objects", ".git/refs", "dir42", "src", "rules"} {
		if err := os.MkdirAll(filepath.Join(cwd, dir), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for _, file := range []string{".git/HEAD", ".git/config", "dir42/a.go", "src/main.go", "go.mod", "README.md", "package.json"} {
		if err := os.WriteFile(filepath.Join(cwd, file), []byte("x\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return home, cwd
}

// typicalRequests are tool calls as the agents send them, for a session in
// cwd: Claude Code's compound command, a long one, an edit with its diff, a
// read, a fetch, Codex's `bash -lc` argv with its cwd, and an MCP tool call.
func typicalRequests(cwd string) []string {
	call := func(v map[string]any) string {
		js, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		return string(js)
	}
	var oldText, newText strings.Builder
	for i := range 40 {
		fmt.Fprintf(&oldText, "\tif err := step%d(ctx); err != nil {\n\t\treturn err\n\t}\n", i)
		fmt.Fprintf(&newText, "\tif err := step%d(ctx, opts); err != nil {\n\t\treturn fmt.Errorf(\"step %d: %%w\", err)\n\t}\n", i, i)
	}
	long := "cd " + cwd + " && git add -A && git commit -m 'rules: pool the parser' && go build ./... && " +
		"go test -run 'TestDecide|TestShell' -count 1 ./rules/... 2>&1 | tee test.log && npm run lint -- --fix && ls -la src"
	edit := filepath.Join(cwd, "dir42", "a.go")
	read := filepath.Join(cwd, "src", "main.go")
	return []string{
		cmdCall("git status && npm test -- --watch=false"),
		cmdCall(long),
		call(map[string]any{"toolCallId": "e", "kind": "edit", "title": "Edit dir42/a.go",
			"rawInput":  map[string]any{"file_path": edit, "old_string": oldText.String(), "new_string": newText.String()},
			"content":   []any{map[string]any{"type": "diff", "path": edit, "oldText": oldText.String(), "newText": newText.String()}},
			"locations": []any{map[string]any{"path": edit}}}),
		call(map[string]any{"toolCallId": "r", "kind": "read", "title": "Read src/main.go",
			"rawInput": map[string]any{"file_path": read}, "locations": []any{map[string]any{"path": read, "line": 1}}}),
		call(map[string]any{"toolCallId": "f", "kind": "fetch", "title": "Fetch https://site3.example.com/docs",
			"rawInput": map[string]any{"url": "https://site3.example.com/docs", "prompt": "summarise the API"}}),
		call(map[string]any{"toolCallId": "x", "kind": "execute", "title": "go test ./... && go vet ./...",
			"rawInput": map[string]any{"command": []string{"/bin/bash", "-lc", "go test ./... && go vet ./..."}, "cwd": cwd}}),
		call(map[string]any{"toolCallId": "m", "kind": "other", "title": "mcp__github__get_issue",
			"rawInput": map[string]any{"owner": "acp-broker", "repo": "acp-broker", "issue_number": 13},
			"_meta":    map[string]any{"claudeCode": map[string]any{"toolName": "mcp__github__get_issue"}}}),
	}
}

// benchPolicy is n rules of ruleFile, with the broker's own files protected
// as in a live session.
func benchPolicy(b *testing.B, n int, home string) *Policy {
	b.Helper()
	f, err := Parse("bench.toml", User, ruleFile(n))
	if err != nil {
		b.Fatal(err)
	}
	return NewPolicy([]*File{f}, home, []string{filepath.Join(home, ".config", "acp-broker"), filepath.Join(home, ".local", "state", "acp-broker")})
}

// timeEach runs one of the requests per iteration, round robin, and reports
// the 50th and 99th percentile of all iterations: the tail is the target,
// so run it with many iterations (-benchtime 20000x) and -count. It also
// reports the process's CPU time per iteration (the collector's included),
// which other work on the machine moves much less than the wall clock.
func timeEach(b *testing.B, n int, run func(i int)) {
	b.ReportAllocs()
	times := make([]time.Duration, 0, 1<<15)
	cpuBefore := processCPU(b)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		run(i % n)
		times = append(times, time.Since(start))
	}
	b.StopTimer()
	cpu := processCPU(b) - cpuBefore
	slices.Sort(times)
	if len(times) > 0 {
		b.ReportMetric(float64(times[len(times)/2].Nanoseconds())/1e3, "p50-µs")
		b.ReportMetric(float64(times[len(times)*99/100].Nanoseconds())/1e3, "p99-µs")
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(len(times)), "cpu-ns/op")
	}
}

// processCPU is the user and system time the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDecide reads and decides typical requests (from the tool call's
// JSON, as the broker does per request) against 0 and 1,000 rules, and
// reports the 50th and 99th percentile of one request. rules=0 is the
// baseline: the cost of reading the request and applying the defaults.
func BenchmarkDecide(b *testing.B) {
	home, cwd := benchSession(b)
	reqs := typicalRequests(cwd)
	ctx := Context{Cwd: cwd, Home: home, MCPServers: []string{"github"}}
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			p := benchPolicy(b, n, home)
			timeEach(b, len(reqs), func(i int) {
				p.Decide(ReadToolCallJSON(json.RawMessage(reqs[i]), ctx))
			})
		})
	}
}

// BenchmarkDecideRead is BenchmarkDecide without reading: the requests are
// read once, and only the decision against the rules is timed.
func BenchmarkDecideRead(b *testing.B) {
	home, cwd := benchSession(b)
	ctx := Context{Cwd: cwd, Home: home, MCPServers: []string{"github"}}
	var reqs []*Request
	for _, r := range typicalRequests(cwd) {
		reqs = append(reqs, ReadToolCallJSON(json.RawMessage(r), ctx))
	}
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			p := benchPolicy(b, n, home)
			timeEach(b, len(reqs), func(i int) { p.Decide(reqs[i]) })
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

// BenchmarkDecideShape reads and decides each of the typical requests alone
// against 1,000 rules, so that the most expensive shape, which sets the
// tail of BenchmarkDecide, can be profiled and counted by itself.
func BenchmarkDecideShape(b *testing.B) {
	home, cwd := benchSession(b)
	ctx := Context{Cwd: cwd, Home: home, MCPServers: []string{"github"}}
	p := benchPolicy(b, 1000, home)
	names := []string{"compound", "long", "edit", "read", "fetch", "argv", "mcp"}
	for i, req := range typicalRequests(cwd) {
		b.Run(names[i], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.Decide(ReadToolCallJSON(json.RawMessage(req), ctx))
			}
		})
	}
}
