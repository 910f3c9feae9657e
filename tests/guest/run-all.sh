#!/usr/bin/env bash
# Run the guest tests listed in tests/guest/TESTS (one script per line, in
# order); print a summary; fail if any failed. Run a single test directly:
# tests/guest/test-NAME.sh.
set -uo pipefail
cd "$(dirname "$0")"
failed=() passed=()
while read -r t; do
    case "$t" in ''|'#'*) continue ;; esac
    echo "=== $t"
    start=$SECONDS
    if bash "./$t"; then
        passed+=("$t ($((SECONDS - start))s)")
    else
        failed+=("$t ($((SECONDS - start))s)")
    fi
done < TESTS
echo "=== guest tests: ${#passed[@]} passed, ${#failed[@]} failed"
printf '  passed: %s\n' "${passed[@]}"
[ ${#failed[@]} -eq 0 ] || { printf '  FAILED: %s\n' "${failed[@]}"; exit 1; }
