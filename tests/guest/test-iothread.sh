#!/usr/bin/env bash
# The device with its doorbells and fabric links in an IOThread
# (-object iothread, -device pvrdma,iothread=; scripts/vm.sh --iothread):
# the tests that cover its data paths run again with it, under the names
# NAME-iothread (logs apart): rc_verify in one VM (one and two devices),
# the kernel verbs (kernel CQ arms with deferred doorbells), and a VM
# moved twice
# while RDMA runs with a peer VM,
# from one network namespace to another, over TCP fabric links
# (test-xvm-migrate.sh's netns variant: a move between hosts; the quiesce
# runs while the IOThread owns the links).  test-migrate.sh moves its VM
# to a device in an IOThread and saves one to a file (doorbells still
# queued run before the save).  Between VMs, test-xvm.sh,
# test-xhost.sh and test-xvm-rc-verify.sh run one of their two guests with
# iothread= themselves (each role of each tool with and without it
# across them: the ping-pongs, RC polling and events, 64 KiB, SRQ and UD,
# run there, no longer in one VM here).  Every other test passes with PVRDMA_IOTHREAD=1 too
# (docs/architecture.md, "Threading").
. "$(dirname "$0")/lib.sh"

tests="test-rc-verify test-kernel-verbs"
for t in $tests; do
    PVRDMA_IOTHREAD=1 PVRDMA_TEST_SUFFIX=-iothread \
        bash "$TESTS_TOP/tests/guest/$t.sh" || fail "$t with iothread= failed"
done
PVRDMA_IOTHREAD=1 PVRDMA_TEST_SUFFIX=-iothread PVRDMA_XMIGRATE_LINK=netns \
    PVRDMA_XMIGRATE_MOVES=2 bash "$TESTS_TOP/tests/guest/test-xvm-migrate.sh" ||
    fail "test-xvm-migrate (between network namespaces, 2 moves) with iothread= failed"
pass "with iothread=: $tests test-xvm-migrate (between network namespaces, 2 moves)"
