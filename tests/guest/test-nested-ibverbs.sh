#!/usr/bin/env bash
# Nested QEMU with the host verbs backend: a test guest (the "host")
# makes Soft-RoCE rxe0 on its eth0 and runs our QEMU with
# -device pvrdma,backend=ibverbs,ibdev=rxe0 for an inner guest, whose
# RDMA then goes through rxe0 to a native program of the outer guest:
# ibv_rc_pingpong (data checked, -c) and ib_write_bw (64 KiB, 1 MiB)
# between the inner guest's pvrdma0 and the outer's rxe0. The inner guest's address is also given to the
# outer eth0, so that rxe0 owns its GID (docs/ibverbs.md).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nested.sh"

cat > "$TEST_OUT/inner-cmd.sh" <<'INNER'
# The guest kernel resolves a route to the peer's address before it
# modifies a RoCE QP: 10.0.2.15 is behind the user-mode NIC's gateway.
ip route add default via 10.0.3.1
ibv_devinfo -d pvrdma0 | grep -E "state|active_mtu"
ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c 10.0.3.1 || exit 1
ib_write_bw -d pvrdma0 -x 1 -F -n 200 -p 18516 10.0.3.1 || exit 1
ib_write_bw -d pvrdma0 -x 1 -F -n 50 -s 1048576 -p 18517 10.0.3.1
INNER
nested_bundle "$TEST_OUT/nested" "sh ./inner-cmd.sh" "$TEST_OUT/inner-cmd.sh"
cat > "$TEST_OUT/guest.sh" <<'GUEST'
. ./pair.sh
. ./rxe.sh
. ./inner.sh
rxe_up
ip addr add 10.0.3.2/24 dev eth0
idx=$(rxe_gid_index 10.0.2.15)
for i in 1 2 3 4 5 6 7 8 9 10; do
    [ -n "$(rxe_gid_index 10.0.3.2)" ] && break
    sleep 0.5
done
[ -n "$(rxe_gid_index 10.0.3.2)" ] || fail "rxe0 has no GID for 10.0.3.2"
echo "rxe0: 10.0.2.15 at GID index $idx, 10.0.3.2 at $(rxe_gid_index 10.0.3.2)"
# The native ends serve; the inner guest connects to them (as 10.0.3.1).
timeout 900 ibv_rc_pingpong -d rxe0 -g "$idx" -n 200 -c > /tmp/native.out 2>&1 &
native=$!
timeout 900 ib_write_bw -d rxe0 -x "$idx" -F -n 200 -p 18516 > /tmp/bw.out 2>&1 &
bw=$!
timeout 900 ib_write_bw -d rxe0 -x "$idx" -F -n 50 -s 1048576 -p 18517 \
    > /tmp/bw1m.out 2>&1 &
bw1m=$!
INNER_QEMU_ARGS="-d guest_errors" inner_run inner 10.0.3.2 512 900 ||
    fail "the inner guest failed"
wait $native || { cat /tmp/native.out; fail "native ibv_rc_pingpong failed"; }
sed 's/^/[native] /' /tmp/native.out
wait $bw && wait $bw1m ||
    { cat /tmp/bw.out /tmp/bw1m.out; fail "native ib_write_bw failed"; }
sed 's/^/[native] /' /tmp/bw.out /tmp/bw1m.out
grep -qE "^ *65536 +200 " /tmp/bw.out && grep -qE "^ *1048576 +50 " /tmp/bw1m.out ||
    fail "ib_write_bw printed no result rows"
echo GUEST-OK
GUEST
"$PVRDMA_TOP/scripts/vm.sh" --name "$TEST_NAME" --timeout 1200 --smp 2 \
    --mem 2048 --add "$TESTS_TOP/tests/guest/pair.sh" "${NESTED_ADDS[@]}" \
    --add "$TEST_OUT/guest.sh" -- sh ./guest.sh ||
    fail "see $PVRDMA_OUT/vm/$TEST_NAME.log"
grep -hE "^\[inner\] (.*iters in|  *(65536|1048576) )|^\[native\] .*iters in" \
    "$PVRDMA_OUT/vm/$TEST_NAME.log" | sed 's/^/  /'
pass "inner guest on backend=ibverbs (rxe0) <-> native ibv_rc_pingpong and ib_write_bw in the outer guest"
