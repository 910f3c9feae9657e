#!/usr/bin/env bash
# A peer that stalls, is reset, or panics while connections run: guest B
# streams WRITEs (a long ib_write_bw, so that it always has requests
# outstanding) to guest A on one fabric directory, three times:
#   stop:  the host stops A's QEMU (SIGSTOP) for longer than B's QP
#          timeout, then continues it;
#   reset: the host resets A (QMP system_reset: the guest reboots, its
#          device comes back from a reset);
#   panic: A's kernel panics (sysrq c; panic=-1 reboots it);
#   reboot: A reboots itself (reboot -f: the kernel shuts its devices
#          down, our driver's with its QPs connected, and resets);
#   kexec: A's kernel boots a new kernel in place (kexec_file_load and
#          reboot(KEXEC): its devices are shut down, no reset, no
#          firmware; the new kernel's driver finds the device as the old
#          one left it).
# Each time B's ib_write_bw must end with RETRY_EXC_ERR (status 12)
# within 30 s, and then a new, verified ibv_rc_pingpong between B and A
# (continued or rebooted, its device clean) must pass. Neither QEMU may
# crash; neither kernel may log an oops or a warning.
# A's script runs again from the start at every boot (-action
# reboot=reset instead of vm.sh's -no-reboot): it says "boot", then serves
# a ping-pong and a long ib_write_bw in turn, as B orders.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/vmpair.sh"
. "$(dirname "$0")/migrate.sh"          # qmp

d=$TEST_OUT
fdir=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-crash.XXXXXX")
qa=$d/qmp-a.sock
rm -f "$qa"
trap 'rm -rf "$fdir"; jobs -p | xargs -r kill 2> /dev/null || true' EXIT

cat > "$d/guest-a.sh" <<'GUEST'
. ./sync.sh
# Orders from B on port 7501, a line each: "go" (serve the next stream),
# "panic", "reboot" or "kexec" (now, while a stream runs), "end".
(
    while :; do
        cmd=$(nc -l -p 7501 2> /dev/null)
        case $cmd in
        panic) echo "panicking as told"; echo c > /proc/sysrq-trigger ;;
        reboot) echo "rebooting as told"; reboot -f ;;
        kexec) echo "kexec as told"; ./kexec_now ./vmlinuz ./kx-initrd ;;
        go|end) echo "$cmd" >> /tmp/orders ;;
        esac
    done
) &
# next_order: the next line of /tmp/orders.
seen=0
have_order() { [ -e /tmp/orders ] && [ "$(wc -l < /tmp/orders)" -gt $seen ]; }
next_order() {
    wait_for 600 have_order || fail "no order from B"
    seen=$((seen + 1))
    sed -n "${seen}p" /tmp/orders
}
sync_signal boot 300
while :; do
    xpair_server pp 300 "ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c"
    [ "$(next_order)" = go ] || break
    # A stream B ends by stopping, resetting or crashing this VM: the
    # server fails afterwards, or this boot is over.
    start_server bw 3000 "ib_write_bw -d pvrdma0 -x 1 -F -D 600"
    sync_signal bw-up 300
    wait $spid
    echo "bw server ended ($?)"
done
dmesg | grep -E "BUG:|WARNING:|Oops|INFO: task .* blocked" &&
    fail "the kernel logged the above"
echo A-DONE
GUEST

cat > "$d/guest-b.sh" <<'GUEST'
. ./sync.sh
order() { # WORD: to A's order port (refused while A boots: again)
    i=0
    until echo "$1" | nc "$PEER_IP" 7501 2> /dev/null; do
        i=$((i + 1))
        [ $i -lt 300 ] || fail "A takes no orders"
        sleep 1
    done
}
# round HOW: stream to A, have HOW done to it, check how the stream ends
# and that a new connection works.
round() {
    order go
    sync_wait "$PEER_IP" bw-up 300
    timeout 300 ib_write_bw -d pvrdma0 -x 1 -F -D 600 "$PEER_IP" > /tmp/bw.$1 2>&1 &
    cpid=$!
    sleep 3
    kill -0 $cpid || { cat /tmp/bw.$1; fail "$1: the stream ended early"; }
    if [ "$1" = panic ] || [ "$1" = reboot ] || [ "$1" = kexec ]; then
        order "$1"
    else
        echo "HOST-DO $1"      # the host watches this console
    fi
    start=$(date +%s)
    rc=0
    wait $cpid || rc=$?
    took=$(($(date +%s) - start))
    tail -n 3 /tmp/bw.$1 | sed "s/^/[$1 writer] /"
    [ $rc -ne 0 ] || fail "$1: ib_write_bw survived"
    grep -q "Failed status 12" /tmp/bw.$1 ||
        fail "$1: no RETRY_EXC_ERR (12)"
    [ $took -le 30 ] || fail "$1: RETRY_EXC_ERR only after $took s"
    echo "$1: RETRY_EXC_ERR $took s after the peer went"
    if [ "$1" = stop ]; then
        echo "HOST-DO cont"
    else
        sync_wait "$PEER_IP" boot 300      # A booted again
    fi
    xpair_client pp 300 "ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c $PEER_IP"
    echo "$1: a new ping-pong with A passed"
}
sync_wait "$PEER_IP" boot 300
xpair_client pp 300 "ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c $PEER_IP"
round stop
round reset
round panic
round reboot
round kexec
order end
dmesg | grep -E "BUG:|WARNING:|Oops|INFO: task .* blocked" &&
    fail "the kernel logged the above"
