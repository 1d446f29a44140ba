#!/usr/bin/env bash
# Measures acp-broker against a direct pipe and a raw io.Copy relay, for the
# same traffic in the same run, and prints the figures and the performance
# targets, each marked pass or FAIL. Needs only the Go toolchain (Linux).
#
#   bench/run.sh                        # 5 repetitions, about 3 minutes on 2 cores
#   BENCH_COUNT=3 BENCH_TIME=1s bench/run.sh
#   BENCH_OUT=bench.txt bench/run.sh    # also keep the raw `go test` output
#   ACP_BROKER_BENCH_BINARY=/path/to/acp-broker bench/run.sh   # measure that build
#
# Exit status: 0 when every target passes, 1 when one fails, 2 on error.
set -euo pipefail
cd "$(dirname "$0")/.."

count=${BENCH_COUNT:-5}
benchtime=${BENCH_TIME:-0.5s}   # per benchmark, per configuration
starts=${BENCH_STARTS:-20}      # start-ups timed per configuration
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=${BENCH_OUT:-$tmp/bench.txt}
go build -o "$tmp/benchtable" ./bench/internal/benchtable

# bench PATTERN BENCHTIME runs the benchmarks matching PATTERN once.
bench() {
	echo "+ go test -run '^\$' -bench '$1' -benchtime $2 -count 1 ./bench/   # repetition $i of $count" >&2
	if ! go test -run '^$' -bench "$1" -benchtime "$2" -count 1 -timeout 10m ./bench/ | tee -a "$out"; then
		echo "bench: the benchmarks failed; see above" >&2
		exit 2
	fi
}
# Each repetition runs all three configurations one after the other, so a
# change in the machine's load hits all three alike and the per-repetition
# ratios compare like with like. (-count N would instead run each
# configuration N times in a row.)
: >"$out"
for i in $(seq "$count"); do
	bench '^Benchmark(RoundTrip|RoundTripInterleaved|Permission|Stream1KiB|Stream1MiB|Memory)$' "$benchtime"
	bench '^BenchmarkStartup$' "${starts}x"
done
"$tmp/benchtable" <"$out"
