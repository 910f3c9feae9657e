#!/usr/bin/env bash
# The guest on Debian 13's 6.12 kernel instead of Debian 12's 6.1 (same
# userspace: Debian 12 packages and our rdma-core build): make image-6.12
# fetches the newest 6.12 and builds pvrdma.ko and the kernel-verbs test
# module for exactly that release. First a guest must report that it runs
# that release with our module loaded; then bring-up, the kernel verbs,
# rc_verify, verbs_ex (there also against 6.12's Soft-RoCE, which has
# ATOMIC_WRITE) and perftest run again on it, under the names NAME-6.12
# (logs apart). Fails if any of them fails.
. "$(dirname "$0")/lib.sh"

kernel=$PVRDMA_OUT/vmlinuz-6.12
initrd=$PVRDMA_OUT/initrd-6.12.cpio.gz
mods=$PVRDMA_OUT/modules-6.12
for f in "$kernel" "$initrd" "$mods/pvrdma.ko" "$mods/pvrdma_ktest.ko"; do
    [ -e "$f" ] || fail "$f is missing: run 'make image-6.12'"
done
rel=$(basename "$(readlink -f "$PVRDMA_OUT/kernel-6.12")")
case $rel in 6.12.*) ;; *) fail "build/kernel-6.12 is $rel, not a 6.12 kernel" ;; esac
# Both modules must be built for this very release (vermagic), or the
# guest would refuse them.
for ko in pvrdma pvrdma_ktest; do
    vm=$(modinfo -F vermagic "$mods/$ko.ko")
    [ "${vm%% *}" = "$rel" ] ||
        fail "$ko.ko is built for '${vm%% *}', the kernel is $rel: run 'make image-6.12'"
done

export PVRDMA_KERNEL=$kernel PVRDMA_INITRD=$initrd
export PVRDMA_KTEST_KO=$mods/pvrdma_ktest.ko

# The guest runs the 6.12 kernel and has loaded our module for it.
log=$PVRDMA_OUT/vm/$TEST_NAME.log
# shellcheck disable=SC2016 # $(uname -r) is the guest's
"$PVRDMA_TOP/scripts/vm.sh" --name "$TEST_NAME" --timeout 300 -- \
    'echo "GUEST-KERNEL=$(uname -r)"; cat /proc/version;
     lsmod | grep "^pvrdma " && echo GUEST-PVRDMA-LOADED; ibv_devices' ||
    fail "the 6.12 guest failed (status $?), see $log"
grep -qx "GUEST-KERNEL=$rel" "$log" ||
    fail "the guest does not run $rel: $(grep '^GUEST-KERNEL=' "$log" || echo 'no uname -r'), see $log"
grep -qx GUEST-PVRDMA-LOADED "$log" || fail "pvrdma.ko is not loaded on $rel, see $log"
grep -q pvrdma0 "$log" || fail "no pvrdma0 in ibv_devices on $rel, see $log"
pass "the guest runs $rel with pvrdma.ko loaded"

tests="test-bringup test-kernel-verbs test-rc-verify test-verbs-ex test-perftest"
failed=()
for t in $tests; do
    start=$SECONDS
    if PVRDMA_TEST_SUFFIX=-6.12 bash "$TESTS_TOP/tests/guest/$t.sh"; then
        echo "[$TEST_NAME] $t on $rel: passed ($((SECONDS - start))s)"
    else
        echo "[$TEST_NAME] $t on $rel: FAILED ($((SECONDS - start))s)"
        failed+=("$t")
    fi
done
[ ${#failed[@]} -eq 0 ] || fail "on $rel: ${failed[*]} failed"
pass "on $rel: $tests"