echo B-DONE
GUEST

# What A kexecs into: the same kernel (the bzImage) and an image that
# runs A's script again (as vmpair.sh starts it).
kexec_now=$(build_prog kexec_now)
guest_files_cpio "$d/kx.cpio" \
    "VMPAIR_ROLE=a SELF_IP=$VMPAIR_A_IP PEER_IP=$VMPAIR_B_IP sh ./guest-a.sh" \
    "$TESTS_TOP/tests/guest/sync.sh" "$TESTS_TOP/tests/guest/pair.sh" \
    "$d/guest-a.sh"
cat "$d/kx.cpio" "$PVRDMA_OUT/initrd.cpio.gz" > "$d/kx-initrd"
loga=$PVRDMA_OUT/vm/$TEST_NAME-a.log logb=$PVRDMA_OUT/vm/$TEST_NAME-b.log
rm -f "$loga" "$logb"
vmpair_run "$TEST_NAME" 900 "$d/guest-a.sh" "$d/guest-b.sh" \
    --arg -d --arg ",fabric-path=$fdir" \
    --a-arg --add --a-arg "$kexec_now" --a-arg --add --a-arg "$d/kx-initrd" \
    --a-arg --add --a-arg "$(readlink -f "$PVRDMA_OUT/vmlinuz"):/run/files/vmlinuz" \
    --a-arg -q --a-arg -action --a-arg -q --a-arg reboot=reset \
    --a-arg -q --a-arg -qmp --a-arg -q --a-arg "unix:$qa,server=on,wait=off" \
    > "$d/pair.out" 2>&1 &
pair=$!
qemu_a() {
    local p
    for p in $(pgrep -f -- "unix:$qa,server=on"); do
        [ "$(cat "/proc/$p/comm" 2> /dev/null)" = qemu-system-x86 ] && echo "$p"
    done | head -n 1
}
# await LINE: until B printed LINE.
await() {
    until grep -qx "$1" "$logb" 2> /dev/null; do
        kill -0 $pair 2> /dev/null || { tail -n 30 "$d/pair.out"; fail "the guests ended before '$1'"; }
        sleep 0.2
    done
}
await "HOST-DO stop"
pa=$(qemu_a)
[ -n "$pa" ] || fail "cannot find A's QEMU"
kill -STOP "$pa"
log "A's QEMU (pid $pa) stopped"
await "HOST-DO cont"
kill -CONT "$pa"
log "A's QEMU continued"
await "HOST-DO reset"
qmp "$qa" system_reset > /dev/null
log "A reset (system_reset)"
wait $pair || { tail -n 40 "$d/pair.out"; fail "the guests failed (logs: $loga, $logb)"; }
[ "$(qemu_a)" = "" ] || fail "A's QEMU still runs"
grep -qx B-DONE "$logb" && grep -qx A-DONE "$loga" ||
    fail "a guest did not finish (logs: $loga, $logb)"
[ "$(grep -c "^\[guest\] running" "$loga")" -eq 5 ] ||
    fail "A did not boot five times (once, after the reset, the panic, the reboot and the kexec)"
grep -q "kexec_now: loaded, jumping" "$loga" || fail "A did not kexec"

grep -h "RETRY_EXC_ERR\|new ping-pong" "$logb" | sed 's/^/  /'
pass "a peer stopped, reset, panicked, rebooted and kexec'ed while B streamed: RETRY_EXC_ERR each time, then new connections to it work"
