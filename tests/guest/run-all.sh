#!/usr/bin/env bash
# Run every guest test (tests/guest/test-*.sh); print a summary; fail if
# any failed.
set -uo pipefail
cd "$(dirname "$0")"
failed=() passed=()
for t in test-*.sh; do
    echo "=== $t"
    start=$SECONDS
    if bash "./$t"; then
        passed+=("$t ($((SECONDS - start))s)")
    else
        failed+=("$t ($((SECONDS - start))s)")
    fi
done
echo "=== guest tests: ${#passed[@]} passed, ${#failed[@]} failed"
printf '  passed: %s\n' "${passed[@]}"
[ ${#failed[@]} -eq 0 ] || { printf '  FAILED: %s\n' "${failed[@]}"; exit 1; }
