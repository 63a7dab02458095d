#!/usr/bin/env bash
# Issue-5/6 end-to-end figures: per model, the three strategies at 1 thread on a fresh tuning
# cache (predicted and measured), the three again warm and interleaved run by run, then three
# warm loads (plan from the cache) at 1 and 2 threads. Usage: bench/strategies.sh [KILN] [MODELS_DIR] [MODEL...]
#   KILN defaults to build/bench/kiln, MODELS_DIR to ~/kiln-zoo (bench/zoo_export.py output).
# Compare with ONNX Runtime in the same minutes: ../shared/peers/ort_bench.js (see its README).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
K=${1:-$ROOT/build/bench/kiln}
M=${2:-$HOME/kiln-zoo}
shift $(( $# > 2 ? 2 : $# ))
MODELS=${*:-squeezenet1_1 mobilenet_v2 resnet18 resnet50 vgg16}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export KILN_CACHE_DIR=$TMP/cache
for m in $MODELS; do
  "$K" bench "$M/$m.onnx" --threads 1 --runs 15 --warmup 3 --strategy global,local,fixed \
    --json "$TMP/s.json" > /dev/null
  python3 - "$TMP/s.json" "$m" <<'PY'
import json, sys
for o in json.load(open(sys.argv[1])):
    print('%s %-6s predicted %.2f  p50 %.2f  min %.2f  load %.0f ms  optimal %s' % (
        sys.argv[2], o['strategy'], o['predicted_ms'], o['latency_ms']['p50'],
        o['latency_ms']['min'], o['load_ms'], o['optimal']))
PY
  # Warm (plans from the cache): the three sessions take turns run by run (kiln bench does
  # that with several strategies), so machine noise hits them alike.
  "$K" bench "$M/$m.onnx" --threads 1 --runs 60 --warmup 3 --strategy global,local,fixed \
    --json "$TMP/i.json" > /dev/null
  python3 - "$TMP/i.json" "$m" <<'PY'
import json, sys
print('  %s warm, interleaved: %s' % (sys.argv[2], ';  '.join(
    '%s p50 %.2f min %.2f' % (o['strategy'], o['latency_ms']['p50'], o['latency_ms']['min'])
    for o in json.load(open(sys.argv[1])))))
PY
  for t in 1 2; do
    for _ in 1 2 3; do
      "$K" bench "$M/$m.onnx" --threads $t --runs 10 --warmup 2 --json "$TMP/w.json" > /dev/null
      python3 - "$TMP/w.json" "$m" "$t" <<'PY'
import json, sys
o = json.load(open(sys.argv[1])); b = o['load_breakdown_ms']
print('  %s T=%s load %.0f ms (plan from cache: %s; jit+pack %.0f, parse %.0f)  p50 %.2f  min %.2f' % (
    sys.argv[2], sys.argv[3], o['load_ms'], o['plan_from_cache'], b['jit_pack'], b['parse'],
    o['latency_ms']['p50'], o['latency_ms']['min']))
PY
    done
  done
done
