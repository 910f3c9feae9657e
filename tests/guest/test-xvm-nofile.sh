#!/usr/bin/env bash
# A host out of file descriptors (RLIMIT_NOFILE), with guests running: VM
# A serves on a fabric directory; the host lowers its QEMU's open files
# limit to what it has open (prlimit --pid), then VM B joins. A cannot
# accept B's link: its QEMU says so once, with the limit to raise, and
# tries again every second. Meanwhile:
#   - B's ping-pong to A fails as on real RDMA with an unreachable peer
#     (transport retry counter exceeded, status 12), and nothing hangs;
#   - A's device keeps working for what fits: a verified ping-pong
#     within A.
# The host raises the limit again: the link comes up by itself (A's QEMU
# says "link ... up") and a verified ping-pong between B and A passes.
# The host tells B on its second serial port when the link is up.
. "$(dirname "$0")/lib.sh"

vm_workdir nofile

cat > "$work/guest-a.sh" <<'GUEST'
. ./sync.sh
echo "A-READY"
# B's first ping-pong cannot reach this device: its server waits in
# vain and is stopped once B has failed.
listeners > /tmp/srv.before
timeout 120 ibv_rc_pingpong -d pvrdma0 -g 1 -n 10 > /tmp/srv 2>&1 &
srv=$!
wait_listening $srv /tmp/srv.before
sync_signal nolink 300
# This device works for what fits: within this VM.
pair local 120 "ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c -p 18530" \
    "ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c -p 18530 127.0.0.1"
sync_wait "$PEER_IP" nolink-done 300
kill $srv 2> /dev/null
wait $srv
xpair_server linked 300 "ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c"
dmesg | grep -E "BUG:|WARNING:|Oops" && fail "the kernel logged the above"
echo GUEST-OK
GUEST
cat > "$work/guest-b.sh" <<'GUEST'
. ./sync.sh
exec 3< /dev/ttyS1
stty -F /dev/ttyS1 raw -echo || fail "stty ttyS1"
sync_wait "$PEER_IP" nolink 300
rc=0
timeout 120 ibv_rc_pingpong -d pvrdma0 -g 1 -n 10 "$PEER_IP" > /tmp/cli 2>&1 || rc=$?
sed 's/^/[no link] /' /tmp/cli
[ $rc -ne 0 ] && [ $rc -ne 124 ] ||
    fail "the ping-pong to an unreachable peer ended with status $rc"
grep -qE "status (transport retry counter exceeded \(12\)|12)" /tmp/cli ||
    fail "no RETRY_EXC_ERR (12) from the unreachable peer"
sync_signal nolink-done 300
echo "RAISE-NOW"
read -r line <&3 || fail "the host's control channel closed"
[ "$line" = linked ] || fail "control channel: '$line'"
xpair_client linked 300 "ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c $PEER_IP"
dmesg | grep -E "BUG:|WARNING:|Oops" && fail "the kernel logged the above"
echo GUEST-OK
GUEST

net() { # own-socket peer-socket
    echo "dgram,local.type=unix,local.path=$1,remote.type=unix,remote.path=$2"
}
# vm NAME IP N OWN PEER SCRIPT [vm.sh args...]: in the background, in a
# session of its own; QEMU's and vm.sh's messages in $work/NAME.out
vm() {
    local name=$1 ip=$2 n=$3 own=$4 peer=$5 script=$6 peer_ip=10.9.0.1
    shift 6
    [ "$ip" = 10.9.0.1 ] && peer_ip=10.9.0.2
    setsid "$PVRDMA_TOP/scripts/vm.sh" --name "$name" --timeout 600 \
        --ip "$ip/24" --mac "52:54:00:0a:09:0$n" --net "$(net "$own" "$peer")" \
        -q -uuid -q "00000000-0000-4000-8000-0000000a090$n" \
        -d ",fabric-path=$work/fab" \
        --add "$TESTS_TOP/tests/guest/sync.sh" \
        --add "$TESTS_TOP/tests/guest/pair.sh" --add "$script" "$@" \
        -- "PEER_IP=$peer_ip SELF_IP=$ip sh ./${script##*/}" \
        > "$work/$name.out" 2>&1 < /dev/null &
    pids+=($!)
}
loga=$PVRDMA_OUT/vm/$TEST_NAME-a.log logb=$PVRDMA_OUT/vm/$TEST_NAME-b.log
rm -f "$loga" "$logb"
# await LOG LINE PID: until the guest printed LINE (its vm.sh, PID, runs).
await() {
    until grep -qx "$2" "$1" 2> /dev/null; do
        kill -0 "$3" 2> /dev/null || fail "the guest ended before '$2' (log $1)"
        sleep 0.2
    done
}

