#!/usr/bin/env bash
# Two VMs on one host, one fabric (fabric-path): rdma-core's ping-pongs
# with guest A as the server and guest B as the client.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/vmpair.sh"

fdir=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-fab.XXXXXX")
trap 'rm -rf "$fdir"' EXIT

cat > "$TEST_OUT/guest-a.sh" <<'GUEST'
. ./sync.sh
gid=1
xpair_server rc_pingpong 120 "ibv_rc_pingpong -d pvrdma0 -g $gid -n 200 -c"
echo GUEST-OK
GUEST
cat > "$TEST_OUT/guest-b.sh" <<'GUEST'
. ./sync.sh
gid=1
xpair_client rc_pingpong 120 "ibv_rc_pingpong -d pvrdma0 -g $gid -n 200 -c $PEER_IP"
echo GUEST-OK
GUEST
vmpair_run "$TEST_NAME" 300 "$TEST_OUT/guest-a.sh" "$TEST_OUT/guest-b.sh" \
    --arg -d --arg ",fabric-path=$fdir"
pass "ibv_rc_pingpong between two VMs"
