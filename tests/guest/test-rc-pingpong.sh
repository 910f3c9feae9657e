#!/usr/bin/env bash
# rdma-core's ping-pong examples between two processes of one guest on one
# pvrdma device: ibv_rc_pingpong (polling and with completion events, -e),
# ibv_srq_pingpong, ibv_ud_pingpong (polling, and events with one-MTU
# datagrams); each checks its own data (-c).
. "$(dirname "$0")/lib.sh"

cat > "$TEST_OUT/guest.sh" <<'GUEST'
. ./pair.sh
gid=1   # ::ffff:10.0.2.15, a RoCE v2 GID
pair rc_pingpong 120 "ibv_rc_pingpong -d pvrdma0 -g $gid -n 200 -c" \
    "ibv_rc_pingpong -d pvrdma0 -g $gid -n 200 -c 127.0.0.1"
pair rc_pingpong_events 120 "ibv_rc_pingpong -d pvrdma0 -g $gid -n 200 -c -e" \
    "ibv_rc_pingpong -d pvrdma0 -g $gid -n 200 -c -e 127.0.0.1"
pair rc_pingpong_big 120 "ibv_rc_pingpong -d pvrdma0 -g $gid -n 50 -s 65536 -c" \
    "ibv_rc_pingpong -d pvrdma0 -g $gid -n 50 -s 65536 -c 127.0.0.1"
pair srq_pingpong 120 "ibv_srq_pingpong -d pvrdma0 -g $gid -n 100 -c" \
    "ibv_srq_pingpong -d pvrdma0 -g $gid -n 100 -c 127.0.0.1"
# The port's MTU follows eth0's: 9000 gives 4096, the device's largest.
ip link set eth0 mtu 9000
pair ud_pingpong 120 "ibv_ud_pingpong -d pvrdma0 -g $gid -n 200 -c" \
    "ibv_ud_pingpong -d pvrdma0 -g $gid -n 200 -c 127.0.0.1"
pair ud_pingpong_mtu 120 \
    "ibv_ud_pingpong -d pvrdma0 -g $gid -n 100 -s 4096 -c -e" \
    "ibv_ud_pingpong -d pvrdma0 -g $gid -n 100 -s 4096 -c -e 127.0.0.1"
echo GUEST-OK
GUEST
"$PVRDMA_TOP/scripts/vm.sh" --name "$TEST_NAME" --timeout 600 --smp 2 \
    --add "$TESTS_TOP/tests/guest/pair.sh" --add "$TEST_OUT/guest.sh" \
    -- sh ./guest.sh || fail "see $PVRDMA_OUT/vm/$TEST_NAME.log"
grep -h "iters in" "$PVRDMA_OUT/vm/$TEST_NAME.log" | sed 's/^/  measured: /'
pass "ibv_rc_pingpong (poll, events, 64 KiB), ibv_srq_pingpong, ibv_ud_pingpong (poll, events at the MTU)"
