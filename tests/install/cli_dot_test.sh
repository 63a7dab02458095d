#!/usr/bin/env bash
# `kiln plan --dot` rendered by Graphviz: every label part is a line of its own (no literal
# "\n"), and node names with quotes and backslashes come out as written.
# Usage: cli_dot_test.sh KILN_EXE FIXTURE_DIR PYTHON DOT_EXE (exit 77: no Graphviz `dot`)
set -uo pipefail

KILN=$1
FIX=$2
PY=${3:-python3}
DOT=${4:-}
if [ -z "$DOT" ] || [ ! -x "$DOT" ]; then
  echo "cli_dot_test: Graphviz 'dot' not found (tests/setup.sh installs graphviz): skipped" >&2
  exit 77
fi
TMP=$(mktemp -d "${TMPDIR:-/tmp}/kiln_cli_dot.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# The fixture with one conv named '/stem/stem.0/stem.0.0/Conv', renamed in place (the same
# length keeps the protobuf valid) to a name with quotes, backslashes and a literal "\n".
NAME='/stem/stem.0/stem.0.0/Conv'
NEW='/s"q\n\"x\\y/stem.0.0/Conv'
"$PY" - "$FIX/models/dynamic_batch_op13/model.onnx" "$TMP/m.onnx" "$NAME" "$NEW" <<'PYEOF' || exit 1
import sys
src, dst, old, new = sys.argv[1], sys.argv[2], sys.argv[3].encode(), sys.argv[4].encode()
assert len(old) == len(new) < 128, (old, new)
data = open(src, 'rb').read()
field = lambda name: b'\x1a' + bytes([len(name)]) + name  # NodeProto.name
assert data.count(field(old)) == 1, 'the node name is not in the fixture'
open(dst, 'wb').write(data.replace(field(old), field(new)))
PYEOF

"$KILN" plan "$TMP/m.onnx" --tune none --no-cache --dot "$TMP/p.dot" > "$TMP/out.txt" 2>&1 ||
  { echo "cli_dot_test: FAIL: kiln plan: $(cat "$TMP/out.txt")" >&2; exit 1; }
"$DOT" -Tsvg "$TMP/p.dot" -o "$TMP/p.svg" 2> "$TMP/dot_err.txt" ||
  { echo "cli_dot_test: FAIL: dot: $(cat "$TMP/dot_err.txt")" >&2; exit 1; }
"$PY" - "$TMP/p.svg" "$NEW" <<'PYEOF' || { echo "cli_dot_test: FAIL (p.dot: $(cat "$TMP/p.dot"))" >&2; exit 1; }
import re, sys
import xml.etree.ElementTree as ET
svg, name = sys.argv[1], sys.argv[2]
ns = '{http://www.w3.org/2000/svg}'
nodes = []
for g in ET.parse(svg).iter(ns + 'g'):
    if g.get('class') == 'node':
        nodes.append([t.text or '' for t in g.iter(ns + 'text')])
assert nodes, 'no nodes in the picture'
steps = [n for n in nodes if len(n) == 3]  # node name, "op label", "time"
assert len(steps) >= 5, nodes
for n in nodes:
    for line in n:
        if line != name:
            assert '\\n' not in line, ('a literal \\n in a label', n)
renamed = [n for n in steps if n[0] == name]
assert len(renamed) == 1, ('the renamed conv is not drawn as written', name, nodes)
assert renamed[0][1].startswith('Conv '), renamed
assert all(re.fullmatch(r'[0-9.]+ ms \((cache|measured|budget|model)\)', s[2]) for s in steps), steps
print('cli_dot_test: %d nodes, %d steps of 3 lines' % (len(nodes), len(steps)))
PYEOF
echo "cli_dot_test: OK"
