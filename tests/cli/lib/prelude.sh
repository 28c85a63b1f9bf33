# Sourced by the CLI tests (tests/cli/*.sh) after their own `set` line, with their arguments:
# AVDIT_BINARY SHARED_DIR [SOURCE_DIR]. Sets avdit, shared, src; py (the repo's venv Python, checked,
# when SOURCE_DIR is given); tmp, a scratch folder removed on exit; fail MESSAGE (prints, exits 1).
# In lib/ so that the tests' glob does not register it as a test.
avdit=$1 shared=$2 src=${3:-}
if [ -n "$src" ]; then
  py=$src/.venv/bin/python
  [ -x "$py" ] || { echo "FAIL: $py missing: run scripts/setup.sh"; exit 1; }
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
