#!/usr/bin/env bash
# The `kiln` CLI's conventions (issue 18): per-command help that agrees with what the parser
# accepts, "unknown option" wherever it is, bench on real inputs, concurrent requests and their
# throughput, the machine/version/batch in --json, output paths checked before the load, and
# profiling progress on stderr when it is not a terminal.
# Usage: cli_conventions_test.sh KILN_EXE FIXTURE_DIR PYTHON
set -uo pipefail

KILN=$(realpath "$1")
FIX=$(realpath "$2")
PY=${3:-python3}
NAME=cli_conventions_test
source "$(dirname "$0")/cli_test_lib.sh"
cd "$TMP" || exit 1  # whatever a command writes by mistake lands here

R=$FIX/models/tiny_resnet_op13
M=$R/model.onnx

# --- help: the overview, each command's own --------------------------------------------------
expect_rc 0 "$KILN" --help
for c in info run plan bench quantize; do
  grep -qE "^  $c " "$TMP/out.txt" || fail "--help lists the command $c"
done
grep -q "kiln COMMAND --help" "$TMP/out.txt" || fail "--help points at per-command help"
grep -q -- "--concurrency" "$TMP/out.txt" && fail "--help shows no command's own options"
grep -q "shared/peers" "$TMP/out.txt" && fail "--help names nothing outside the repository"

expect_rc 0 "$KILN" bench --help
cp "$TMP/out.txt" "$TMP/bench_help.txt"
head -1 "$TMP/bench_help.txt" | grep -q "^usage: kiln bench MODEL" || fail "bench --help: usage line"
for o in --runs --concurrency --sessions --input --json --layers --batch --strategy --log-level; do
  grep -qE "^  $o( |$)" "$TMP/bench_help.txt" || fail "bench --help lists $o"
done
for o in --dot --output; do
  grep -qE "^  $o " "$TMP/bench_help.txt" && fail "bench --help lists plan/run's $o"
done
# Every option line explains itself.
grep -E '^  --[a-z-]+( [A-Za-z.]+)? *$' "$TMP/bench_help.txt" && fail "an option without help"

expect_rc 0 "$KILN" help bench
cmp -s "$TMP/out.txt" "$TMP/bench_help.txt" || fail "'kiln help bench' differs from 'bench --help'"
expect_rc 0 "$KILN" bench "$M" --runs 3 -h
cmp -s "$TMP/out.txt" "$TMP/bench_help.txt" || fail "'bench MODEL ... -h' is bench's help"
expect_rc 0 "$KILN" help
grep -qE "^  bench " "$TMP/out.txt" || fail "'kiln help' is the overview"
expect_err 2 "unknown command 'frob'" "$KILN" help frob
expect_rc 0 "$KILN" --version
grep -qE '^kiln [0-9]+\.[0-9]+\.[0-9]+ \(build [^ )]+\)$' "$TMP/out.txt" ||
  fail "--version prints the version and build id: $(cat "$TMP/out.txt")"

# The help and the parser agree: for each command, all the options its help lists are accepted
# together (the missing model then fails the run: exit 1), and every other option is refused
# on its own (exit 2, "not valid").
"$PY" - "$KILN" "$TMP" <<'PYEOF' || fail "the help and the parser disagree"
import re, subprocess, sys
kiln, tmp = sys.argv[1], sys.argv[2]
commands = ['info', 'run', 'plan', 'bench', 'quantize']
def help_of(*args):
    return subprocess.run([kiln, *args, '--help'], capture_output=True, text=True,
                          check=True).stdout
# --opt [VALUE] from the lines that start an option; a value name is upper case or a file.
opt_line = re.compile(r'^  (--[a-z-]+)(?: ([A-Z][A-Za-z.]*))?(?: |$)', re.M)
texts = {c: help_of(c) for c in commands}
texts[''] = help_of()
too_wide = [l for t in texts.values() for l in t.splitlines() if len(l) > 80]
assert not too_wide, ('help wider than 80 columns', too_wide[:3])
listed = {c: dict(opt_line.findall(texts[c])) for c in commands}
every = {}
for c in commands:
    every.update(listed[c])
every.update(opt_line.findall(texts['']))
for o in ('--help', '--version'):
    every.pop(o, None)
values = {'N': '1', 'SEC': '0.5', 'MS': '100', 'LEVEL': 'error', 'ISA': 'avx2', 'FAMILY': 'direct',
          'ACCURACY': 'strict', 'MODE': 'none', 'STRATEGY': 'local', 'DIR': tmp + '/cachedir',
          'SHAPE': 'input:1x3x8x8', 'PREC': 'bf16', 'REF.npy': tmp + '/ref.npy', 'M': 'minmax'}
