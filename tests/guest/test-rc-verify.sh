#!/usr/bin/env bash
# Our verification program (tests/guest/progs/rc_verify.c) through our
# provider: every user-space RC opcode with patterned data, every byte and
# completion field checked on both sides, and each error status provoked;
# between two QPs of one device, then between two pvrdma devices.
. "$(dirname "$0")/lib.sh"
rc_verify=$(build_prog rc_verify)

"$PVRDMA_TOP/scripts/vm.sh" --name "$TEST_NAME" --timeout 600 --pvrdma 2 \
    --add "$rc_verify" -- \
    './rc_verify -d pvrdma0 && ./rc_verify -d pvrdma0 -D pvrdma1' ||
    fail "see $PVRDMA_OUT/vm/$TEST_NAME.log"
grep -E "^RESULT" "$PVRDMA_OUT/vm/$TEST_NAME.log" | sed 's/^/  /'
[ "$(grep -c '^RESULT passed=[1-9][0-9]* failed=0' "$PVRDMA_OUT/vm/$TEST_NAME.log")" -eq 2 ] ||
    fail "expected two clean RESULT lines"
pass "user-space opcodes and error statuses verified (one device, two devices)"
