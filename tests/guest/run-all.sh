#!/usr/bin/env bash
# Run the guest tests listed in tests/guest/TESTS (one script per line, in
# order); print a summary; fail if any failed. Run a single test directly:
# tests/guest/test-NAME.sh.  Each test's output is also kept in
# build/tests/run-all/NAME.out; after the summary the last lines of every
# failed test's output are printed again (a CI log often keeps only its end),
# with the end of the last guest console logs it wrote in build/vm.
set -uo pipefail
cd "$(dirname "$0")"
out=${PVRDMA_OUT:-$(cd ../.. && pwd)/build}/tests/run-all
mkdir -p "$out"
failed=() passed=()
while read -r t; do
    case "$t" in ''|'#'*) continue ;; esac
    echo "=== $t"
    start=$SECONDS
    mark=$out/${t%.sh}.start
    touch "$mark"
    if bash "./$t" 2>&1 | tee "$out/${t%.sh}.out"; [ "${PIPESTATUS[0]}" -eq 0 ]; then
        passed+=("$t ($((SECONDS - start))s)")
    else
        failed+=("$t ($((SECONDS - start))s)")
    fi
done < TESTS
echo "=== guest tests: ${#passed[@]} passed, ${#failed[@]} failed"
printf '  passed: %s\n' "${passed[@]}"
[ ${#failed[@]} -eq 0 ] && exit 0
for f in "${failed[@]}"; do
    t=${f%% *}
    echo "=== last lines of $t (all of it: $out/${t%.sh}.out)"
    tail -n 25 "$out/${t%.sh}.out"
    # the guest console and QEMU logs it wrote last, newest first
    find "$out/../../vm" -name '*.log' -newer "$out/${t%.sh}.start" \
         -printf '%T@ %p\n' 2>/dev/null | sort -rn | head -n 4 |
    while read -r _ log; do
        echo "--- last lines of $log"
        tail -n 12 "$log"
    done
done
printf '  FAILED: %s\n' "${failed[@]}"
exit 1
