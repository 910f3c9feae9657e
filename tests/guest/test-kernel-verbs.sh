#!/usr/bin/env bash
# Kernel verbs: tests/guest/kmod/pvrdma_ktest.ko drives our driver's kernel
# data path (post_send/post_recv/poll_cq/req_notify_cq, DMA MR, fast-reg
# MR) for every RC opcode and error status, UC QPs (a SEND, a
# WRITE_WITH_IMM, a SEND lost for want of a receive) and ib_resize_cq
# with completions pending, on one device and across two.
# PVRDMA_KTEST_KO: the test module built elsewhere for the kernel the
# guest boots (PVRDMA_KERNEL), e.g. by test-kernel-6.12.sh; by default it
# is built here against the 6.1 headers of build/kernel.
. "$(dirname "$0")/lib.sh"
if [ -n "${PVRDMA_KTEST_KO:-}" ]; then
    ko=$PVRDMA_KTEST_KO
    [ -e "$ko" ] || fail "$ko is missing"
else
    kver=$(basename "$(readlink -f "$PVRDMA_OUT/kernel")")
    make -s -C "$TESTS_TOP/tests/guest/kmod" KVER="$kver" >&2 ||
        fail "cannot build the test module"
    ko=$TESTS_TOP/tests/guest/kmod/pvrdma_ktest.ko
fi

cat > "$TEST_OUT/guest.sh" <<'GUEST'
fail() { echo "GUEST-FAIL: $*"; exit 1; }
for args in "ibdev=pvrdma0" "ibdev=pvrdma0 ibdev2=pvrdma1"; do
    dmesg -c > /dev/null
    insmod ./pvrdma_ktest.ko $args || fail "insmod $args"
    rmmod pvrdma_ktest || fail "rmmod pvrdma_ktest"
    dmesg | grep "ktest:" | tee /tmp/ktest
    grep -q "ktest: RESULT passed=[1-9][0-9]* failed=0" /tmp/ktest ||
        fail "kernel verbs test failed ($args)"
done
dmesg | grep -qE "BUG|WARNING:|Oops" && fail "kernel warnings in dmesg"
echo GUEST-OK
GUEST
"$PVRDMA_TOP/scripts/vm.sh" --name "$TEST_NAME" --timeout 600 --pvrdma 2 \
    --add "$ko" --add "$TEST_OUT/guest.sh" -- sh ./guest.sh ||
    fail "see $PVRDMA_OUT/vm/$TEST_NAME.log"
pass "kernel RC verbs, UC QPs and CQ resize verified (one device, two devices)"
