#!/usr/bin/env bash
# Measures acp-broker against a direct pipe and a raw io.Copy relay, for the
# same traffic in the same run, and the rule engine, and prints the figures
# and every performance target, each marked pass or FAIL with its formula.
# Needs only the Go toolchain (Linux).
#
#   bench/run.sh                        # 5 repetitions, about 3 minutes on 2 cores
#   BENCH_COUNT=3 BENCH_TIME=1s bench/run.sh
#   BENCH_OUT=bench.txt bench/run.sh    # also keep the raw `go test` output
#   ACP_BROKER_BENCH_BINARY=/path/to/acp-broker bench/run.sh   # measure that build
#
# Exit status: 0 when every target passes, 1 when one fails, 2 when a
# benchmark failed to run (the table is still printed, its figures missing).
set -euo pipefail
cd "$(dirname "$0")/.."

count=${BENCH_COUNT:-5}
benchtime=${BENCH_TIME:-0.5s}    # per benchmark, per configuration
starts=${BENCH_STARTS:-20}       # start-ups timed per configuration
decisions=${BENCH_DECISIONS:-20000} # rule decisions timed per rule count: enough for the p99
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=${BENCH_OUT:-$tmp/bench.txt}
go build -o "$tmp/benchtable" ./bench/internal/benchtable
# Everything is built once, so that every repetition measures the same
# binaries and none of them pays for linking.
go test -c -o "$tmp/bench.test" ./bench/
go test -c -o "$tmp/rules.test" ./rules/
if [ -n "${ACP_BROKER_BENCH_BINARY:-}" ]; then
	ACP_BROKER_BENCH_BINARY=$(realpath "$ACP_BROKER_BENCH_BINARY")
else
	go build -o "$tmp/acp-broker" ./cmd/acp-broker
	ACP_BROKER_BENCH_BINARY=$tmp/acp-broker
fi
export ACP_BROKER_BENCH_BINARY

broken=0
# bench PACKAGE PATTERN BENCHTIME runs the package's benchmarks matching
# PATTERN once, from its directory as go test would.
bench() {
	echo "+ (cd $1 && $1.test -test.run '^\$' -test.bench '$2' -test.benchtime $3 -test.count 1)   # repetition $i of $count" >&2
	if ! (cd "$1" && "$tmp/$1.test" -test.run '^$' -test.bench "$2" -test.benchtime "$3" -test.count 1 -test.timeout 10m) | tee -a "$out"; then
		echo "bench: a benchmark failed; see above" >&2
		broken=1
	fi
}
# Each repetition runs all three configurations one after the other, so a
# change in the machine's load hits all three alike and the per-repetition
# ratios compare like with like. (-count N would instead run each
# configuration N times in a row.)
: >"$out"
for i in $(seq "$count"); do
	bench bench '^Benchmark(RoundTrip|RoundTripInterleaved|Permission|PermissionDecided|PermissionInterleaved|Stream1KiB|Stream1MiB|Stream20MiB|Requests1KiB|Requests1MiB|Requests20MiB|Memory)$' "$benchtime"
	bench bench '^BenchmarkStartup$' "${starts}x"
	bench rules '^BenchmarkDecide$/^rules=(0|1000)$' "${decisions}x"
done
status=0
"$tmp/benchtable" <"$out" || status=$?
echo
echo "bench/run.sh: $count repetitions in $((SECONDS / 60))m$((SECONDS % 60))s"
if [ "$broken" = 1 ]; then
	exit 2
fi
exit "$status"
