#!/usr/bin/env bash
# Failure as on real RDMA: guest B runs a long ib_write_bw against guest
# A1 (so that B always has requests outstanding: a QP that only waits to
# receive learns nothing of a dead peer, on real RDMA as here); the host
# moves A1 to a new QEMU (live migration: B's WRITEs go on, to the new
# QEMU, once it took A1's GIDs over) and SIGKILLs that one after the
# switch (docs/migration.md, "Failure").  B's QP must complete with
# transport retry counter exceeded (12) within seconds (the QP's timeout,
# at least the fabric's 2 s floor), B's kernel must log no error, and B
# keeps working: a new VM A2 on the same fabric and address boots, and a
# new ping-pong between B and A2 runs and checks its data.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/migrate.sh"

vm_workdir kill

cat > "$work/guest-a1.sh" <<'GUEST'
. ./sync.sh
# Serves until it is killed.
listeners > /tmp/srv.before
ib_write_bw -d pvrdma0 -x 1 -F -n 100000000 > /tmp/srv 2>&1 &
wait_listening $! /tmp/srv.before
sync_signal long 120
sleep 600
GUEST
cat > "$work/guest-a2.sh" <<'GUEST'
. ./sync.sh
xpair_server again 120 "ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c"
echo GUEST-OK
GUEST
cat > "$work/guest-b.sh" <<'GUEST'
. ./sync.sh
sync_wait "$PEER_IP" long 120
ib_write_bw -d pvrdma0 -x 1 -F -n 100000000 "$PEER_IP" > /tmp/cli 2>&1 &
cpid=$!
sleep 3
kill -0 $cpid || { cat /tmp/cli; fail "the long ib_write_bw stopped early"; }
# The host watches the console for this line and kills A1's QEMU.
echo "KILL-PEER-NOW"
start=$(date +%s)
rc=0
wait $cpid || rc=$?
end=$(date +%s)
sed 's/^/[long writer] /' /tmp/cli
[ $rc -ne 0 ] || fail "ib_write_bw survived its peer's death"
grep -qE "status (transport retry counter exceeded \(12\)|12)" /tmp/cli ||
    fail "no RETRY_EXC_ERR (12) after the peer died"
echo "RETRY_EXC_ERR $((end - start)) s after the kill request"
[ $((end - start)) -le 20 ] || fail "took more than 20 s to notice"
dmesg | grep -E "pvrdma 0000:" | grep -iE "error|fail|timeout" &&
    fail "kernel errors on the survivor"
# A restarted peer: new QPs connect and run.
xpair_client again 120 "ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c $PEER_IP"
echo GUEST-OK
GUEST

net() { # own-socket peer-socket
    echo "dgram,local.type=unix,local.path=$1,remote.type=unix,remote.path=$2"
}
vm() { # name ip mac uuid-suffix own peer script [vm.sh args...]
    local name=$1 ip=$2 mac=$3 uuid=$4 own=$5 peer=$6 script=$7
    local peer_ip=10.9.0.1
    shift 7
    [ "$ip" = 10.9.0.1 ] && peer_ip=10.9.0.2
    setsid "$PVRDMA_TOP/scripts/vm.sh" --name "$name" --timeout 400 \
        --ip "$ip/24" --mac "$mac" --net "$(net "$own" "$peer")" \
        -q -uuid -q "00000000-0000-4000-8000-0000000a09$uuid" \
        -q -name -q "pvrdma-test-$name-$$" \
        -d ",fabric-path=$work/fab" \
        --add "$TESTS_TOP/tests/guest/sync.sh" \
        --add "$TESTS_TOP/tests/guest/pair.sh" --add "$script" "$@" \
        -- "PEER_IP=$peer_ip sh ./${script##*/}" \
        > "$work/$name.out" 2>&1 < /dev/null &
    pids+=($!)
}

start=$SECONDS
vm "$TEST_NAME-b" 10.9.0.2 52:54:00:0a:09:02 02 "$work/b.sock" "$work/a.sock" \
    "$work/guest-b.sh"
pid_b=${pids[0]}
d=$work     # (migrate.sh: QMP sockets $d/qmp-NAME.sock)
qmpq() { echo -q -qmp -q "unix:$work/qmp-$1.sock,server=on,wait=off"; }
# shellcheck disable=SC2046 # (qmpq: four words)
vm "$TEST_NAME-a1" 10.9.0.1 52:54:00:0a:09:01 01 "$work/a.sock" \
    "$work/b.sock" "$work/guest-a1.sh" $(qmpq a1)
for ((i = 0; i < 600; i++)); do
    grep -q "^KILL-PEER-NOW" "$work/$TEST_NAME-b.out" 2>/dev/null && break
    kill -0 "$pid_b" 2>/dev/null || break
    sleep 0.5
done
grep -q "^KILL-PEER-NOW" "$work/$TEST_NAME-b.out" ||
    { cat "$work/$TEST_NAME-b.out"; fail "guest B never asked for the kill"; }
# A1 moves to a new QEMU (its NIC's socket path handed over to it),
# then that one is killed.
rm -f "$work/a.sock"
# shellcheck disable=SC2046
vm "$TEST_NAME-a1m" 10.9.0.1 52:54:00:0a:09:01 01 "$work/a.sock" \
    "$work/b.sock" "$work/guest-a1.sh" $(qmpq a1m) \
    -q -incoming -q "unix:$work/mig.sock"
until [ -S "$work/qmp-a1m.sock" ]; do sleep 0.1; done
qmp "$work/qmp-a1.sock" migrate "{\"uri\": \"unix:$work/mig.sock\"}" > /dev/null
st=$(migrate_wait a1)
[ "$st" = completed ] || fail "moving A1: $st"
log "A1 moved to a new QEMU ($(migrate_info a1))"
qmp "$work/qmp-a1.sock" quit > /dev/null || true
qpid=$(pgrep -f "^[^ ]*qemu-system-x86_64 .*pvrdma-test-$TEST_NAME-a1m-$$") || fail "A1's new QEMU not found"
log "SIGKILL to A1's new QEMU (pid $qpid)"
kill -KILL "$qpid"
sleep 1
rm -f "$work/a.sock"
vm "$TEST_NAME-a2" 10.9.0.1 52:54:00:0a:09:01 01 "$work/a.sock" \
    "$work/b.sock" "$work/guest-a2.sh"
pid_a2=${pids[3]}
rc_b=0 rc_a2=0
wait "$pid_b" || rc_b=$?
wait "$pid_a2" || rc_a2=$?
grep -E "long writer|RETRY_EXC_ERR .* after|again" "$work/$TEST_NAME-b.out" |
    sed 's/^/  /'
[ $rc_b -eq 0 ] || { tail -30 "$work/$TEST_NAME-b.out"; fail "guest B failed ($rc_b)"; }
[ $rc_a2 -eq 0 ] || { tail -30 "$work/$TEST_NAME-a2.out"; fail "guest A2 failed ($rc_a2)"; }
pass "peer moved to a new QEMU and killed there: RETRY_EXC_ERR on the survivor; a restarted peer works ($((SECONDS - start)) s)"
