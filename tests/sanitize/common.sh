# Sourced by the sanitizer and fuzz scripts: paths, clang check, the shared build flags.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
JOBS=${KILN_SANITIZE_JOBS:-$(nproc)}

# The sanitizer runtimes come from libclang-rt-14-dev; clang alone links nothing.
require_clang() {
  if ! command -v clang++ >/dev/null 2>&1; then
    echo "clang++ not found: apt-get install clang libclang-rt-14-dev" >&2
    return 1
  fi
  local probe
  probe=$(mktemp -d)
  echo 'int main(){return 0;}' > "$probe/p.cpp"
  if ! clang++ -fsanitize=address,undefined,fuzzer-no-link "$probe/p.cpp" -o "$probe/p" \
      >/dev/null 2>&1; then
    rm -rf "$probe"
    echo "clang++ cannot link sanitizer runtimes: apt-get install libclang-rt-14-dev" >&2
    return 1
  fi
  rm -rf "$probe"
}

# Configures $1 from the repository root with clang and the given compile flags (also used to
# link executables and libkiln.so).
configure_sanitized() {
  local build=$1 flags=$2 link=$3
  cmake -S "$ROOT" -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=Sanitize -DCMAKE_CXX_FLAGS_SANITIZE="$flags" \
    -DCMAKE_C_FLAGS_SANITIZE="$flags" -DCMAKE_EXE_LINKER_FLAGS="$link" \
    -DCMAKE_SHARED_LINKER_FLAGS="$link" -DKILN_ZOO_DIR= >/dev/null
}

# Prints elapsed seconds since $1 (from `date +%s`).
since() { echo $(($(date +%s) - $1)); }
