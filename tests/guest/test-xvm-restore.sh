#!/usr/bin/env bash
# A snapshot restored after its peers moved on (docs/migration.md,
# "Snapshots restored after the peers moved on"). VM M and VM P share a
# fabric directory; two RC QPs, X and Y, connect a process of M to one
# of P (tests/guest/progs/parted.c) and exchange a SEND each way. The
# host takes a snapshot of M (savevm) and M goes on: another exchange on
# X and Y, so P's QPs hear from M's run after the snapshot. M's QEMU
# then quits, and a new QEMU restores the snapshot (-loadvm), or M's own
# QEMU goes back to it (loadvm): M's process is back where it was at the
# snapshot, its QPs in RTS, while P went on.
# Checked, in the guests:
#   - X, M sends first: its SEND completes with RETRY_EXC_ERR, its QP is
#     in ERR with IBV_EVENT_QP_FATAL; P did not take the SEND (P's
#     receive is flushed when its own SEND then fails, never completed);
#   - Y, P sends first: P's SEND completes with RETRY_EXC_ERR and
#     QP_FATAL; M's QP goes to ERR with QP_FATAL, its receive flushed;
#   - after that, UD (ibv_ud_pingpong) and a new RC connection
#     (ibv_rc_pingpong) between the restored M and P work, data checked.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/migrate.sh"

# Twice: M restored in a new QEMU (-loadvm: a new process joins the
# fabric), then with `loadvm` in its own QEMU (its fabric links stay up;
# its device is reset and loaded under them). PVRDMA_RESTORE_MODES
# picks ("new", "inplace").
modes=${PVRDMA_RESTORE_MODES:-new inplace}
d=$TEST_OUT
rm -f "$d"/*.sock
parted=$(build_prog parted)
cat > "$d/guest.sh" <<'GUEST'
. ./sync.sh
if [ "$ROLE" = m ]; then
    # The host says "live" or "restored" over M's second NIC.
    ip addr add 10.0.2.15/24 dev eth1 && ip link set eth1 up ||
        fail "eth1 (the host's channel)"
    (nc -l -p 7000 > /tmp/go.part 2> /dev/null; mv /tmp/go.part /tmp/go) &
    ./parted -d pvrdma0 -f /tmp/go "$PEER_IP" || fail "parted (M)"
    # Only the restored run gets here.
    xpair_client ud 120 "ibv_ud_pingpong -d pvrdma0 -g 1 -n 100 -c $PEER_IP"
    xpair_client pp 120 "ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c $PEER_IP"
    echo RESTORED-OK
else
    ./parted -d pvrdma0 -s || fail "parted (P)"
    xpair_server ud 120 "ibv_ud_pingpong -d pvrdma0 -g 1 -n 100 -c"
    xpair_server pp 120 "ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c"
    echo PEER-OK
fi
GUEST

# restore MODE: the whole sequence once, with a new P.
restore() {
    local mode=$1 out rc cur mlog plog
    xmig_setup shm "$parted" "$d/guest.sh" "$TESTS_TOP/tests/guest/sync.sh" \
        "$TESTS_TOP/tests/guest/pair.sh"
    rm -f "$d/snap.qcow2"
    qemu-img create -q -f qcow2 "$d/snap.qcow2" 64M ||
        fail "qemu-img create failed (scripts/install-deps.sh installs qemu-utils)"
    snap=(-q -drive -q "if=none,id=snap,file=$d/snap.qcow2,format=qcow2")
    xmig_start_p
    ppid=$pid
    hport=$(free_port)
    xmig_start_m m1 "$hport" "${snap[@]}"
    mpid=$pid
    xmig_seen m1 '^parted: snapshot now' 1
    out=$(qmp "$d/qmp-m1.sock" human-monitor-command \
          '{"command-line": "savevm parted"}')
    [ "$out" = '""' ] || fail "savevm: $out"
    log "$mode: snapshot taken; M goes on"
    xmig_tell "$hport" live
    xmig_seen m1 '^parted M: live round ok' 1
    xmig_seen p '^parted P: round 2 ok' 1
    if [ "$mode" = inplace ]; then
        out=$(qmp "$d/qmp-m1.sock" human-monitor-command \
              '{"command-line": "loadvm parted"}')
        [ "$out" = '""' ] || fail "loadvm: $out"
        log "$mode: M went back to the snapshot (loadvm) after a round with P"
        cur=m1
    else
        qmp "$d/qmp-m1.sock" quit > /dev/null || true
        wait "$mpid" || true
        log "$mode: M's QEMU quit after a round with P; restoring the snapshot"
        hport=$(free_port)
        xmig_start_m m2 "$hport" "${snap[@]}" -q -loadvm -q parted
        mpid=$pid cur=m2
    fi
    xmig_tell "$hport" restored
    rc=0
    wait "$mpid" || rc=$?
    mlog=$PVRDMA_OUT/vm/xmig-$cur.log plog=$PVRDMA_OUT/vm/xmig-p.log
    grep -E '^parted' "$mlog" | sed "s/^/  [$mode M] /"
    [ $rc = 0 ] || fail "$mode: restored guest M failed (status $rc; log: $mlog)"
    grep -q '^RESTORED-OK' "$mlog" || fail "$mode: no RESTORED-OK in $mlog"
    rc=0
    wait "$ppid" || rc=$?
    grep -E '^parted' "$plog" | sed "s/^/  [$mode P] /"
    [ $rc = 0 ] || fail "$mode: guest P failed (status $rc; log: $plog)"
    grep -q '^PEER-OK' "$plog" || fail "$mode: no PEER-OK in $plog"
    xmig_cleanup
}

start=$SECONDS
for m in $modes; do
    case $m in new|inplace) restore "$m" ;; *) fail "PVRDMA_RESTORE_MODES: new or inplace, not $m" ;; esac
done
trap - EXIT
pass "snapshot restored ($modes) after M's peer heard from M's later run: the restored QPs end with RETRY_EXC_ERR / flush, ERR and QP_FATAL on both sides whoever sends first, nothing of theirs taken; UD and a new RC connection work ($((SECONDS - start)) s)"
