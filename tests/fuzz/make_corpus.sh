#!/usr/bin/env bash
# Seed corpus for the ONNX harnesses: every fixture model (tests/fixtures/models/*/model.onnx)
# and every malformed one (tests/fixtures/bad/*.onnx), copied flat into OUT (default
# build-fuzz/seeds) under their folder/file names. Seeds for fuzz_cache (valid tuning cache
# files) go to OUT_cache, written by CACHE_SEEDER (default build-fuzz/make_cache_seeds, built
# by run_fuzz.sh; skipped with a note when it is not built): a separate folder, because
# libFuzzer reads seed folders recursively and each kind is noise to the other harnesses.
# Idempotent.
#   usage: make_corpus.sh [OUT] [CACHE_SEEDER]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$ROOT/build-fuzz/seeds}
CACHE_SEEDER=${2:-$ROOT/build-fuzz/make_cache_seeds}
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
if [ -x "$CACHE_SEEDER" ]; then
  "$CACHE_SEEDER" "${OUT}_cache"
else
  echo "no $CACHE_SEEDER: fuzz_cache seeds not written"
fi
