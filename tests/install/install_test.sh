#!/usr/bin/env bash
# Installs the already-built project into a temporary prefix, builds examples/ against that
# install (CMake find_package and pkg-config), runs both examples on the demo model and checks
# what they print; then imports the installed Python package and runs examples/classify.py.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR [CMAKE]
set -euo pipefail

BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
CMAKE=${3:-cmake}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/kiln_install.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
PREFIX=$TMP/prefix

fail() { echo "install_test: FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

step "install into $PREFIX"
"$CMAKE" --install "$BUILD" --prefix "$PREFIX"
LIB=$(find "$PREFIX" -name 'libkiln.so' | head -n 1)
PC=$(find "$PREFIX" -name 'kiln.pc' | head -n 1)
[ -n "$LIB" ] || fail "libkiln.so not installed"
[ -n "$PC" ] || fail "kiln.pc not installed"
for h in kiln.h kiln.hpp version.h; do
  [ -f "$PREFIX/include/kiln/$h" ] || fail "include/kiln/$h not installed"
done
[ -x "$PREFIX/bin/kiln" ] || fail "bin/kiln not installed"
LIBDIR=$(dirname "$LIB")

step "libkiln.so exports only kiln_* symbols"
extra=$(nm -D --defined-only "$LIB" | awk '{print $NF}' | grep -v '^kiln_' || true)
[ -z "$extra" ] || fail "unexpected exported symbols: $extra"

MODEL=$SRC/examples/models/squeezenet1_1.onnx
if [ ! -f "$MODEL" ]; then
  MODEL=$(ls "$SRC"/tests/fixtures/models/*/model.onnx 2>/dev/null | head -n 1 || true)
  [ -n "$MODEL" ] || fail "no demo model (examples/models/squeezenet1_1.onnx) and no fixture model"
  echo "demo model absent, using fixture $MODEL"
fi

step "CMake build of examples/ against the install"
"$CMAKE" -S "$SRC/examples" -B "$TMP/build" -DCMAKE_PREFIX_PATH="$PREFIX" \
  -DCMAKE_BUILD_TYPE=Release > "$TMP/configure.log" 2>&1 || { cat "$TMP/configure.log"; fail "configure"; }
"$CMAKE" --build "$TMP/build" -j 2 > "$TMP/build.log" 2>&1 || { cat "$TMP/build.log"; fail "build"; }

step "pkg-config build of classify.c"
mkdir -p "$TMP/pc"
cp "$SRC/examples/classify.c" "$SRC/examples/Makefile" "$TMP/pc/"
# kiln.pc is relocatable (prefix from its own location): no prefix override needed.
PKG_CONFIG_PATH=$(dirname "$PC") make -C "$TMP/pc" CFLAGS="-O2 -Wall -Wextra -Werror"

export LD_LIBRARY_PATH=$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
deps=$(ldd "$TMP/pc/classify")  # not piped into grep -q: with pipefail, ldd could die of SIGPIPE
grep -q "$LIBDIR/libkiln.so" <<<"$deps" || fail "pkg-config build does not use the installed libkiln.so"

# Runs one example and checks its top-5 listing: exit 0, n_top distinct indices below the
# number of values, scores non-increasing, finite.
check_run() {
  local name=$1 exe=$2 out
  step "run $name"
  out=$("$exe" "$MODEL") || fail "$name exited with $?"
  echo "$out"
  echo "$out" > "$TMP/$name.out"
  echo "$out" | awk '
    /^top-[0-9]+ of output/ { ntop = substr($1, 5) + 0; nval = substr($(NF-1), 2) + 0; seen_hdr = 1 }
    / class [0-9]+ +score / {
      for (i = 1; i <= NF; ++i) { if ($i == "class") c = $(i+1) + 0; if ($i == "score") s = $(i+1) }
      if (s !~ /^-?[0-9]+\.[0-9]+$/) { print "non-finite score " s; bad = 1 }
      if (c >= nval) { print "class " c " out of range " nval; bad = 1 }
      if (c in used) { print "duplicate class " c; bad = 1 }
      used[c] = 1
      if (n > 0 && s + 0 > prev + 0) { print "scores not sorted"; bad = 1 }
      prev = s; n++
    }
    END {
      if (!seen_hdr) { print "no top-k header"; exit 1 }
      if (n != ntop || ntop < 1) { print "expected " ntop " entries, got " n; exit 1 }
      exit bad
    }' || fail "$name printed an unexpected listing"
}

check_run classify_c "$TMP/build/classify_c"
check_run classify_cpp "$TMP/build/classify_cpp"
check_run classify_pkgconfig "$TMP/pc/classify"

# Same input, same library: all three must print the same listing.
cmp -s "$TMP/classify_c.out" "$TMP/classify_cpp.out" || fail "C and C++ examples disagree"
cmp -s "$TMP/classify_c.out" "$TMP/classify_pkgconfig.out" || fail "CMake and pkg-config builds disagree"
if [ "$(basename "$MODEL")" = squeezenet1_1.onnx ]; then
  grep -q "(1000 values)" "$TMP/classify_c.out" || fail "squeezenet should have 1000 classes"
fi

step "installed CLI"
ver=$("$PREFIX/bin/kiln" --version)
grep -q "^kiln " <<<"$ver" || fail "kiln --version"
"$PREFIX/bin/kiln" info "$MODEL" > /dev/null || fail "kiln info"

step "installed Python package"
PYMOD=$(find "$PREFIX" -name '_kiln*.so' | head -n 1)
cache_var() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD/CMakeCache.txt"; }
if [ -z "$PYMOD" ]; then
  ! ls "$BUILD"/python/kiln/_kiln*.so > /dev/null 2>&1 ||
    fail "the Python module was built but not installed"
  echo "SKIPPED: the kiln Python package was not built (see the KILN_BUILD_PYTHON warning)"
else
  SITE=$(dirname "$(dirname "$PYMOD")")
  PY=$(cache_var KILN_PYTHON)
  pydir=$(cache_var KILN_PYTHON_INSTALL_DIR)
  [ -n "$pydir" ] || pydir=$("$PY" "$SRC/runtime/python/site_dir.py" "$PREFIX" 2> /dev/null)
  [ "${pydir:0:1}" = / ] || [ "$SITE" = "$PREFIX/$pydir" ] ||
    fail "package in $SITE, not $PREFIX/$pydir"
  for f in __init__.py _kiln.pyi py.typed; do
    [ -f "$SITE/kiln/$f" ] || fail "kiln/$f not installed"
  done
  # The module finds the installed libkiln.so through its RPATH ($ORIGIN/...), not the
  # environment; it is imported from the install, not from the build tree.
  deps=$(env -u LD_LIBRARY_PATH ldd "$PYMOD")
  kl=$(awk '/libkiln\.so/ { print $3 }' <<<"$deps")
  [ -n "$kl" ] && [ "$(realpath "$kl")" = "$(realpath "$LIBDIR/libkiln.so")" ] ||
    fail "$PYMOD does not load $LIBDIR/libkiln.so: $deps"
  where=$(cd "$TMP" && env -u LD_LIBRARY_PATH PYTHONPATH="$SITE" "$PY" -c \
    'import kiln; print(kiln.__file__, kiln.__version__)') || fail "import of the installed kiln"
  pc_ver=$(PKG_CONFIG_PATH=$(dirname "$PC") pkg-config --modversion kiln)
  [ "$where" = "$SITE/kiln/__init__.py $pc_ver" ] ||
    fail "imported '$where', expected version $pc_ver"
  printf '#!/bin/sh\ncd "%s" && exec env -u LD_LIBRARY_PATH PYTHONPATH="%s" "%s" "%s" "$@"\n' \
    "$TMP" "$SITE" "$PY" "$SRC/examples/classify.py" > "$TMP/classify_py"
  chmod +x "$TMP/classify_py"
  check_run classify_py "$TMP/classify_py"

  if [ -z "$(cache_var KILN_PYTHON_INSTALL_DIR)" ]; then
    step "install into a user prefix (~/.local): import kiln with no PYTHONPATH"
    USERHOME=$TMP/home
    HOME=$USERHOME "$CMAKE" --install "$BUILD" --prefix "$USERHOME/.local" > /dev/null
    where=$(cd "$TMP" && env -u LD_LIBRARY_PATH -u PYTHONPATH -u PYTHONNOUSERSITE HOME="$USERHOME" \
      "$PY" -c 'import kiln; print(kiln.__file__)') || fail "no kiln after installing into ~/.local"
    [[ $where == "$USERHOME/.local/"*/kiln/__init__.py ]] || fail "imported '$where'"
  fi
fi

echo "install_test: OK"
