#!/usr/bin/env bash
# Black-box test of the `kiln` CLI: exit codes, `run` outputs against the fixtures' PyTorch
# references (compared by a stdlib-only Python .npy reader), output naming with several
# outputs, `bench --json` validity, `info` figures of models computed by hand.
# Usage: cli_test.sh KILN_EXE FIXTURE_DIR PYTHON
set -uo pipefail

KILN=$1
FIX=$2
PY=${3:-python3}
NAME=cli_test
source "$(dirname "$0")/cli_test_lib.sh"

# Compares two .npy float32 files: max |a-b| <= tol * max(1, max |b|).
npy_close() {
  "$PY" - "$1" "$2" "$3" <<'PYEOF'
import ast, struct, sys
def load(p):
    b = open(p, 'rb').read()
    assert b[:6] == b'\x93NUMPY', p
    n = b[8] | b[9] << 8 if b[6] == 1 else struct.unpack('<I', b[8:12])[0]
    pre = 10 if b[6] == 1 else 12
    h = ast.literal_eval(b[pre:pre + n].decode())
    assert h['descr'] == '<f4' and not h['fortran_order'], (p, h)
    data = b[pre + n:]
    return h['shape'], struct.unpack('<%df' % (len(data) // 4), data)
sa, a = load(sys.argv[1]); sb, b = load(sys.argv[2]); tol = float(sys.argv[3])
if sa != sb: sys.exit('shape %s != %s' % (sa, sb))
scale = max([1.0] + [abs(x) for x in b])
err = max([abs(x - y) for x, y in zip(a, b)] + [0.0])
if not err <= tol * scale: sys.exit('max error %g > %g' % (err, tol * scale))
PYEOF
}

# --- usage errors: 2; runtime errors: 1 ---------------------------------------------------
expect_rc 0 "$KILN" --help
expect_rc 0 "$KILN" --version
grep -q '^kiln [0-9]' "$TMP/out.txt" || fail "--version prints 'kiln X.Y.Z'"
expect_rc 2 "$KILN"
expect_rc 2 "$KILN" frobnicate model.onnx
expect_rc 2 "$KILN" info
expect_rc 2 "$KILN" run model.onnx
expect_rc 2 "$KILN" info model.onnx --runs 3
expect_rc 2 "$KILN" bench model.onnx --runs zero
expect_rc 2 "$KILN" bench model.onnx --runs 0
expect_rc 2 "$KILN" --log-level loud info model.onnx
expect_rc 1 "$KILN" info "$TMP/does_not_exist.onnx"
grep -q 'does_not_exist.onnx' "$TMP/err.txt" || fail "missing-model error names the file"
expect_rc 1 "$KILN" info "$FIX/bad/truncated.onnx"

M=$FIX/models/tiny_resnet_op13
expect_rc 1 "$KILN" run "$M/model.onnx" --input "$FIX/bad/truncated.onnx"
expect_rc 1 "$KILN" run "$M/model.onnx" --input "$M/input_0.npy" --input "$M/input_0.npy"
# Another batch than loaded runs (planned first); other dims must match.
expect_rc 0 "$KILN" run "$M/model.onnx" --input "$M/input_0.npy" --batch 3 --tune none
grep -q "float32 \[1,10\]" "$TMP/out.txt" || fail "run of batch 1 on a --batch 3 load: $(cat "$TMP/out.txt")"
expect_rc 1 "$KILN" run "$M/model.onnx" --input "$M/input_0.npy" --shape input:1x3x16x16

# --- run: output 0 matches the reference ---------------------------------------------------
TOL=$(awk '$1 == "tol" {print $2}' "$M/info.txt")
expect_rc 0 "$KILN" --log-level error run "$M/model.onnx" --input "$M/input_0.npy" \
  --output "$TMP/y.npy"
grep -q "output 0 .*min .*max .*mean" "$TMP/out.txt" || fail "run prints min/max/mean"
npy_close "$TMP/y.npy" "$M/output_0.npy" "${TOL:-1e-4}" || fail "run output differs from reference"

# Several outputs: OUT_<i>.npy.
M2=$FIX/models/two_in_out_op17
TOL2=$(awk '$1 == "tol" {print $2}' "$M2/info.txt")
expect_rc 0 "$KILN" run "$M2/model.onnx" --input "$M2/input_0.npy" --input "$M2/input_1.npy" \
  --output "$TMP/two.npy"
[ ! -e "$TMP/two.npy" ] || fail "with two outputs, OUT.npy itself must not be written"
for i in 0 1; do
  npy_close "$TMP/two_$i.npy" "$M2/output_$i.npy" "${TOL2:-1e-4}" || fail "output $i of two_in_out"
done

# --- bench --json ---------------------------------------------------------------------------
expect_rc 0 "$KILN" bench "$M/model.onnx" --runs 7 --warmup 1 --threads 1 --json "$TMP/b.json"
grep -q "p99" "$TMP/out.txt" || fail "bench prints p99"
"$PY" - "$TMP/b.json" "$M/model.onnx" <<'PYEOF' || fail "bench JSON"
import json, sys
j = json.load(open(sys.argv[1]))
assert j['model'] == sys.argv[2], j
assert j['runs'] == 7 and j['threads'] == 1, j
lat = j['latency_ms']
assert 0 < lat['min'] <= lat['p50'] <= lat['p90'] <= lat['p99'], lat
assert lat['min'] <= lat['mean'], lat
assert j['load_ms'] > 0, j
PYEOF

# --- bench --check: the output of --input against a reference ------------------------------
expect_err 2 "--check needs" "$KILN" bench "$M/model.onnx" --check "$M/output_0.npy"
expect_err 1 "does not match output 0" "$KILN" bench "$M/model.onnx" --runs 2 \
  --input "$M/input_0.npy" --check "$M/input_0.npy"
for P in f32 bf16; do
  expect_rc 0 "$KILN" bench "$M/model.onnx" --runs 2 --warmup 0 --threads 1 --precision $P \
    --input "$M/input_0.npy" --check "$M/output_0.npy" --json "$TMP/c.json"
  grep -q "^check: .*max rel error" "$TMP/out.txt" || fail "bench --check prints its figures"
  "$PY" - "$TMP/c.json" "$P" <<'PYEOF' || fail "bench --check JSON ($P)"
import json, sys
j = json.load(open(sys.argv[1]))
c = j['check']
assert j['precision'] == sys.argv[2], j
# f32 matches PyTorch to float rounding; bf16 (where the CPU has it) to bf16's.
assert c['max_rel_error'] < (1e-4 if sys.argv[2] == 'f32' else 5e-2), c
assert c['rows'] >= 1 and c['top5_contains'] == c['rows'], c
if sys.argv[2] == 'f32':
    assert c['top1_agree'] == c['rows'], c
PYEOF
done

# --- quantize: a QDQ model Kiln runs within 8-bit error of the float one -------------------------
R="$FIX/models/tiny_resnet_op13"
expect_err 2 "'quantize' needs --out" "$KILN" quantize "$R/model.onnx"
expect_err 2 "--method expects minmax or percentile" "$KILN" quantize "$R/model.onnx" \
  --out "$TMP/q.onnx" --method best
expect_err 1 "missing.onnx" "$KILN" quantize "$TMP/missing.onnx" --out "$TMP/q.onnx"
for METHOD in minmax percentile; do
  expect_rc 0 "$KILN" quantize "$R/model.onnx" --out "$TMP/q.onnx" --random 2 --per-channel \
    --method $METHOD --threads 1
  grep -q "^quantized [1-9][0-9]* nodes" "$TMP/out.txt" || fail "quantize prints its counts"
  # A standard ONNX model (python3-onnx is one of the test dependencies: tests/setup.sh).
  "$PY" -c "import onnx, sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)" \
    "$TMP/q.onnx" || fail "the QDQ model passes onnx.checker ($METHOD)"
  expect_rc 0 "$KILN" run "$TMP/q.onnx" --input "$R/input_0.npy" --output "$TMP/q_out.npy" \
    --threads 1 --tune none --no-cache
  npy_close "$TMP/q_out.npy" "$R/output_0.npy" 5e-2 || fail "the QDQ model's output ($METHOD)"
  npy_close "$TMP/q_out.npy" "$R/output_0.npy" 1e-6 && fail "the QDQ model is quantized ($METHOD)"
done

# --- strategies, tuning cache, plan --------------------------------------------------------------
R="$FIX/models/tiny_resnet_op13/model.onnx"
expect_rc 2 "$KILN" bench "$R" --strategy best
expect_rc 2 "$KILN" bench "$R" --tune most
expect_rc 2 "$KILN" run "$R" --input x.npy --strategy global,local
expect_rc 2 "$KILN" bench "$R" --family fft
expect_rc 0 "$KILN" plan "$R" --family direct --tune none --no-cache
grep -q "conv.gemm1x1" "$TMP/out.txt" && fail "--family direct leaves no gemm1x1 conv"
expect_rc 0 "$KILN" bench "$R" --runs 3 --warmup 0 --threads 1 --strategy global,local,fixed \
  --tune fast --cache "$TMP/kc" --json "$TMP/s.json"
expect_rc 0 "$KILN" bench "$R" --runs 3 --warmup 0 --threads 1 --strategy global \
  --cache "$TMP/kc" --json "$TMP/s2.json"
"$PY" - "$TMP/s.json" "$TMP/s2.json" <<'PYEOF' || fail "bench strategies JSON"
import json, sys
a = json.load(open(sys.argv[1]))
assert [o['strategy'] for o in a] == ['global', 'local', 'fixed'], a
for o in a:
    for k in ('predicted_ms', 'latency_ms', 'load_ms', 'load_breakdown_ms', 'cache_hits',
              'cache_misses', 'solve_ms', 'optimal'):
        assert k in o, (k, o)
    assert o['tune'] == 'fast' and o['predicted_ms'] > 0, o
    assert set(o['load_breakdown_ms']) >= {'parse', 'passes', 'profile', 'solve', 'jit', 'pack', 'jit_pack'}, o
assert a[0]['cache_misses'] > 0 and a[0]['optimal'] is True, a[0]
assert a[1]['cache_hits'] > 0, a[1]  # local reuses what global measured
b = json.load(open(sys.argv[2]))
assert b['plan_from_cache'] is True and b['measurements'] == 0, b
assert abs(b['predicted_ms'] - a[0]['predicted_ms']) <= 1e-6 * a[0]['predicted_ms'], (a[0], b)
PYEOF
expect_rc 0 "$KILN" plan "$R" --threads 1 --cache "$TMP/kc" --dot "$TMP/p.dot"
grep -q "predicted" "$TMP/out.txt" || fail "plan prints the predicted total"
grep -q "conv\." "$TMP/out.txt" || fail "plan lists conv labels"
grep -q "^digraph" "$TMP/p.dot" || fail "plan --dot writes a Graphviz graph"
grep -q "fillcolor" "$TMP/p.dot" || fail "plan --dot colours nodes"

# --- info: figures computed by hand from the fixtures' shapes ----------------------------------
# expect_info MODEL PARAMS MACS [ARGS...]
expect_info() {
  local model=$1 params=$2 macs=$3
  shift 3
  expect_rc 0 "$KILN" info "$FIX/models/$model/model.onnx" "$@"
  grep -q "^parameters: $params " "$TMP/out.txt" || fail "$model: expected $params parameters"
  grep -q "(2 x $macs MACs" "$TMP/out.txt" || fail "$model: expected $macs MACs"
}
# W [6,4,3,3] + B [6]; y [2,6,8,8] at batch 2, each output reads 4*3*3 weights.
expect_info conv_basic_op13 222 27648 --batch 2
# group 2: W [4,3,3,3] + B [4]; y [1,4,7,7] * (6/2)*3*3.
expect_info conv_groups_op13 112 5292
# depthwise x2: W [8,1,3,3] + B [8]; y [1,8,6,6] * 1*3*3.
expect_info conv_depthwise_mult2_op13 80 2592
# Gemm transB: B [4,6] + C [4]; y [2,4] * K=6.
expect_info gemm_transb_op13 28 48
# batched MatMul, no constants: y [2,3,4] * K=5.
expect_info matmul_batched_op13 0 120
grep -q "MatMul  *1$" "$TMP/out.txt" || fail "info lists MatMul once in the op histogram"

finish
