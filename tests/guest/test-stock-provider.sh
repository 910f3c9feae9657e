#!/usr/bin/env bash
# ABI check: rdma-core's stock vmw_pvrdma provider instead of ours, against
# our kernel module and device: ibv_rc_pingpong and ib_write_bw must pass,
# and the processes must really have loaded libvmw_pvrdma.
. "$(dirname "$0")/lib.sh"

cat > "$TEST_OUT/guest.sh" <<'GUEST'
. ./pair.sh
. ./stock.sh
stock_provider pvrdma0 1
pair rc_pingpong 120 "ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c" \
    "ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c 127.0.0.1"
pair ib_write_bw 300 "ib_write_bw -d pvrdma0 -x 1 -F -n 200" \
    "ib_write_bw -d pvrdma0 -x 1 -F -n 200 127.0.0.1"
grep -qE "^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+" /tmp/ib_write_bw.cli ||
    fail "ib_write_bw printed no result row"
echo GUEST-OK
GUEST
"$PVRDMA_TOP/scripts/vm.sh" --name "$TEST_NAME" --timeout 600 --smp 2 \
    --add "$TESTS_TOP/tests/guest/pair.sh" \
    --add "$TESTS_TOP/tests/guest/stock.sh" --add "$TEST_OUT/guest.sh" \
    -- sh ./guest.sh || fail "see $PVRDMA_OUT/vm/$TEST_NAME.log"
# (A live migration with the stock provider's processes running is
# test-stock-driver.sh's: the upstream driver and this provider, as other
# distributions' guests run them.)
pass "stock vmw_pvrdma provider: ibv_rc_pingpong and ib_write_bw"
