# Shared by the CLI test scripts (sourced): a temporary folder $TMP removed at exit, a failure
# count, and the exit-status checks. Needs NAME (the script's name for messages) set first.
TMP=$(mktemp -d "${TMPDIR:-/tmp}/$NAME.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
failures=0
fail() { echo "$NAME: FAIL: $*" >&2; failures=$((failures + 1)); }

# expect_rc CODE CMD...: runs CMD (stdout to $TMP/out.txt, stderr to $TMP/err.txt), checks its
# exit status.
expect_rc() {
  local want=$1
  shift
  "$@" > "$TMP/out.txt" 2> "$TMP/err.txt"
  local rc=$?
  [ "$rc" = "$want" ] || fail "'$*' exited $rc, expected $want; stderr: $(cat "$TMP/err.txt")"
}

# expect_err CODE TEXT CMD...: as expect_rc, and stderr contains TEXT.
expect_err() {
  local want=$1 text=$2
  shift 2
  expect_rc "$want" "$@"
  grep -qF -- "$text" "$TMP/err.txt" || fail "'$*': stderr lacks \"$text\": $(cat "$TMP/err.txt")"
}

# The script's verdict: exit 1 after any failure.
finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$NAME: $failures failure(s)" >&2
    exit 1
  fi
  echo "$NAME: OK"
}
