#!/usr/bin/env bash
# Run the guest tests listed in tests/guest/TESTS (one script per line, in
# order); print a summary; fail if any failed. Run a single test directly:
# tests/guest/test-NAME.sh.  A line "asan test-NAME.sh" runs the test on
# the QEMU whose device code has AddressSanitizer and UBSan
# (scripts/build-qemu-asan.sh, built on first use); any report of theirs
# fails it, whatever the test says (a test may kill a QEMU on purpose).
# The same by hand: PVRDMA_ASAN=1 tests/guest/run-all.sh runs every test
# on it.  Arguments, if any, are run instead of TESTS, one line each
# ("test-faults.sh" "asan test-hotplug.sh").  Each test's output is also kept in
# build/tests/run-all/NAME.out; after the summary the last lines of every
# failed test's output are printed again (a CI log often keeps only its end),
# with the end of the last guest console logs it wrote in build/vm.
# Running TESTS, it first starts scripts/prebuild.sh in the background at
# the lowest CPU and I/O priority (what the last tests need: the newest
# QEMU, the 6.12 image, the stock Debian guests, the Debian 13 host
# package; log in build/tests/run-all/prebuild.log), and the line
# "wait-prebuild" of TESTS waits for it, running it again in the
# foreground if it failed (so that its error is seen). PVRDMA_PREBUILD=0:
# no background run, the builds happen at that line.
set -uo pipefail
cd "$(dirname "$0")"
out=${PVRDMA_OUT:-$(cd ../.. && pwd)/build}/tests/run-all
mkdir -p "$out"
failed=() passed=()
asan_qemu=
# run_test NAME: the test, on the sanitized QEMU if asked; its status.
run_test() {
    local t=$1 san=$2 dir=$out/asan/${1%.sh} rc
    if [ "$san" != asan ]; then
        bash "./$t"
        return
    fi
    if [ -z "$asan_qemu" ]; then
        asan_qemu=$(../../scripts/build-qemu-asan.sh) || {
            echo "cannot build the sanitized QEMU"
            return 1
        }
    fi
    rm -rf "$dir" && mkdir -p "$dir"
    # Reports go to files (one per QEMU process), so that none is lost in
    # a log nobody reads; leaks are not checked (QEMU's own exit leaks).
    # (UBSan may still write to QEMU's stderr: the test's output is
    # searched too.)
    PVRDMA_QEMU=$asan_qemu \
    ASAN_OPTIONS=log_path=$dir/asan:detect_leaks=0:abort_on_error=1 \
    UBSAN_OPTIONS=log_path=$dir/ubsan:print_stacktrace=1 \
        bash "./$t" 2>&1 | tee "$dir/test.out"
    rc=${PIPESTATUS[0]}
    if grep -lE "ERROR: AddressSanitizer|runtime error:" "$dir"/* 2>/dev/null; then
        echo "[$t] sanitizer reports (above files):"
        grep -hE -A30 "ERROR: AddressSanitizer|runtime error:" "$dir"/* | head -60
        return 1
    fi
    echo "[$t] (ran on the ASan+UBSan QEMU: no report)"
    return $rc
}

prebuild_pid=
if [ $# -eq 0 ] && [ "${PVRDMA_PREBUILD:-1}" != 0 ]; then
    setsid nice -n 19 ionice -c 3 ../../scripts/prebuild.sh \
        > "$out/prebuild.log" 2>&1 < /dev/null &
    prebuild_pid=$!
    trap '[ -z "$prebuild_pid" ] || kill -- -"$prebuild_pid" 2>/dev/null' EXIT
fi
# wait_prebuild: the background builds done, else done here.
wait_prebuild() {
    local rc=0 start=$SECONDS
    if [ -n "$prebuild_pid" ]; then
        echo "=== waiting for the background builds (log: $out/prebuild.log)"
        wait "$prebuild_pid" || rc=$?
        prebuild_pid=
        grep -a "done in\|error" "$out/prebuild.log"
        [ $rc -eq 0 ] && { echo "=== background builds: done (waited $((SECONDS - start)) s)"; return; }
        echo "=== background builds failed (status $rc): again in the foreground"
    fi
    ../../scripts/prebuild.sh || echo "=== the builds failed: the tests after this need them"
}

while read -r t; do
    case "$t" in ''|'#'*) continue ;; esac
    if [ "$t" = wait-prebuild ]; then
        wait_prebuild
        continue
    fi
    san=
    case "$t" in asan\ *) san=asan t=${t#asan } ;; esac
    [ "${PVRDMA_ASAN:-0}" = 1 ] && san=asan
    echo "=== $t${san:+ (ASan+UBSan QEMU)}"
    start=$SECONDS
    mark=$out/${t%.sh}.start
    touch "$mark"
    if run_test "$t" "$san" 2>&1 | tee "$out/${t%.sh}.out"; [ "${PIPESTATUS[0]}" -eq 0 ]; then
        passed+=("$t${san:+ (asan)} ($((SECONDS - start))s)")
    else
        failed+=("$t${san:+ (asan)} ($((SECONDS - start))s)")
    fi
done < <(if [ $# -gt 0 ]; then printf '%s\n' "$@"; else cat TESTS; fi)
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
