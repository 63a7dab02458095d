#!/usr/bin/env bash
# Paired A/B of two builds of the kiln CLI on every model of a folder: each build gets its own
# tuning cache (tuned first, untimed), then for ROUNDS rounds, per model and thread count, build
# A and build B run `kiln bench --runs 20` back to back. On the shared 2-vCPU VM Kiln is
# developed on, whose speed drifts by tens of percent over minutes, only such interleaved runs
# of the same model compare two builds (kiln_ab compares settings of one build in one process).
# Prints one line per (model, threads): each build's median over the rounds of its p50 (ms),
# and B / A.
# Usage: bench/ab_builds.sh KILN_A KILN_B MODELS_DIR [ROUNDS (default 3)] [THREADS (default 1,2)]
# KILN_ARGS (environment, e.g. "--precision bf16") is added to every kiln bench.
set -euo pipefail
A=${1:?usage: ab_builds.sh KILN_A KILN_B MODELS_DIR [ROUNDS] [THREADS]}
B=${2:?usage: ab_builds.sh KILN_A KILN_B MODELS_DIR [ROUNDS] [THREADS]}
DIR=${3:?usage: ab_builds.sh KILN_A KILN_B MODELS_DIR [ROUNDS] [THREADS]}
ROUNDS=${4:-3}
IFS=, read -r -a THREADS <<<"${5:-1,2}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
p50() {  # build cache model threads runs
  # shellcheck disable=SC2086  # (KILN_ARGS: words)
  KILN_CACHE_DIR=$2 "$1" bench "$3" --threads "$4" --runs "$5" ${KILN_ARGS:-} 2>/dev/null |
    sed -n 's/.*p50 \([0-9.]*\).*/\1/p'
}
for m in "$DIR"/*.onnx; do
  for t in "${THREADS[@]}"; do
    p50 "$A" "$TMP/a" "$m" "$t" 3 >/dev/null
    p50 "$B" "$TMP/b" "$m" "$t" 3 >/dev/null
  done
done
for r in $(seq "$ROUNDS"); do
  for m in "$DIR"/*.onnx; do
    for t in "${THREADS[@]}"; do
      echo "$(basename "$m" .onnx) $t $(p50 "$A" "$TMP/a" "$m" "$t" 20) $(p50 "$B" "$TMP/b" "$m" "$t" 20)"
    done
  done
done >"$TMP/rounds"
/usr/bin/python3 - "$TMP/rounds" <<'EOF'
import collections, statistics, sys
runs = collections.defaultdict(lambda: ([], []))
for line in open(sys.argv[1]):
    m, t, a, b = line.split()
    runs[(m, int(t))][0].append(float(a))
    runs[(m, int(t))][1].append(float(b))
print(f"{'model':28s} {'threads':>7s} {'A p50':>8s} {'B p50':>8s} {'B/A':>6s}")
ratios = collections.defaultdict(list)
for (m, t), (a, b) in runs.items():
    ma, mb = statistics.median(a), statistics.median(b)
    ratios[t].append(mb / ma)
    print(f"{m:28s} {t:7d} {ma:8.2f} {mb:8.2f} {mb / ma:6.3f}")
for t, rs in sorted(ratios.items()):
    print(f"{t} thread(s): geomean B/A {statistics.geometric_mean(rs):.3f} over {len(rs)} models")
EOF
