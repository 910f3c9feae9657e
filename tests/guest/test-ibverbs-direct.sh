#!/usr/bin/env bash
# The host verbs backend (backend=ibverbs, hw/pvrdma/pvrdma_ibverbs.c)
# driven directly by tests/ibverbs/test_ibv_direct.c: two fake guests'
# device cores, each on its own backend over the same host RDMA device,
# here Soft-RoCE on a test guest's eth0 (the build machines have no RDMA
# device of their own). RC SEND with scatter/gather, RDMA WRITE with
# immediate and READ back, both atomics, a wrong rkey (REM_ACCESS_ERR,
# then a flush), a stream of SENDs: every byte and completion field
# checked; the guest MRs are registered zero-copy over non-contiguous
# pages.  UD datagrams (GRH, source QPN, lost on a wrong Q_Key); an SRQ
# shared by two QPs and its limit event; a registration the host refuses
# (locked-memory limit) fails the guest's command and nothing else.  A
# 1 GiB guest MR is registered (contiguous and scattered pages) and timed
# next to a native ibv_reg_mr of 1 GiB, then used.  RDMA CM: the guests'
# CM MADs (REQ, REP, RTU, DREQ) carried out by the host's RDMA CM, the QPs
# then talk both ways (PSNs right); refusals and hostile MADs; UD
# services (SIDR) both ways, a datagram to the resolved QP checked. UD
# multicast: a QP attached to a group on the host (the backend joins the
# IP group on the host interface, as RDMA CM does) gets a datagram to it,
# bytes checked, and none after it left.
. "$(dirname "$0")/lib.sh"

make -s -C "$TESTS_TOP/tests/ibverbs" BUILD="$TEST_OUT" \
    STAGE="$(readlink -f "$PVRDMA_OUT/rdma-core")" >&2 ||
    fail "cannot build tests/ibverbs"
cat > "$TEST_OUT/guest.sh" <<'GUEST'
. ./pair.sh
. ./rxe.sh
rxe_up
idx=$(rxe_gid_index)
echo "rxe0: port ACTIVE, RoCE v2 GID of eth0 at index $idx"
# The RDMA CM test's two guests have addresses of their own on eth0.
ip addr add 10.0.2.61/24 dev eth0
ip addr add 10.0.2.62/24 dev eth0
for i in $(seq 20); do
    [ -n "$(rxe_gid_index 10.0.2.62)" ] && [ -n "$(rxe_gid_index 10.0.2.61)" ] &&
        break
    sleep 0.5
done
./test_ibv_direct rxe0 "$idx" 10.0.2.61 10.0.2.62 || fail "test_ibv_direct failed"
echo GUEST-OK
GUEST
# No pvrdma device in this guest: rxe0 is the only RDMA device on eth0, so
# the host RDMA CM of the CM test cannot pick another one.
"$PVRDMA_TOP/scripts/vm.sh" --name "$TEST_NAME" --timeout 600 --smp 2 --mem 3072 \
    --pvrdma 0 \
    --add "$TESTS_TOP/tests/guest/pair.sh" --add "$TESTS_TOP/tests/guest/rxe.sh" \
    --add "$TEST_OUT/test_ibv_direct" --add "$TEST_OUT/guest.sh" \
    -- sh ./guest.sh || fail "see $PVRDMA_OUT/vm/$TEST_NAME.log"
grep -E "^\[  PASSED  \] 17 test" "$PVRDMA_OUT/vm/$TEST_NAME.log" >/dev/null ||
    fail "not all backend tests passed (log $PVRDMA_OUT/vm/$TEST_NAME.log)"
grep -h "^REG-1GIB" "$PVRDMA_OUT/vm/$TEST_NAME.log" | sed 's/^/  /'
pass "host verbs backend on Soft-RoCE: RC send/write-imm/read/atomics/errors, UD, SRQ with limit event, DMA MRs, host refusal (memlock), limits clamped, zero-copy MRs up to 1 GiB, RDMA CM (connect, data, disconnect, refusals, hostile MADs, SIDR), UC, memory windows, requests pipelined per QP, UD multicast (the host interface joining the group)"
