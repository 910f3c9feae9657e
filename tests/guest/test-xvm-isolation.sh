#!/usr/bin/env bash
# Fabric isolation: two VMs whose devices are on two different fabrics
# (fabric-path=DIR1 and DIR2) see each other on Ethernet but not on RDMA.
# B's ibv_rc_pingpong to A gets the RC "no answer" error, transport retry
# counter exceeded (status 12), and A's server never gets a message
# (test-xvm.sh is the control: the same on one fabric passes).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/vmpair.sh"

work=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-iso.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/f1" "$work/f2"

cat > "$TEST_OUT/guest-a.sh" <<'GUEST'
. ./sync.sh
gid=1
# The server waits for a message that must never come: stopped after 15 s.
listeners > /tmp/srv.before
timeout 15 ibv_rc_pingpong -d pvrdma0 -g $gid -n 5 > /tmp/srv 2>&1 &
spid=$!
wait_listening $spid /tmp/srv.before
sync_signal isolated 120
rc=0
wait $spid || rc=$?
sed 's/^/[server] /' /tmp/srv
grep -q "iters in" /tmp/srv && fail "the server completed a ping-pong across fabrics"
[ $rc -ne 0 ] || fail "the server exited 0"
echo GUEST-OK
GUEST
cat > "$TEST_OUT/guest-b.sh" <<'GUEST'
. ./sync.sh
gid=1
sync_wait "$PEER_IP" isolated 120
rc=0
start=$(date +%s)
timeout 60 ibv_rc_pingpong -d pvrdma0 -g $gid -n 5 "$PEER_IP" > /tmp/cli 2>&1 || rc=$?
end=$(date +%s)
sed 's/^/[client] /' /tmp/cli
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "the client exited with $rc (want an RDMA error)"
grep -qE "status (transport retry counter exceeded|12)" /tmp/cli ||
    fail "the client did not fail with RETRY_EXC_ERR (12)"
echo "client failed after $((end - start)) s, as it must"
echo GUEST-OK
GUEST
vmpair_run "$TEST_NAME" 300 "$TEST_OUT/guest-a.sh" "$TEST_OUT/guest-b.sh" \
    --a-arg -d --a-arg ",fabric-path=$work/f1" \
    --b-arg -d --b-arg ",fabric-path=$work/f2"
pass "two fabrics: RDMA between them fails with RETRY_EXC_ERR, nothing delivered"
