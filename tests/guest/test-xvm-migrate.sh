#!/usr/bin/env bash
# Live migration between VMs (docs/migration.md, "Switchover between
# fabric peers"): VM M and VM P share a fabric directory (one host, shared
# memory links) and an Ethernet link (QEMU's UDP multicast socket netdev
# on the loopback, so that each QEMU M moves to hears it too). While RDMA
# runs between them, the host moves M to a new QEMU four times in a row
# (M1 -> M2 -> ... -> M5, each a new process that joins the fabric
# directory; the old one quits after each move), then takes a snapshot
# of it (savevm) that it goes on from. Running across every switch, all
# checked:
#   - two slow streams of RDMA WRITEs (tests/guest/progs/ev_bw.c -b), P
#     writing into M and M into P, each server checking every block of
#     its buffer for the bytes of its last WRITE (P's writes into M's
#     memory while it was copied must reach M's destination);
#   - NVMe over RDMA: M's kernel host on P's target, connected before the
#     first move, each round writing 1 MiB of fresh data and reading it
#     back uncached;
#   - rounds, M connecting and P serving, until the host says the last
#     move is done, then two more: ibv_rc_pingpong -c (SEND), ib_read_bw
#     (READ), ib_atomic_bw, ibv_srq_pingpong -c, ibv_ud_pingpong -c,
#     rping -V (RDMA CM) and rc_verify (every RC opcode, byte, completion
#     field and error status, P holding the responder side).
# Any error completion, a QP of P's leaving RTS (its tools exit non-zero),
# a byte wrong or a kernel error in either guest fails the test. The
# fabric learns each new location without operator action: the peers
# hold their requests while M moves and send them to M's destination
# once it proves it is where M went (no option, no command on P).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/migrate.sh"