def args_of(o):
    meta = every[o]
    return [o] + ([values.get(meta, tmp + '/file_' + meta)] if meta else [])
bad = []
for c in commands:
    model = [c, tmp + '/missing.onnx']
    accepted = [a for o in every if o in listed[c] for a in args_of(o)]
    r = subprocess.run([kiln, *model, *accepted], capture_output=True, text=True)
    if r.returncode != 1:
        bad.append((c, 'listed options', r.returncode, r.stderr))
    for o in every:
        if o in listed[c]:
            continue
        r = subprocess.run([kiln, *model, *args_of(o)], capture_output=True, text=True)
        if r.returncode != 2 or "not valid for '%s'" % c not in r.stderr:
            bad.append((c, o, r.returncode, r.stderr))
assert len(every) >= 20 and not bad, bad
PYEOF
# --- unknown options and missing values, wherever they are -------------------------------------
expect_err 2 "unknown option '--foo'" "$KILN" bench "$M" --foo
grep -q "kiln bench --help" "$TMP/err.txt" || fail "a usage error points at the command's help"
expect_err 2 "unknown option '--foo'" "$KILN" bench --foo "$M"
expect_err 2 "unknown option '--foo'" "$KILN" --foo bench "$M"
expect_err 2 "unknown option '--foo'" "$KILN" bench "$M" --foo=3
expect_err 2 "unknown option '-x'" "$KILN" bench "$M" -x
expect_err 2 "--runs needs a value" "$KILN" bench "$M" --runs
expect_err 2 "--json needs a value" "$KILN" bench "$M" --json --layers
expect_err 2 "--json needs a value" "$KILN" bench "$M" --json=
expect_err 2 "--runs expects an integer, got 'abc'" "$KILN" bench "$M" --runs=abc
expect_err 2 "--layers takes no value" "$KILN" bench "$M" --layers=yes
expect_err 2 "option --dot is not valid for 'bench'" "$KILN" bench "$M" --dot x.dot
grep -q "kiln bench --help" "$TMP/err.txt" || fail "a usage error points at the command's help"
expect_rc 0 "$KILN" bench "$M" --runs=2 --warmup=0 --threads=1 --no-cache --tune=none

# --- bench --input ---------------------------------------------------------------------------
expect_rc 0 "$KILN" bench "$M" --input "$R/input_0.npy" --runs 3 --warmup 0 --threads 1 \
  --tune none --json "$TMP/in.json"
"$PY" - "$TMP/in.json" "$R/input_0.npy" <<'PYEOF' || fail "bench --input JSON names the file"
import json, sys
j = json.load(open(sys.argv[1]))
assert j['inputs'] == [sys.argv[2]], j['inputs']
PYEOF
expect_err 1 "conv_basic_op13/input_0.npy" "$KILN" bench "$M" --tune none \
  --input "$FIX/models/conv_basic_op13/input_0.npy"
grep -q "input 'input'" "$TMP/err.txt" || fail "a wrong --input names the model's input"
expect_err 1 "2 --input given" "$KILN" bench "$M" --tune none --input "$R/input_0.npy" \
  --input "$R/input_0.npy"
expect_err 1 "$TMP/none.npy" "$KILN" bench "$M" --tune none --input "$TMP/none.npy"

# --- bench --json: machine, version, batch, latency, throughput; --concurrency -----------------
"$KILN" --version > "$TMP/version.txt"
bench_json() {  # bench_json FILE ARGS...
  local f=$1
  shift
  expect_rc 0 "$KILN" bench "$@" --warmup 1 --threads 1 --tune none --json "$f"
}
bench_json "$TMP/one.json" "$M" --runs 6 --layers
grep -qE "latency_ms: min .* max .* stddev .* p99" "$TMP/out.txt" || fail "bench prints max, stddev"
grep -qE "throughput: [0-9.]+ inferences/s" "$TMP/out.txt" || fail "bench prints the throughput"
bench_json "$TMP/conc.json" "$M" --runs 4 --concurrency 3
grep -q "concurrency: 3" "$TMP/out.txt" || fail "bench prints the concurrency"
bench_json "$TMP/sess.json" "$M" --runs 2 --concurrency 2 --sessions
bench_json "$TMP/secs.json" "$M" --seconds 0.3 --concurrency 2
D=$FIX/models/dynamic_batch_op13/model.onnx  # batch dim symbolic: runs at batch 1
bench_json "$TMP/dyn.json" "$D" --runs 2
grep -q "batch: 1 " "$TMP/out.txt" || fail "bench prints batch 1 for a symbolic batch"
bench_json "$TMP/dyn3.json" "$D" --runs 2 --batch 3
"$PY" - "$TMP" "$(cat "$TMP/version.txt")" <<'PYEOF' || fail "bench JSON contents"
import json, sys, os
tmp, version = sys.argv[1], sys.argv[2]
def load(n): return json.load(open(os.path.join(tmp, n)))
def check_latency(j):
    l = j['latency_ms']
    assert 0 < l['min'] <= l['p50'] <= l['p90'] <= l['p99'] <= l['max'], l
    assert l['min'] <= l['mean'] <= l['max'] and l['stddev'] >= 0, l
    assert l['stddev'] <= l['max'] - l['min'], l
    assert j['wall_ms'] > 0 and j['inferences_per_s'] > 0, j
    # Throughput is runs over wall time; images add the batch.
    assert abs(j['inferences_per_s'] - j['runs'] / j['wall_ms'] * 1e3) <= 1e-3 * j['inferences_per_s'], j
    assert abs(j['images_per_s'] - j['inferences_per_s'] * j['batch']) <= 1e-3 * j['images_per_s'], j
