#!/usr/bin/env bash
# RDMA CM within one guest (connection setup through QP1 MADs and UD):
# a rejected connection, an unresolvable address and an address whose
# host answers ARP but has no RDMA (QEMU's user-net gateway: the CM's REQ
# goes unanswered) end in the CM errors rxe gives; 600 hostile datagrams at QP1 (tests/guest/progs/
# mad_garbage.c) change nothing; then rping with data verification (-V), ucmatose, udaddy, rdma_server /
# rdma_client, perftest with -R (ib_send_lat, ib_write_bw); then a kernel
# user: NVMe over RDMA, target (nvmet-rdma, a RAM disk) and host
# (nvme-rdma) in the same guest, 4 MiB written and read back, compared
# with the source and with the target's RAM disk, then disconnect and
# target teardown with no NVMe/RDMA error in the kernel log; NFS over
# RDMA, nfsd and the NFSv4.2 client (tests/guest/nfs.sh), 16 MiB written,
# read back after a remount, compared on both sides. Last, the
# port follows eth0: active MTU from its MTU, GIDs from its addresses,
# PORT_DOWN with the link down (PORT_ERR / PORT_ACTIVE async events).
. "$(dirname "$0")/lib.sh"
mad_garbage=$(build_prog mad_garbage)

cat > "$TEST_OUT/guest.sh" <<'GUEST'
. ./pair.sh
. ./nvmeof.sh
. ./nfs.sh
ip=10.0.2.15
num='[0-9.]+|inf|-?nan'
# 10.0.2.2 answers ARP but no CM: the REQ is retried until the CM gives up
# (UNREACHABLE, ETIMEDOUT, about 100 s); in the background meanwhile.
timeout 300 rping -c -a 10.0.2.2 -p 7999 -C 1 -v > /tmp/cm_timeout 2>&1 &
cm_timeout=$!
# A port nobody listens on: the CM's REQ is rejected; an address nobody
# has: address resolution fails. Both end with an error, not a hang.
for t in "reject 7999 $ip RDMA_CM_EVENT_REJECTED" \
         "unreachable 7174 10.0.2.99 RDMA_CM_EVENT_ADDR_ERROR"; do
    set -- $t
    rc=0
    timeout 120 rping -c -a "$3" -p "$2" -C 1 -v > /tmp/cm_$1 2>&1 || rc=$?
    cat /tmp/cm_$1
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] ||
        fail "rping to $3:$2: exit status $rc, expected a CM error"
    grep -q "$4" /tmp/cm_$1 || fail "rping to $3:$2: no $4"
    echo "=== rping $1: $4"
done
# Hostile datagrams at QP1 (random bytes, some with a CM MAD header; half
# with QP1's Q_Key): all sent, and the CM below still works.
./mad_garbage pvrdma0 1 300 7 || fail "mad_garbage failed"
pair rping 120 "rping -s -a $ip -C 20 -V" "rping -c -a $ip -C 20 -V -v"
grep -q "rdma-ping-19: " /tmp/rping.cli || fail "rping: 20 pings not seen"
pair ucmatose 120 "ucmatose -b $ip" "ucmatose -s $ip -b $ip"
pair udaddy 120 "udaddy -b $ip" "udaddy -s $ip -b $ip"
pair rdma_server 120 "rdma_server -s $ip" "rdma_client -s $ip"
AGAIN_RE=$CM_RACE_RE     # (pair.sh: perftest's own race)
pair send_lat_R 300 "ib_send_lat -d pvrdma0 -R -n 200" \
    "ib_send_lat -d pvrdma0 -R -n 200 $ip"
grep -qE "^ *[0-9]+ +200 +($num)" /tmp/send_lat_R.cli ||
    fail "ib_send_lat -R printed no result row"
pair write_bw_R 300 "ib_write_bw -d pvrdma0 -R -n 200" \
    "ib_write_bw -d pvrdma0 -R -n 200 $ip"
grep -qE "^ *[0-9]+ +200 +($num) +($num)" /tmp/write_bw_R.cli ||
    fail "ib_write_bw -R printed no result row"
AGAIN_RE=
echo "=== NVMe over RDMA"
dmesg_mark
nvmeof_target $ip
nvmeof_host $ip
dd if=/dev/ram0 of=/tmp/ram bs=65536 count=64 2>/dev/null
cmp /tmp/nvme.data /tmp/ram || fail "the target's RAM disk does not hold the data"
nvmeof_target_down
dmesg_clean
echo "=== NFS over RDMA"
dmesg_mark
nfs_server $ip
nfs_client $ip
[ "$(nfs_server_md5)" = "$(md5sum < /tmp/nfs.data | cut -c1-32)" ] ||
    fail "the exported file does not hold the data the client wrote"