# Variants (test-iothread): PVRDMA_XMIGRATE_MOVES=N moves; with
# PVRDMA_XMIGRATE_LINK=tcp the fabric links are TCP instead (P listens,
# each of M's QEMUs names it as fabric-peer); with netns, as between
# hosts: M's QEMUs run in two network namespaces in turn, each joined to
# P's by its own veth pair (migrate.sh, xmig_setup; needs root).
moves=${PVRDMA_XMIGRATE_MOVES:-4}
link=${PVRDMA_XMIGRATE_LINK:-shm}
d=$TEST_OUT
rm -f "$d"/*.sock
evbw=$(build_prog ev_bw)
rcv=$(build_prog rc_verify)
cat > "$d/guest.sh" <<'GUEST'
. ./sync.sh
. ./nvmeof.sh
ev="./ev_bw -d pvrdma0 -g 1 -s 4096 -t 64 -b 8192 -n 1"
# M tells P the next round (or "stop") over TCP port 7600.
tell_peer() { until nc -l -p 7600 -w 300 -e echo "$1"; do sleep 0.2; done; }
ask_peer() {
    w=
    until w=$(nc "$PEER_IP" 7600 < /dev/null 2> /dev/null) && [ -n "$w" ]; do
        sleep 0.3
    done
    echo "$w"
}
# xtool NAME TIMEOUT CMD PORT [CLIENT-ONLY ARGS]: P serves CMD, M connects.
xtool() {
    if [ "$ROLE" = p ]; then
        xpair_server "$1" "$2" "$3"
    else
        xpair_client "$1" "$2" "$3 $PEER_IP"
    fi
}
round() {
    p=$((18600 + $1 % 100 * 10))
    xtool "pp$1" 300 "ibv_rc_pingpong -d pvrdma0 -g 1 -s 4096 -n 200 -c -p $p"
    xtool "rd$1" 300 "ib_read_bw -d pvrdma0 -x 1 -F -s 65536 -n 200 -p $((p + 1))"
    xtool "at$1" 300 "ib_atomic_bw -d pvrdma0 -x 1 -F -n 200 -p $((p + 2))"
    xtool "srq$1" 300 "ibv_srq_pingpong -d pvrdma0 -g 1 -n 50 -c -p $((p + 3))"
    xtool "ud$1" 300 "ibv_ud_pingpong -d pvrdma0 -g 1 -n 100 -c -p $((p + 4))"
    if [ "$ROLE" = p ]; then
        xpair_server "rp$1" 300 "rping -s -a 0.0.0.0 -C 20 -V -p $((p + 5))"
        xpair_server "rv$1" 300 "./rc_verify -s"
    else
        xpair_client "rp$1" 300 "rping -c -C 20 -V -v -p $((p + 5)) -a $PEER_IP"
        grep -q "rdma-ping-19: " "/tmp/rp$1.cli" || fail "rping: 20 pings not seen"
        # Every RC opcode, byte and completion field, P holding the
        # responder side (as test-xvm-rc-verify.sh).
        xpair_client "rv$1" 300 "./rc_verify -d pvrdma0 -g 1 -G 1 -P -c $PEER_IP"
        grep -q '^RESULT passed=[1-9][0-9]* failed=0' "/tmp/rv$1.cli" ||
            fail "rc_verify across the VMs failed"
    fi
}
dmesg_mark
if [ "$ROLE" = m ]; then
    # The host tells M over its second NIC once it runs on the last QEMU.
    ip addr add 10.0.2.15/24 dev eth1 && ip link set eth1 up ||
        fail "eth1 (the host's channel)"
    (nc -l -p 7000 > /tmp/go 2> /dev/null; touch /tmp/go.seen) &
    listeners > /tmp/ev1.before
    $ev -p 18531 > /tmp/ev1.s 2>&1 &
    e1s=$!
    wait_listening $e1s /tmp/ev1.before
    sync_signal ev1 300
    sync_wait "$PEER_IP" ev2 120
    $ev -p 18532 -w 1000 -f /tmp/go.seen "$PEER_IP" > /tmp/ev2.c 2>&1 &
    e2c=$!
    sync_wait "$PEER_IP" nvme-up 120
    nvmeof_connect "$PEER_IP"
    nvme=$NVME_DEV
    echo MIGRATE-NOW
    r=0
    while ! [ -s /tmp/go ]; do
        r=$((r + 1))
        tell_peer $r
        round $r
        nvme_io $nvme $r || fail "NVMe I/O round $r"
        echo "round $r ok"
    done
    echo "moved after $r rounds"
    for r in 1000 1001; do
        tell_peer $r
        round $r
        nvme_io $nvme $r || fail "NVMe I/O round $r"
    done
    tell_peer stop
    echo 1 > /sys/class/nvme/$nvme/delete_controller || fail "NVMe disconnect"
    sync_signal nvme-down 120
    wait $e2c || { cat /tmp/ev2.c; fail "the WRITE stream into P"; }
    wait $e1s || { cat /tmp/ev1.s; fail "the WRITE stream into M (its check)"; }
    sed 's/^/[into P] /' /tmp/ev2.c
    dmesg_clean
    sync_signal end 120
    echo MIGRATE-OK
else
    sync_wait "$PEER_IP" ev1 300
    $ev -p 18531 -w 1000 -f /tmp/stop "$PEER_IP" > /tmp/ev1.c 2>&1 &
    e1c=$!
    listeners > /tmp/ev2.before
    $ev -p 18532 > /tmp/ev2.s 2>&1 &
    e2s=$!
    wait_listening $e2s /tmp/ev2.before
    sync_signal ev2 120
    nvmeof_target "$SELF_IP" > /dev/null
    sync_signal nvme-up 120
    while w=$(ask_peer) && [ "$w" != stop ]; do
        round "$w"
    done
    touch /tmp/stop
    sync_wait "$PEER_IP" nvme-down 300
    nvmeof_target_down > /dev/null
    wait $e1c || { cat /tmp/ev1.c; fail "the WRITE stream into M"; }
    wait $e2s || { cat /tmp/ev2.s; fail "the WRITE stream into P (its check)"; }
    sed 's/^/[into M] /' /tmp/ev1.c
    dmesg_clean
    sync_wait "$PEER_IP" end 120
    echo PEER-OK
fi
GUEST

xmig_setup "$link" "$evbw" "$rcv" "$d/guest.sh" "$TESTS_TOP/tests/guest/sync.sh" \
    "$TESTS_TOP/tests/guest/pair.sh" "$TESTS_TOP/tests/guest/nvmeof.sh"

xmig_start_p
ppid=$pid
hport=$(free_port)
xmig_start_m m1 "$hport"
mpid=$pid
xmig_seen m1 '^MIGRATE-NOW' 1
xmig_seen m1 '^round 1 ok' 1
cur=m1
rm -f "$d/snap.qcow2"
qemu-img create -q -f qcow2 "$d/snap.qcow2" 64M ||
    fail "qemu-img create failed (scripts/install-deps.sh installs qemu-utils)"
for i in $(seq 2 $((moves + 1))); do
    next=m$i
    hport=$(free_port)
    snap=()
    # (the last QEMU keeps a qcow2 image for the snapshot below)
    [ "$i" = $((moves + 1)) ] &&
        snap=(-q -drive -q "if=none,id=snap,file=$d/snap.qcow2,format=qcow2")
    xmig_start_m "$next" "$hport" -q -incoming -q "unix:$d/mig-$next.sock" \
        "${snap[@]}"
    npid=$pid
    qmp "$d/qmp-$cur.sock" migrate "{\"uri\": \"unix:$d/mig-$next.sock\"}" > /dev/null
    st=$(migrate_wait "$cur")
    [ "$st" = completed ] ||
        fail "move $((i - 1)) ($cur -> $next): $st (logs: $d/$cur.err, $d/$next.err)"
    log "move $((i - 1)): $cur -> $next, $(migrate_info "$cur")"
    qmp "$d/qmp-$cur.sock" quit > /dev/null || true
    wait "$mpid" || true
    mpid=$npid cur=$next
    # RDMA ran on the new QEMU (two pairs of tools) before the next move.
    xmig_seen "$cur" '^sync: ' 4
done
# A snapshot with the RDMA running: the peer holds while it is taken,
# then goes on with the same QEMU (two more pairs of tools after it).
n=$(grep -c '^sync: ' "$PVRDMA_OUT/vm/xmig-$cur.log")
out=$(qmp "$d/qmp-$cur.sock" human-monitor-command \
      '{"command-line": "savevm xmig"}')
[ "$out" = '""' ] || fail "savevm: $out"
qmp "$d/qmp-$cur.sock" query-status | grep -q '"running"' ||
    fail "the VM did not go on after savevm"
xmig_seen "$cur" '^sync: ' $((n + 4))
log "snapshot taken on $cur with the RDMA running; it went on"
xmig_tell "$hport"
rc=0
wait "$mpid" || rc=$?
mlog=$PVRDMA_OUT/vm/xmig-$cur.log plog=$PVRDMA_OUT/vm/xmig-p.log
[ $rc = 0 ] || fail "guest M failed after the moves (status $rc; log: $mlog)"
grep -q '^MIGRATE-OK' "$mlog" || fail "no MIGRATE-OK in $mlog"
rc=0
wait "$ppid" || rc=$?
[ $rc = 0 ] || fail "guest P failed (status $rc; log: $plog)"
grep -q '^PEER-OK' "$plog" || fail "no PEER-OK in $plog"
for f in "$mlog" "$plog"; do
    grep -E '^\[into (P|M)\] ev_bw: WRITE' "$f" || fail "no stream result in $f"
done
rounds=$(sed -n 's/^moved after \([0-9]*\) rounds$/\1/p' "$mlog")
trap - EXIT
xmig_cleanup
where="QEMUs of one fabric directory"
[ "$link" = tcp ] && where="QEMUs linked to P's by TCP"
[ "$link" = netns ] && where="QEMUs in two network namespaces in turn, linked to P's by TCP over veth pairs"
pass "VM M moved $moves times between $where, then snapshotted with savevm, while RDMA ran with VM P ($rounds rounds): WRITE streams both ways with every block checked, NVMe over RDMA I/O read back, ibv_rc/srq/ud_pingpong -c, ib_read_bw, ib_atomic_bw, rping -V and rc_verify (every RC opcode); no error on either side"
