#!/usr/bin/env bash
# compare_libmf.sh — privrec's `als` against LIBMF, side by side in one run.
#
# Usage:
#   mf/compare_libmf.sh PRIVREC LIBMF_DIR TRAIN TEST [ROUNDS]
#
#   PRIVREC    the privrec binary (go build -o privrec ./cmd/privrec)
#   LIBMF_DIR  a directory holding LIBMF's mf-train and mf-predict, built
#              from https://github.com/cjlin1/libmf with its own Makefile
#   TRAIN      training ratings, "user<TAB>item<TAB>rating" (privrec data
#              split writes this; LIBMF reads the same file)
#   TEST       held-out ratings in the same format
#   ROUNDS     repetitions (default 3); the runs of the two tools are
#              interleaved so that both see the same machine load
#
# Environment (optional):
#   LIBMF_ITERS  iteration counts for LIBMF   (default "10 20 30 40")
#   ALS_ITERS    iteration counts for als     (default "6 8 10 12 14")
#   LIBMF_L2     LIBMF's -l2                  (default 0.05)
#   ALS_FLAGS    extra flags for privrec train --method als
#   TARGET       the RMSE whose time-to is reported (default 0.845)
#   THREADS      threads for both             (default 2)
#
# Every run is end to end (read the file, train, write the model), timed
# with /usr/bin/time (wall clock, and user + system CPU). For each tool the
# time to TARGET is the smallest median time of an iteration count whose
# median RMSE is ≤ TARGET. LIBMF is run as `mf-train -k 64 -t N -s THREADS
# -l2 LIBMF_L2`, the setting of issue 13.
set -euo pipefail

if [ $# -lt 4 ]; then
	sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
fi
privrec=$1
libmf=$2
train=$3
test=$4
rounds=${5:-3}
libmf_iters=${LIBMF_ITERS:-"10 20 30 40"}
als_iters=${ALS_ITERS:-"6 8 10 12 14"}
l2=${LIBMF_L2:-0.05}
target=${TARGET:-0.845}
threads=${THREADS:-2}
als_flags=${ALS_FLAGS:-}

for f in "$privrec" "$libmf/mf-train" "$libmf/mf-predict" /usr/bin/time; do
	[ -x "$f" ] || { echo "not executable: $f" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
results=$tmp/results.tsv

timed() { # timed OUTFILE CMD... → prints "wall cpu"
	local out=$1
	shift
	/usr/bin/time -f "%e %U %S" -o "$tmp/time" "$@" >"$out" 2>&1
	awk '{printf "%s %.2f", $1, $2 + $3}' "$tmp/time"
}

for r in $(seq "$rounds"); do
	for n in $libmf_iters; do
		t=$(timed "$tmp/log" "$libmf/mf-train" -k 64 -t "$n" -s "$threads" -l2 "$l2" --quiet "$train" "$tmp/libmf.model")
		"$libmf/mf-predict" "$test" "$tmp/libmf.model" "$tmp/libmf.out" >"$tmp/pred" 2>&1
		rmse=$(awk '/RMSE/ {print $3}' "$tmp/pred")
		echo "libmf $n $t $rmse" | tee -a "$results"
	done
	for n in $als_iters; do
		# shellcheck disable=SC2086
		t=$(timed "$tmp/log" "$privrec" train --data "$train" --format tsv --scale 1:5 --method als \
			--iterations "$n" --workers "$threads" --seed "$r" --out "$tmp/als.model" $als_flags)
		rmse=$("$privrec" eval --model "$tmp/als.model" --data "$test" --format tsv --k 0 --json |
			tr ',{}' '\n\n\n' | awk -F: '/"rmse"/ {printf "%.4f", $2}')
		echo "als $n $t $rmse" | tee -a "$results"
	done
done

echo
echo "tool   iterations  median wall s  median CPU s  median RMSE  (over $rounds rounds)"
sort -k1,1 -k2,2n "$results" | awk -v target="$target" '
function median(a, n,   i, j, t) {
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function flush(   w, c, e) {
	if (key == "") return
	w = median(W, cnt); c = median(C, cnt); e = median(E, cnt)
	printf "%-6s %10d  %13.2f  %12.2f  %11.4f\n", tool, iters, w, c, e
	if (e <= target && (!(tool in bestw) || w < bestw[tool])) { bestw[tool] = w; bestc[tool] = c; besti[tool] = iters }
	delete W; delete C; delete E; cnt = 0
}
{
	k = $1 " " $2
	if (k != key) { flush(); key = k; tool = $1; iters = $2 }
	cnt++; W[cnt] = $3; C[cnt] = $4; E[cnt] = $5
}
END {
	flush()
	print ""
	for (t in bestw) printf "time to RMSE %.3f: %s %.2f s wall, %.2f s CPU (%d iterations)\n", target, t, bestw[t], bestc[t], besti[t]
	if (!("libmf" in bestw)) printf "LIBMF did not reach RMSE %.3f\n", target
	if (!("als" in bestw)) printf "als did not reach RMSE %.3f\n", target
	if (("libmf" in bestw) && ("als" in bestw)) printf "ratio als/LIBMF: %.2f (wall), %.2f (CPU)\n", bestw["als"] / bestw["libmf"], bestc["als"] / bestc["libmf"]
}'
