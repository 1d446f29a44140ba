// Package bench measures what acp-broker costs an ACP connection. It owns
// only measurements: it drives the real acp-broker binary as a subprocess,
// and imports the broker's packages only to micro-benchmark the wire layer
// (BenchmarkWire) when a figure needs explaining.
//
// The same fake editor (the benchmark) and the same fake agent (the test
// binary re-executed) are connected three ways, and every benchmark runs all
// three in the same run so each figure has its baseline beside it:
//
//	direct   the editor's pipes go straight to the agent
//	raw      a relay process copies bytes both ways with io.Copy (the floor
//	         for any proxy)
//	broker   acp-broker, built from ./cmd/acp-broker, spawns the agent
//
// and a fourth for permission turns, decided: the broker in a home whose
// user rule file allows the fake agent's tool call, so that it answers the
// permission request itself (the benchmark fails if the editor is asked).
//
// The traffic: small requests and their answers (round trips), permission
// turns, agent_message_chunk updates streamed agent to editor, and
// session/prompt requests sent editor to agent, pipelined, that the agent
// answers at once (1 KiB, 1 MiB, and 20 MiB one at a time in both
// directions). Each throughput benchmark first checks that one message
// arrives byte for byte as sent.
//
// Besides ns/op and MB/s, benchmarks report latency percentiles (p50-ns,
// p99-ns), the CPU time per op of the process the editor started (cpu-ns/op,
// from /proc: it hardly depends on the machine's other load), and resident
// memory (idle-MB, peak-MB). Every process runs with a temporary home, so the
// broker reads no rules and writes no audit log of the user's (decided reads
// the one rule file the bench writes).
//
// bench/run.sh runs them, and the rule engine's BenchmarkDecide, and prints
// the figures with the performance targets, each marked pass or FAIL.
// `go test ./bench/` without -bench runs a quick check of the harness,
// through the broker too (built for it) unless -short.
package bench
