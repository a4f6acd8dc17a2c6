#!/usr/bin/env bash
# measure_private.sh — user-level private methods against the non-private
# reference on random splits, as in docs/mf.md.
#
# Usage:
#   mf/measure_private.sh PRIVREC ITEMS SPLIT_PREFIX... 
#
#   PRIVREC       the privrec binary
#   ITEMS         the declared catalogue (one item ID per line)
#   SPLIT_PREFIX  one or more prefixes P with P.train.tsv and P.test.tsv
#                 (privrec data split --format tsv writes them)
#
# Environment (optional):
#   EPSILONS  ε values (default "0.5 1 2 4 8 16"); δ is 1e-6
#   SCALE     declared rating scale (default 1:5)
#   CONFIGS   "label|method|flags" lines (default below)
#
# Every run is seeded (--seed from the split's index, --experiment): the
# noise is reproducible, which is for experiments only. Prints one TSV
# line per run (label, ε, split, RMSE) and the mean RMSE per label and ε.
set -euo pipefail
if [ $# -lt 3 ]; then
	sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
fi
privrec=$1
items=$2
shift 2
epsilons=${EPSILONS:-"0.5 1 2 4 8 16"}
scale=${SCALE:-1:5}
configs=${CONFIGS:-"dp-bias|dp-bias|
dpals|dpals|
dpals-2steps|dpals|--steps 2"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/runs.tsv

s=0
for prefix in "$@"; do
	s=$((s + 1))
	"$privrec" train --data "$prefix.train.tsv" --format tsv --scale "$scale" --method als --seed "$s" --out "$tmp/m" >/dev/null
	r=$("$privrec" eval --model "$tmp/m" --data "$prefix.test.tsv" --format tsv --k 0 --json | tr ',{}' '\n\n\n' | awk -F: '/"rmse"/ {printf "%.4f", $2}')
	printf "als\tinf\t%s\t%s\n" "$s" "$r" | tee -a "$out"
	while IFS='|' read -r label method flags; do
		[ -n "$label" ] || continue
		for e in $epsilons; do
			# shellcheck disable=SC2086
			"$privrec" train --data "$prefix.train.tsv" --format tsv --scale "$scale" --items "$items" \
				--method "$method" $flags --epsilon "$e" --delta 1e-6 --seed "$s" --experiment \
				--out "$tmp/m" --user-state "$tmp/u" >/dev/null
			r=$("$privrec" eval --model "$tmp/m" --user-state "$tmp/u" --data "$prefix.test.tsv" --format tsv --k 0 --json |
				tr ',{}' '\n\n\n' | awk -F: '/"rmse"/ {printf "%.4f", $2}')
			rm -rf "$tmp/u"
			printf "%s\t%s\t%s\t%s\n" "$label" "$e" "$s" "$r" | tee -a "$out"
		done
	done <<<"$configs"
done
echo
echo "mean RMSE over $s split(s):"
awk -F'\t' '{k=$1"\t"$2; sum[k]+=$4; n[k]++; if (!(k in seen)) {seen[k]=1; order[++m]=k}}
	END {for (i=1; i<=m; i++) printf "%s\t%.4f\n", order[i], sum[order[i]]/n[order[i]]}' "$out"
