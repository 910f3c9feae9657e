#!/usr/bin/env bash
# Our verification program (tests/guest/progs/rc_verify.c) through our
# provider: every user-space RC opcode with patterned data, every byte and
# completion field checked on both sides, and each error status provoked;
# between two QPs of one device, then between two pvrdma devices. Both
# again as XRC (rc_verify -X): an XRC_SEND QP to an XRC_RECV QP with the
# XRC SRQs of its domain (two, with their own CQs and PDs, named in
# turn), every opcode of the RC run that XRC has, a chain and the
# extended post API naming both SRQs, receives kept over the XRC_RECV
# QP's RESET and ERR, an SRQ of another domain or none named
# (REM_INV_REQ_ERR), keys of the other SRQ's PD (REM_ACCESS_ERR).
# Then the port counters (PVRDMA_EX_CAP_COUNTERS, through our driver's
# hw_counters): tests/guest/progs/hw_counters.c runs known traffic between
# the two devices (SENDs, WRITEs, READs, atomics, RNR NAKs and retries,
# each error completion) and checks that every counter of each device
# moved by exactly what it sent or took in; `rdma statistic` must show
# the values sysfs shows.
. "$(dirname "$0")/lib.sh"
rc_verify=$(build_prog rc_verify)
hw_counters=$(build_prog hw_counters)

cat > "$TEST_OUT/guest.sh" <<'GUEST'
fail() { echo "GUEST-FAIL: $*"; exit 1; }
./rc_verify -d pvrdma0 > /tmp/rv.out 2>&1
rc=$?
cat /tmp/rv.out
[ $rc -eq 0 ] || fail "rc_verify on one device"
# The device resizes SRQs (PVRDMA_EX_CAP_RESIZE_SRQ): the check ran.
grep -q "^PASS srq: resize" /tmp/rv.out || fail "rc_verify did not resize an SRQ"
./rc_verify -d pvrdma0 -D pvrdma1 || fail "rc_verify across two devices"
# XRC must run: the device offers it (no "XRC not checked").
for devs in "-d pvrdma0" "-d pvrdma0 -D pvrdma1"; do
    ./rc_verify -X $devs > /tmp/rvx.out 2>&1
    rc=$?
    cat /tmp/rvx.out
    [ $rc -eq 0 ] || fail "rc_verify -X $devs"
    grep -q "^PASS xrc: setup" /tmp/rvx.out || fail "rc_verify -X $devs: no XRC"
done
./hw_counters -d pvrdma0 -D pvrdma1 -n 20 -s 3000 || fail "hw_counters"
# rdma statistic (netlink) and sysfs agree, counter by counter.
for dev in pvrdma0 pvrdma1; do
    rdma statistic show link "$dev/1" | tr -s ' ' '\n' > /tmp/stat ||
        fail "rdma statistic show link $dev/1"
    n=0
    for f in /sys/class/infiniband/$dev/ports/1/hw_counters/*; do
        name=$(basename "$f")
        [ "$name" = lifespan ] && continue      # not a counter
        v=$(grep -A1 -x "$name" /tmp/stat | tail -n 1)
        [ "$v" = "$(cat "$f")" ] ||
            fail "$dev $name: rdma statistic '$v', sysfs '$(cat "$f")'"
        n=$((n + 1))
    done
    [ "$n" -eq 20 ] || fail "$dev has $n port counters, not 20"
    echo "$dev: $n counters, rdma statistic = sysfs"
done
rdma statistic show link pvrdma0/1
echo GUEST-OK
GUEST
"$PVRDMA_TOP/scripts/vm.sh" --name "$TEST_NAME" --timeout 600 --pvrdma 2 \
    --add "$rc_verify" --add "$hw_counters" --add "$TEST_OUT/guest.sh" -- \
    'sh ./guest.sh' ||
    fail "see $PVRDMA_OUT/vm/$TEST_NAME.log"
log=$PVRDMA_OUT/vm/$TEST_NAME.log
grep -E "^RESULT" "$log" | sed 's/^/  /'
[ "$(grep -c '^RESULT passed=[1-9][0-9]* failed=0' "$log")" -eq 4 ] ||
    fail "expected four clean RESULT lines (RC and XRC, one and two devices)"
[ "$(grep -c '^PASS xrc/srq[01]: REM_INV_REQ_ERR for a [A-Z]* naming an SRQ of another XRC domain' "$log")" -eq 4 ] ||
    fail "XRC: requests naming another domain's SRQ not checked in both runs, see $log"
grep -q "^RESULT passed$" "$log" || fail "hw_counters did not pass, see $log"
[ "$(grep -c "counters, rdma statistic = sysfs" "$log")" -eq 2 ] ||
    fail "rdma statistic and sysfs not compared, see $log"
grep -qx GUEST-OK "$log" || fail "see $log"
pass "user-space opcodes and error statuses verified, RC and XRC (one device, two devices); port counters moved exactly by known traffic, rdma statistic = sysfs"
