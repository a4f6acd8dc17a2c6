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
# time to TARGET is that of the fewest iterations whose median RMSE is
# ≤ TARGET, as the median and the minimum over the rounds (on a shared
# machine the minimum is the better estimate of the unloaded time). LIBMF
# is run as `mf-train -k 64 -t N -s THREADS -l2 LIBMF_L2`, the setting of
# issue 13; its CPU time includes OpenMP's spin-waiting.
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
echo "tool   iterations  wall s (median, min)  CPU s (median, min)  median RMSE  ($rounds rounds)"
sort -k1,1 -k2,2n "$results" | awk -v target="$target" '
function median(a, n,   i, j, t) {
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function flush(   w, c, e, wm, cm) {
	if (key == "") return
	w = median(W, cnt); wm = W[1]; c = median(C, cnt); cm = C[1]; e = median(E, cnt)
	printf "%-6s %10d  %9.2f %9.2f  %9.2f %9.2f  %11.4f\n", tool, iters, w, wm, c, cm, e
	if (e <= target && !(tool in besti)) { bestw[tool] = w; bestwm[tool] = wm; bestc[tool] = c; bestcm[tool] = cm; besti[tool] = iters }
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
	for (t in besti) printf "time to RMSE %.3f: %-5s %2d iterations, wall %.2f s (min %.2f), CPU %.2f s (min %.2f)\n", target, t, besti[t], bestw[t], bestwm[t], bestc[t], bestcm[t]
	if (!("libmf" in besti)) printf "LIBMF did not reach RMSE %.3f\n", target
	if (!("als" in besti)) printf "als did not reach RMSE %.3f\n", target
	if (("libmf" in besti) && ("als" in besti)) printf "ratio als/LIBMF: wall %.2f (min %.2f), CPU %.2f (min %.2f)\n", bestw["als"] / bestw["libmf"], bestwm["als"] / bestwm["libmf"], bestc["als"] / bestc["libmf"], bestcm["als"] / bestcm["libmf"]
}'