one = load('one.json')
m = one['machine']
assert m['cpu'] and m['vendor'] and m['isa'] in ('avx512', 'avx2', 'scalar'), m
assert isinstance(m['features'], list) and m['cores'] >= 1, m
assert version == 'kiln %s (build %s)' % (m['kiln_version'], m['build_id']), (version, m)
assert one['batch'] == 1 and one['runs'] == 6 and one['concurrency'] == 1, one
assert one['inputs'] == [], one['inputs']  # random normal data
assert len(one['layers']) > 0 and one['layers_total_ms'] > 0, one
check_latency(one)
c = load('conc.json')
assert c['concurrency'] == 3 and c['runs'] == 12 and c['sessions'] is False, c
check_latency(c)
# The requests overlap: the wall time is below the sum of the latencies.
s = load('sess.json')
assert s['sessions'] is True and s['runs'] == 4, s
check_latency(s)
t = load('secs.json')
assert t['runs'] >= 2 and t['wall_ms'] >= 300, t
check_latency(t)
assert load('dyn.json')['batch'] == 1, load('dyn.json')['batch']
d3 = load('dyn3.json')
assert d3['batch'] == 3, d3['batch']
check_latency(d3)
PYEOF

# --- output paths are checked before the load -----------------------------------------------
# The model does not exist either: the output path's error comes first.
expect_err 1 "--json '$TMP/nodir/b.json'" "$KILN" bench "$TMP/missing.onnx" --json "$TMP/nodir/b.json"
grep -q "does not exist" "$TMP/err.txt" || fail "the missing folder is named"
expect_err 1 "--trace '$TMP/nodir/t.json'" "$KILN" bench "$TMP/missing.onnx" --trace "$TMP/nodir/t.json"
expect_err 1 "--dot '$TMP/nodir/p.dot'" "$KILN" plan "$TMP/missing.onnx" --dot "$TMP/nodir/p.dot"
expect_err 1 "--output '$TMP/nodir/y.npy'" "$KILN" run "$TMP/missing.onnx" --input x.npy \
  --output "$TMP/nodir/y.npy"
expect_err 1 "it is a folder" "$KILN" bench "$TMP/missing.onnx" --json "$TMP"
if [ "$(id -u)" != 0 ]; then  # root may write anywhere
  mkdir "$TMP/ro" && chmod 555 "$TMP/ro"
  expect_err 1 "not writable" "$KILN" bench "$TMP/missing.onnx" --json "$TMP/ro/b.json"
fi
# A failed load leaves no empty output file behind.
expect_rc 1 "$KILN" bench "$TMP/missing.onnx" --json "$TMP/j.json" --trace "$TMP/t.json"
[ ! -e "$TMP/j.json" ] && [ ! -e "$TMP/t.json" ] || fail "a failed bench left output files"

# --- profiling progress on stderr that is not a terminal ----------------------------------------
expect_rc 0 "$KILN" plan "$M" --threads 1 --no-cache
"$PY" - "$TMP/err.txt" <<'PYEOF' || fail "progress lines: $(cat "$TMP/err.txt")"
import re, sys
text = open(sys.argv[1]).read()
assert '\r' not in text, 'a bar drawn to a file'
pat = re.compile(r'^kiln: profiling (\d+)% \((\d+)/(\d+) measurements, (\d+\.\d) s\)$')
lines = [m for m in map(pat.match, text.splitlines()) if m]
assert 3 <= len(lines) <= 11, len(lines)
pct = [int(m.group(1)) for m in lines]
assert pct[0] == 0 and pct == sorted(pct) and len(set(pct)) == len(pct), pct
total = int(lines[0].group(3))
assert total >= 20, total  # enough measurements for several lines
for m in lines:
    assert int(m.group(3)) == total and int(m.group(1)) == int(m.group(2)) * 100 // total, m.group(0)
