#!/usr/bin/env bash
# Instructions per op of the Lua call path, counted by valgrind's callgrind:
# repeatable where wall-clock ratios on a shared VM are not.
#
#   bash bench/callgrind.sh            # from the repo root (or from bench/)
#
# Each case of bench/cmd/callcount runs under callgrind twice, with N1 and N2
# iterations; Ir per op = (Ir(N2) - Ir(N1)) / (N2 - N1), so the process's
# setup (Go runtime start, Module, Runtime, Lua state, the warm-up loop)
# cancels. One process at a time. Environment of the measured runs:
#   GOMAXPROCS=1                one P: the runtime's loop and its callers
#                               interleave the same way every run
#   GOGC=off                    no collection starts at a point that depends
#                               on timing; allocations per op are printed
#                               instead (the collector's share is not counted)
#   GODEBUG=asyncpreemptoff=1   no preemption signals, whose count follows
#                               wall time (slower under valgrind)
# Knobs (environment): CASES (default "loop empty mutex mutex_new yield get"),
# N1 (20000), N2 (120000), KEEP=dir keeps the callgrind.out files (for
# callgrind_annotate), VALGRIND (valgrind).
set -euo pipefail
cd "$(dirname "$0")"
CASES=${CASES:-loop empty mutex mutex_new yield get}
N1=${N1:-20000}
N2=${N2:-120000}
VALGRIND=${VALGRIND:-valgrind}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=${KEEP:-$work}
mkdir -p "$out"
go build -o "$work/callcount" ./cmd/callcount

# ir CASE N: the total Ir of one run (callgrind's "totals:" line).
ir() {
	local f="$out/callgrind.out.$1.$2"
	GOMAXPROCS=1 GOGC=off GODEBUG=asyncpreemptoff=1 "$VALGRIND" --tool=callgrind \
		--callgrind-out-file="$f" "$work/callcount" -case "$1" -n "$2" \
		>/dev/null 2>"$work/stderr.$1.$2" || { cat "$work/stderr.$1.$2" >&2; exit 1; }
	grep -m1 '^totals:' "$f" | awk '{print $2}'
}

declare -A per allocs bytes
for c in $CASES; do
	a=$(ir "$c" "$N1")
	b=$(ir "$c" "$N2")
	per[$c]=$(awk -v a="$a" -v b="$b" -v n1="$N1" -v n2="$N2" 'BEGIN { printf "%.1f", (b - a) / (n2 - n1) }')
	line=$(grep -m1 '^callcount:' "$work/stderr.$c.$N2")
	allocs[$c]=$(sed -E 's/.*: ([0-9.]+) allocs, ([0-9]+) B per iteration/\1/' <<<"$line")
	bytes[$c]=$(sed -E 's/.*: ([0-9.]+) allocs, ([0-9]+) B per iteration/\2/' <<<"$line")
	echo "callgrind.sh: $c: Ir($N1) = $a, Ir($N2) = $b, ${per[$c]} per op" >&2
done

echo "| case (memory backend, one task) | Ir per op | ÷ empty call | net of the loop, ÷ empty call | allocs (B) per op |"
echo "|---|---:|---:|---:|---:|"
for c in $CASES; do
	ratio=- net=-
	if [[ -n ${per[empty]:-} ]]; then
		ratio=$(awk -v x="${per[$c]}" -v e="${per[empty]}" 'BEGIN { printf "%.2f×", x / e }')
		if [[ -n ${per[loop]:-} ]]; then
			net=$(awk -v x="${per[$c]}" -v e="${per[empty]}" -v l="${per[loop]}" 'BEGIN { printf "%.2f×", (x - l) / (e - l) }')
		fi
	fi
	echo "| $c | ${per[$c]} | $ratio | $net | ${allocs[$c]} (${bytes[$c]}) |"
done
echo
echo "N1 = $N1, N2 = $N2; GOMAXPROCS=1 GOGC=off GODEBUG=asyncpreemptoff=1; $(go version | awk '{print $3}'), $("$VALGRIND" --version)"
echo
