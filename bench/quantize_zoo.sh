#!/usr/bin/env bash
# Writes QDQ copies of zoo models for the int8 benchmarks (bench/NOTES.md, session 17):
# OUT/NAME_int8.onnx from `kiln quantize SRC/NAME.onnx --per-channel` (8 random calibration
# inputs, fixed seeds: the same file every time), with SRC's NAME.input.npy / NAME.ref.npy
# copied as NAME_int8.*, so that bench/zoo_bench.py --models OUT --ort and bench/accuracy.py OUT
# --ort compare Kiln with ONNX Runtime on the same QDQ files and against PyTorch's f32 output.
# Usage: bench/quantize_zoo.sh SRC OUT [NAME ...]   (default: every NAME.onnx of SRC)
# The kiln binary: $KILN, else build/bench/kiln. Extra `kiln quantize` options: $QUANT_ARGS.
set -euo pipefail
SRC=${1:?usage: quantize_zoo.sh SRC OUT [NAME ...]}
OUT=${2:?usage: quantize_zoo.sh SRC OUT [NAME ...]}
shift 2
KILN=${KILN:-$(dirname "$0")/../build/bench/kiln}
mkdir -p "$OUT"
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in "$SRC"/*.onnx; do names+=("$(basename "$f" .onnx)"); done
fi
for n in "${names[@]}"; do
  # shellcheck disable=SC2086
  "$KILN" quantize "$SRC/$n.onnx" --out "$OUT/${n}_int8.onnx" --per-channel ${QUANT_ARGS:-} |
    sed "s/^/$n: /"
  for s in input ref; do cp "$SRC/$n.$s.npy" "$OUT/${n}_int8.$s.npy"; done
done
