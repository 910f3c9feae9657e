#!/usr/bin/env bash
# UCX (Debian 12's libucx0 and ucx-utils) over the device, two processes
# of one guest: ucx_info opens rc_verbs and ud_verbs on pvrdma0:1, and
# ucx_perftest's UCP tests (tag_lat, tag_bw, ucp_am_lat, ucp_put_bw,
# ucp_get) finish over those two transports only (UCX_TLS), with a result
# line for every iteration count. ucx_perftest does not check data; the
# verbs underneath are verified by test-rc-verify and the ping-pongs.
. "$(dirname "$0")/lib.sh"

cat > "$TEST_OUT/guest.sh" <<'GUEST'
. ./pair.sh
ucx_info -d > /tmp/ucx_info 2>&1 || fail "ucx_info -d failed"
for tl in rc_verbs ud_verbs; do
    awk -v tl="$tl" '/Transport:/ { t = $3 } /Device:/ && t == tl { print $3 }' \
        /tmp/ucx_info | grep -qx "pvrdma0:1" ||
        fail "ucx_info -d shows no $tl on pvrdma0:1"
done
echo "ucx_info: rc_verbs and ud_verbs on pvrdma0:1"
export UCX_NET_DEVICES=pvrdma0:1 UCX_TLS=rc_verbs,ud_verbs
for t in tag_lat tag_bw ucp_am_lat ucp_put_bw ucp_get; do
    pair "ucx_$t" 180 "ucx_perftest -t $t -n 2000" \
        "ucx_perftest 127.0.0.1 -t $t -n 2000"
    grep -qE "^Final: +2000 " "/tmp/ucx_$t.cli" ||
        fail "ucx_perftest -t $t printed no final line for 2000 iterations"
done
pair ucx_tag_bw_64k 180 "ucx_perftest -t tag_bw -s 65536 -n 500" \
    "ucx_perftest 127.0.0.1 -t tag_bw -s 65536 -n 500"
grep -qE "^Final: +500 " /tmp/ucx_tag_bw_64k.cli ||
    fail "ucx_perftest -t tag_bw -s 65536 printed no final line"
echo GUEST-OK
GUEST
"$PVRDMA_TOP/scripts/vm.sh" --name "$TEST_NAME" --timeout 900 --smp 2 \
    --add "$TESTS_TOP/tests/guest/pair.sh" --add "$TEST_OUT/guest.sh" \
    -- sh ./guest.sh || fail "see $PVRDMA_OUT/vm/$TEST_NAME.log"
grep -hE "^\[ucx_[a-z_0-9]+ client\] Final:" "$PVRDMA_OUT/vm/$TEST_NAME.log" |
    sed 's/^/  /'
pass "UCX: rc_verbs and ud_verbs on the device, ucx_perftest UCP tests (one guest)"