PYEOF
# plan --json: kiln_session_plan_json's object, one step per line of the printed table.
expect_rc 0 "$KILN" plan "$M" --threads 1 --cache "$TMP/pc" --json "$TMP/plan.json"
"$PY" - "$TMP/plan.json" "$TMP/out.txt" <<'PYEOF' || fail "plan --json: $(head -c 300 "$TMP/plan.json")"
import json, sys
p = json.load(open(sys.argv[1]))
assert p['threads'] == 1 and p['strategy'] == 'global', p
rows = open(sys.argv[2]).read().splitlines()
steps = p['steps']
assert steps and all(s['kernel'] for s in steps), steps
assert sum(s['op'] == '(convert)' for s in steps) == p['conversions'], p['conversions']
for s in steps:
    assert any(s['kernel'] in r for r in rows), s['kernel']
PYEOF
# With the plan from the tuning cache nothing is measured: no progress.
expect_rc 0 "$KILN" plan "$M" --threads 1 --cache "$TMP/pc"
expect_rc 0 "$KILN" plan "$M" --threads 1 --cache "$TMP/pc"
grep -q "profiling" "$TMP/err.txt" && fail "no progress when nothing is measured"

# --- shapes: --shape on every model command, another batch from the --input file -------------
for c in info plan; do
  expect_rc 0 "$KILN" $c "$M" --tune none --no-cache --shape input:2x3x40x24
  grep -q "\[2,3,40,24\]" "$TMP/out.txt" || [ $c = plan ] || fail "$c --shape: $(head -c 400 "$TMP/out.txt")"
done
expect_err 2 "--shape: input shape 'input:1x3x0x8' has dim 0" "$KILN" info "$M" --shape input:1x3x0x8
expect_err 2 "no 'NAME:'" "$KILN" run "$M" --shape 1x3x8x8 --input "$R/input_0.npy"
expect_err 1 "a shape is given for 'nope', which is not an input" "$KILN" info "$M" --shape nope:1x2
expect_err 1 "'input' dim 1 = 4 (the model declares 3)" "$KILN" info "$M" --shape input:1x4x32x32
expect_err 1 "has 4 dims" "$KILN" bench "$M" --runs 1 --shape input:1x3x32
# Two --shape options join: the second input name is unknown.
expect_err 1 "'other'" "$KILN" info "$M" --shape input:1x3x8x8 --shape other:1
# run: an input of batch 3 (the model loads at 1) gives what a load at --batch 3 gives, and the
# input at --shape H/W what the scalar path gives.
"$PY" - "$R/input_0.npy" "$TMP" <<'PYEOF' || fail "writing the batch-3 input"
import sys, numpy as np
x = np.load(sys.argv[1])
np.save(sys.argv[2] + '/x3.npy', np.concatenate([x, x * 0.5, -x], 0))
np.save(sys.argv[2] + '/hw.npy', np.resize(x, (1, 3, 24, 40)).astype(np.float32))
PYEOF
expect_rc 0 "$KILN" run "$M" --tune none --no-cache --input x3.npy --output y3.npy
grep -q "float32 \[3,10\]" "$TMP/out.txt" || fail "run at batch 3: $(cat "$TMP/out.txt")"
expect_rc 0 "$KILN" run "$M" --tune none --no-cache --batch 3 --input x3.npy --output y3b.npy
expect_rc 0 "$KILN" run "$M" --tune none --no-cache --shape input:1x3x24x40 --input hw.npy --output hw_jit.npy
expect_rc 0 "$KILN" run "$M" --tune none --no-cache --shape input:1x3x24x40 --max-isa scalar --input hw.npy --output hw_ref.npy
expect_err 1 "(dim 0, the batch, may differ; other dims: --shape)" "$KILN" run "$M" --input hw.npy
"$PY" - "$TMP" <<'PYEOF' || fail "run at another batch / shape: wrong numbers"
import sys, numpy as np
d = sys.argv[1]
a, b = np.load(d + '/y3.npy'), np.load(d + '/y3b.npy')
assert a.shape == (3, 10) and np.array_equal(a, b), (a, b)
j, r = np.load(d + '/hw_jit.npy'), np.load(d + '/hw_ref.npy')
assert np.abs(j - r).max() <= 1e-4 * max(1.0, np.abs(r).max()), (j, r)
PYEOF

finish
