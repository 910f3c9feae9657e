#!/usr/bin/env bash
# make demo: boot two guests on one host, their pvrdma devices joined by
# one software fabric (-device pvrdma,fabric-path=DIR), and show RDMA
# between them: ibv_devinfo in guest A, then ibv_rc_pingpong and
# ib_write_bw with A serving and B connecting. The guests' eth0 are
# joined by a QEMU -netdev dgram link (10.9.0.1 and 10.9.0.2), which the
# tools use to exchange QP numbers, as they would on a real network.
. "$(dirname "$0")/../tests/guest/lib.sh"
. "$TESTS_TOP/tests/guest/vmpair.sh"

fdir=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-demo.XXXXXX")
trap 'rm -rf "$fdir"' EXIT
cat > "$TEST_OUT/guest-a.sh" <<'GUEST'
. ./sync.sh
ibv_devinfo -v | head -n 30
rdma link show
xpair_server rc_pingpong 120 "ibv_rc_pingpong -d pvrdma0 -g 1 -n 1000 -c"
xpair_server write_bw 300 "ib_write_bw -d pvrdma0 -x 1 -F -s 1048576 -n 200"
echo GUEST-OK
GUEST
cat > "$TEST_OUT/guest-b.sh" <<'GUEST'
. ./sync.sh
xpair_client rc_pingpong 120 "ibv_rc_pingpong -d pvrdma0 -g 1 -n 1000 -c $PEER_IP"
xpair_client write_bw 300 "ib_write_bw -d pvrdma0 -x 1 -F -s 1048576 -n 200 $PEER_IP"
echo GUEST-OK
GUEST
log "two guests, one fabric in $fdir: each QEMU has"
log "  -device pvrdma,fabric-path=$fdir"
vmpair_run demo 600 "$TEST_OUT/guest-a.sh" "$TEST_OUT/guest-b.sh" \
    --arg -d --arg ",fabric-path=$fdir"
log "RDMA between the two guests:"
grep -hE "iters in|^\[write_bw client\] +[0-9]+ +[0-9]+ " \
    "$PVRDMA_OUT/vm/demo-b.log" | sed 's/^\[[^]]*\] */  /'
