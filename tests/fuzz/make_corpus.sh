#!/usr/bin/env bash
# Seed corpus for the ONNX harnesses: every fixture model (tests/fixtures/models/*/model.onnx)
# and every malformed one (tests/fixtures/bad/*.onnx), copied flat into OUT (default
# build-fuzz/seeds) under their folder/file names. Idempotent.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$ROOT/build-fuzz/seeds}
mkdir -p "$OUT"
n=0
for f in "$ROOT"/tests/fixtures/models/*/model.onnx; do
  cp "$f" "$OUT/$(basename "$(dirname "$f")").onnx"
  n=$((n + 1))
done
for f in "$ROOT"/tests/fixtures/bad/*.onnx; do
  cp "$f" "$OUT/bad_$(basename "$f")"
  n=$((n + 1))
done
echo "seed corpus: $n files in $OUT"