vm "$TEST_NAME-a" 10.9.0.1 1 "$work/a.sock" "$work/b.sock" "$work/guest-a.sh"
pa_vm=${pids[0]}
await "$loga" A-READY "$pa_vm"
pa=
for p in $(pgrep -s "$pa_vm"); do
    [ "$(cat "/proc/$p/comm" 2> /dev/null)" = qemu-system-x86 ] && pa=$p
done
[ -n "$pa" ] || fail "cannot find A's QEMU"
# The soft limit at the lowest free descriptor number: the next one A's
# QEMU opens fails with EMFILE (the limit bounds numbers, not a count).
read -r soft hard < <(prlimit --pid "$pa" --nofile --noheadings --raw -o SOFT,HARD)
free=0
while [ -e "/proc/$pa/fd/$free" ]; do free=$((free + 1)); done
prlimit --pid "$pa" --nofile="$free:$hard" || fail "prlimit on A's QEMU"
log "A's QEMU (pid $pa): open files limit $soft -> $free"

vm "$TEST_NAME-b" 10.9.0.2 2 "$work/b.sock" "$work/a.sock" "$work/guest-b.sh" \
    -q -chardev -q "socket,id=ctl,path=$work/ctl.sock,server=on,wait=off" \
    -q -device -q isa-serial,chardev=ctl
pb_vm=${pids[1]}
await "$logb" RAISE-NOW "$pb_vm"
grep "cannot accept" "$work/$TEST_NAME-a.out" ||
    fail "A's QEMU did not say why it took no link: $(cat "$work/$TEST_NAME-a.out")"
[ "$(grep -c "cannot accept" "$work/$TEST_NAME-a.out")" = 1 ] ||
    fail "A's QEMU said it more than once (once per cause)"
grep -q "Too many open files; QEMU's open files limit is reached: raise it (ulimit -n" \
    "$work/$TEST_NAME-a.out" || fail "A's QEMU did not say what to raise"
grep -q "link .* up" "$work/$TEST_NAME-a.out" &&
    fail "A's QEMU took a link above its open files limit"
prlimit --pid "$pa" --nofile="$soft:$hard" || fail "prlimit on A's QEMU"
log "A's QEMU: open files limit back to $soft"
for i in $(seq 300); do
    grep -q "link .* up" "$work/$TEST_NAME-a.out" && break
    kill -0 "$pa_vm" 2> /dev/null || fail "A ended"
    sleep 0.2
done
grep "link .* up" "$work/$TEST_NAME-a.out" ||
    fail "no link 60 s after the limit was raised"
python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"linked\n")' "$work/ctl.sock"
wait "$pa_vm" || fail "guest A failed (log $loga)"
wait "$pb_vm" || fail "guest B failed (log $logb)"
grep -q "^GUEST-OK" "$loga" && grep -q "^GUEST-OK" "$logb" ||
    fail "a guest did not finish (logs $loga, $logb)"
grep -h "^\[no link\] .*status\|RETRY\|iters in" "$logb" | sed 's/^/  /'
pass "A's QEMU out of file descriptors: B's link refused and said once with the limit to raise, B's ping-pong to A ends with RETRY_EXC_ERR, A works within itself; the limit raised, the link comes up and B and A ping-pong"
