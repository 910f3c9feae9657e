#!/usr/bin/env bash
# perftest between two processes of one guest on one pvrdma device: every
# RC latency and bandwidth test, and the UD send tests (-c UD), must finish
# and print its result table.
. "$(dirname "$0")/lib.sh"

cat > "$TEST_OUT/guest.sh" <<'GUEST'
. ./pair.sh
opts="-d pvrdma0 -x 1 -F"
num='[0-9.]+|inf|-?nan'
for t in send_lat write_lat read_lat atomic_lat; do
    pair "ib_$t" 300 "ib_$t $opts -n 200" "ib_$t $opts -n 200 127.0.0.1"
    # A row for all 200 iterations; the times may read inf or nan when
    # perftest's cycle calibration fails under TCG (its clock, not RDMA:
    # an RDMA failure makes it exit non-zero, which pair() rejects).
    grep -qE "^ *[0-9]+ +200 +($num)" "/tmp/ib_$t.cli" ||
        fail "ib_$t printed no result row for 200 iterations"
done
for t in send_bw write_bw read_bw atomic_bw; do
    pair "ib_$t" 300 "ib_$t $opts -n 200" "ib_$t $opts -n 200 127.0.0.1"
    grep -qE "^ *[0-9]+ +200 +($num) +($num)" "/tmp/ib_$t.cli" ||
        fail "ib_$t printed no result row for 200 iterations"
done
for t in send_lat send_bw; do
    pair "ib_${t}_ud" 300 "ib_$t $opts -c UD -n 200" \
        "ib_$t $opts -c UD -n 200 127.0.0.1"
    grep -qE "^ *[0-9]+ +200 +($num) +($num)" "/tmp/ib_${t}_ud.cli" ||
        fail "ib_$t -c UD printed no result row for 200 iterations"
done
echo GUEST-OK
GUEST
"$PVRDMA_TOP/scripts/vm.sh" --name "$TEST_NAME" --timeout 1200 --smp 2 \
    --add "$TESTS_TOP/tests/guest/pair.sh" --add "$TEST_OUT/guest.sh" \
    -- sh ./guest.sh || fail "see $PVRDMA_OUT/vm/$TEST_NAME.log"
grep -A3 "#bytes" "$PVRDMA_OUT/vm/$TEST_NAME.log" | grep -E "client\]" |
    sed 's/^/  /' | head -40
pass "ib_{send,write,read,atomic}_{lat,bw} and ib_send_{lat,bw} -c UD completed with results"