nfs_server_down
dmesg_clean
rc=0
wait $cm_timeout || rc=$?
cat /tmp/cm_timeout
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 143 ] ||
    fail "rping to 10.0.2.2: exit status $rc, expected a CM error"
grep -q "RDMA_CM_EVENT_UNREACHABLE, error -110" /tmp/cm_timeout ||
    fail "rping to 10.0.2.2 (no RDMA): no UNREACHABLE/ETIMEDOUT"
echo "=== rping timeout: RDMA_CM_EVENT_UNREACHABLE"
if dmesg | grep -E "BUG|Oops|WARNING: |Call Trace"; then
    fail "kernel errors (above)"
fi
echo "=== the port follows eth0"
state() {
    ibv_devinfo -d pvrdma0 | sed -n 's/^[[:space:]]*state:[[:space:]]*\(PORT_[A-Z]*\).*/\1/p'
}
mtu() {
    ibv_devinfo -d pvrdma0 | sed -n 's/^[[:space:]]*active_mtu:[[:space:]]*\([0-9]*\).*/\1/p'
}
gid_of() { # the port's GID table holds ::ffff:$1
    cat /sys/class/infiniband/pvrdma0/ports/1/gids/* 2>/dev/null |
        grep -q "0000:0000:0000:0000:0000:ffff:$1"
}
is_state() { [ "$(state)" = "$1" ]; }
is_mtu() { [ "$(mtu)" = "$1" ]; }
# Its console output is line-buffered: the host checks the events. It
# gets them once it has its async event file (an anonymous inode).
ibv_asyncwatch -d pvrdma0 &
watch=$!
watching() { ls -l /proc/$watch/fd 2>/dev/null | grep -q infinibandevent; }
wait_for 30 watching || fail "ibv_asyncwatch has no async event file after 30 s"
# The port follows eth0 through netdev events the driver handles a
# little later: each state is waited for (30 s at most).
wait_for 30 is_state PORT_ACTIVE || fail "port not active with eth0 up"
wait_for 30 is_mtu 1024 || fail "active_mtu $(mtu) with eth0 MTU 1500, not 1024"
ip link set eth0 mtu 9000
wait_for 30 is_mtu 4096 || fail "active_mtu $(mtu) with eth0 MTU 9000, not 4096"
ip addr add 10.0.3.5/24 dev eth0
wait_for 30 gid_of 0a00:0305 || fail "no GID for 10.0.3.5 after adding the address"
ip addr del 10.0.3.5/24 dev eth0
wait_for 30 not gid_of 0a00:0305 || fail "the GID of 10.0.3.5 stayed after deleting it"
ip link set eth0 down
wait_for 30 is_state PORT_DOWN || fail "port $(state) with eth0 down"
ip link set eth0 up
wait_for 30 is_state PORT_ACTIVE || fail "port $(state) after eth0 came back"
wait_for 30 gid_of 0a00:020f || fail "no GID for 10.0.2.15 after eth0 came back"
kill $watch
echo "port: ACTIVE, MTU 1024/4096 with eth0 MTU 1500/9000, GIDs follow addresses, DOWN and back"
echo GUEST-OK
GUEST
"$PVRDMA_TOP/scripts/vm.sh" --name "$TEST_NAME" --timeout 900 --smp 2 \
    --add "$TESTS_TOP/tests/guest/pair.sh" \
    --add "$TESTS_TOP/tests/guest/nvmeof.sh" \
    --add "$TESTS_TOP/tests/guest/nfs.sh" --add "$mad_garbage" \
    --add "$TEST_OUT/guest.sh" \
    -- sh ./guest.sh || fail "see $PVRDMA_OUT/vm/$TEST_NAME.log"
log=$PVRDMA_OUT/vm/$TEST_NAME.log
for ev in IBV_EVENT_PORT_ERR IBV_EVENT_PORT_ACTIVE; do
    sed -n '/^=== the port follows eth0/,$p' "$log" |
        grep -q "event_type $ev (.*), port 1" ||
        fail "no $ev async event when eth0 went down and up (log $log)"
done
grep -hE "nvme-rdma: 4 MiB|nfs-rdma: 16 MiB|usec/iter|^\[send_lat_R client\] +2 |^port: " \
    "$log" | sed 's/^/  /'
pass "CM rejection, timeout and address errors, rping -V, ucmatose, udaddy, rdma_server/client, perftest -R, NVMe and NFS over RDMA, CM timeout, the port following eth0 (one guest)"
