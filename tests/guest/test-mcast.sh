#!/usr/bin/env bash
# Multicast on UD QPs (a project extension: PVRDMA_EX_CAP_MCAST) with
# RDMA CM's mckey, which joins a group on RoCE (rdma_join_multicast: an
# IGMP join on eth0, then ibv_attach_mcast of its UD QP) and sends to it
# or counts what comes: in two VMs on one fabric, a receiver in each and
# a sender in B, 20 messages of 1000 bytes each; B's receiver gets them
# from a process of its own VM, A's over the fabric link. Each receiver
# must report all 20 ("data transfers complete") and its group must show
# in /proc/net/igmp. First, in B, the device reports its multicast limits
# (ibv_devinfo -v: max_mcast_grp 64, max_mcast_qp_attach 16). The data
# itself is checked by verbs_ex's multicast check and the unit tests.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/vmpair.sh"

cat > "$TEST_OUT/guest-a.sh" <<'GUEST'
. ./sync.sh
grp=239.7.8.9
gone() { ! kill -0 "$1" 2>/dev/null; }
mckey -m $grp -b "$SELF_IP" -C 20 -S 1000 > /tmp/rcv 2>&1 &
rpid=$!
wait_for 60 grep -q "mckey: joined dgid" /tmp/rcv ||
    { cat /tmp/rcv; fail "A's receiver did not join $grp"; }
grep -q "090807EF" /proc/net/igmp || fail "A: $grp not joined on eth0 (/proc/net/igmp)"
sync_signal a-joined 120
rc=0
wait_for 120 gone $rpid || kill $rpid
wait $rpid || rc=$?
sed 's/^/[A receiver] /' /tmp/rcv
[ $rc -eq 0 ] && grep -q "data transfers complete" /tmp/rcv ||
    fail "A's receiver: not all 20 messages (exit $rc)"
sync_signal a-done 120
echo GUEST-OK
GUEST
cat > "$TEST_OUT/guest-b.sh" <<'GUEST'
. ./sync.sh
grp=239.7.8.9
ibv_devinfo -v -d pvrdma0 > /tmp/devinfo
grep -E "max_mcast_grp|max_mcast_qp_attach|max_total_mcast" /tmp/devinfo
grep -qE "max_mcast_grp:[[:space:]]+64$" /tmp/devinfo &&
    grep -qE "max_mcast_qp_attach:[[:space:]]+16$" /tmp/devinfo ||
    fail "ibv_devinfo: not the device's multicast limits"
mckey -m $grp -b "$SELF_IP" -C 20 -S 1000 > /tmp/rcv 2>&1 &
rpid=$!
wait_for 60 grep -q "mckey: joined dgid" /tmp/rcv ||
    { cat /tmp/rcv; fail "B's receiver did not join $grp"; }
sync_wait "$PEER_IP" a-joined 120
timeout 120 mckey -m $grp -b "$SELF_IP" -s -C 20 -S 1000 > /tmp/snd 2>&1 ||
    { cat /tmp/snd; fail "the sender failed"; }
sed 's/^/[B sender] /' /tmp/snd
grep -q "data transfers complete" /tmp/snd || fail "the sender did not finish"
rc=0
wait_for 120 gone $rpid || kill $rpid
wait $rpid || rc=$?
sed 's/^/[B receiver] /' /tmp/rcv
[ $rc -eq 0 ] && grep -q "data transfers complete" /tmp/rcv ||
    fail "B's receiver: not all 20 messages (exit $rc)"
sync_wait "$PEER_IP" a-done 120
echo GUEST-OK
GUEST
vmpair_run "$TEST_NAME" 300 "$TEST_OUT/guest-a.sh" "$TEST_OUT/guest-b.sh"
pass "mckey: 20 datagrams to a group from B reached a receiver in B and one in A (over the fabric); the device's multicast limits in ibv_devinfo"
