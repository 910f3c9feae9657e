#!/usr/bin/env bash
# The driver under injected device faults (the experimental x-fault-*
# properties, docs/faults.md). One device refuses one command in 30
# (ENOMEM), answers one in 8 late (40 ms), and every 250 ms overruns a CQ,
# fails a QP or an SRQ; the other (at 00:06.0) fails (DEVICE_FATAL) at
# the first 1.5 s tick that finds a QP running, and from then on refuses
# all but queries and destroys (EIO) until the module's reset. Three
# rounds, each: the module loaded, every kind of user run with a time
# limit (on the first device ibv_devinfo, ibv_rc_pingpong,
# ibv_srq_pingpong, rping -V, ib_write_bw and the kernel verbs module; on
# the second a ping-pong the failure ends and a watcher of its events),
# then the module removed. The applications may fail (that is the point);
# what must hold: the module unloads within 60 s every round, the kernel
# log has no oops, BUG, WARNING, hung task or "left at removal" (the
# driver's object counts at unload), the faults happened (the driver's
# cmd_errors and async_events counters), IBV_EVENT_DEVICE_FATAL reaches
# the watcher and a new user of the failed device is refused at once, and
# QEMU does not crash. (A first version, which also overran the GSI QP's
# CQ, hung the guest's RDMA CM in cm_destroy_id: docs/faults.md.)
. "$(dirname "$0")/lib.sh"
kver=$(basename "$(readlink -f "$PVRDMA_OUT/kernel")")
make -s -C "$TESTS_TOP/tests/guest/kmod" KVER="$kver" >&2 ||
    fail "cannot build the test module"
ko=$TESTS_TOP/tests/guest/kmod/pvrdma_ktest.ko

cat > "$TEST_OUT/guest.sh" <<'GUEST'
. ./pair.sh
ip=10.0.2.15
echo 10 > /proc/sys/kernel/hung_task_timeout_secs
pids=
# bg NAME LIMIT CMD: CMD in the background, output in /tmp/NAME
bg() {
    timeout "$2" sh -c "$3" > "/tmp/$1" 2>&1 &
    pids="$pids $!"
}
stat() {
    cat "/sys/class/infiniband/$1/hw_counters/$2" 2>/dev/null || echo 0
}
# ibdev BDF: the name of the RDMA device of PCI function BDF (names go
# by the order the devices register in, and a probe may fail).
ibdev() {
    local d
    for d in /sys/class/infiniband/*; do
        case $(readlink -f "$d/device") in */"$1") basename "$d"; return ;; esac
    done
    return 1
}
errors=0 asyncs=0 rounds=0
for round in 1 2 3; do
    echo "=== round $round"
    modprobe pvrdma || fail "modprobe pvrdma (round $round)"
    # The failing device (no refusals) always registers; a probe of the
    # other may fail (an injected refusal): the round goes on without it.
    wait_for 10 ibdev 0000:00:06.0 > /dev/null ||
        fail "the device at 00:06.0 did not register (round $round)"
    fatal=$(ibdev 0000:00:06.0)
    dev=$(ibdev 0000:00:04.0) || dev=none
    echo "faulty: $dev, failing: $fatal"
    # $fatal: a user watching its events, then QPs for the device
    # failure to hit; it reaches the watcher, the QPs fail, their users
    # exit, and a new user is refused at once.
    ibv_asyncwatch -d $fatal > /tmp/watch 2>&1 &
    watch=$!
    wait_for 20 sh -c "ls -l /proc/$watch/fd 2>/dev/null | grep -q uverbs" ||
        fail "ibv_asyncwatch did not open $fatal"
    bg fat_s 30 "ibv_rc_pingpong -d $fatal -g 1 -n 100000 -p 18601"
    sleep 1
    bg fat_c 30 "ibv_rc_pingpong -d $fatal -g 1 -n 100000 -p 18601 $ip"
    # $dev: every kind of user at once, while its faults go on.
    timeout 10 ibv_devinfo -v > /dev/null 2>&1
    bg rc_s 10 "ibv_rc_pingpong -d $dev -g 1 -n 200 -c"
    bg srq_s 10 "ibv_srq_pingpong -d $dev -g 1 -n 100 -p 18600"
    bg rping_s 10 "rping -s -a $ip -C 20 -V"
    sleep 1
    bg rc_c 10 "ibv_rc_pingpong -d $dev -g 1 -n 200 -c $ip"
    bg srq_c 10 "ibv_srq_pingpong -d $dev -g 1 -n 100 -p 18600 $ip"
    bg rping_c 10 "rping -c -a $ip -C 20 -V"
    wait $pids
    pids=
    bg bw_s 10 "ib_write_bw -d $dev -x 1 -n 500"
    sleep 1
    bg bw_c 10 "ib_write_bw -d $dev -x 1 -n 500 $ip"
    timeout 60 insmod ./pvrdma_ktest.ko ibdev=$dev && rmmod pvrdma_ktest
    wait $pids
    pids=
    for f in fat_c rc_c srq_c rping_c bw_c; do
        echo "[$f] $(tail -n 1 "/tmp/$f")"
    done
    dmesg | grep "ktest: RESULT" | tail -n 1
    wait_for 30 grep -q "IBV_EVENT_DEVICE_FATAL" /tmp/watch ||
        fail "no IBV_EVENT_DEVICE_FATAL from $fatal (round $round)"
    rc=0
    timeout 30 ibv_rc_pingpong -d $fatal -g 1 -n 10 -p 18602 > /tmp/dead 2>&1 ||
        rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] ||
        fail "a new user of the failed $fatal was not refused (status $rc)"
    errors=$((errors + $(stat $dev cmd_errors)))
    asyncs=$((asyncs + $(stat $dev async_events)))
    echo "$dev: cmd_errors $(stat $dev cmd_errors)," \
         "async_events $(stat $dev async_events)"
    kill -9 "$watch"
    wait
    timeout 60 rmmod pvrdma || fail "rmmod pvrdma failed or hung (round $round)"
    rounds=$((rounds + 1))
done
echo "faults: $rounds rounds, the faulty device's cmd_errors $errors," \
     "async_events $asyncs; the failing one's DEVICE_FATAL each round"
dmesg > /tmp/dmesg
grep -E "BUG|WARNING:|Oops|general protection|blocked for more than|left at removal|refcount_t|KASAN" \
    /tmp/dmesg && fail "kernel problems in the log (above)"
[ "$errors" -gt 0 ] || fail "no refused command reached the driver"
[ "$asyncs" -gt 0 ] || fail "no async error reached the driver"
echo GUEST-OK
GUEST
qlog=$TEST_OUT/qemu.log
rm -f "$qlog"
"$PVRDMA_TOP/scripts/vm.sh" --name "$TEST_NAME" --timeout 600 --noload \
    -d ",x-fault-seed=42,x-fault-fail=30,x-fault-late=8,x-fault-late-ms=40,x-fault-async-ms=250" \
    --qemu-arg -device \
    --qemu-arg "pvrdma,addr=0x6,x-fault-async=device-fatal,x-fault-async-ms=1500" \
    --qemu-arg -d --qemu-arg guest_errors --qemu-arg -D --qemu-arg "$qlog" \
    --add "$TESTS_TOP/tests/guest/pair.sh" \
    --add "$ko" --add "$TEST_OUT/guest.sh" -- sh ./guest.sh ||
    fail "see $PVRDMA_OUT/vm/$TEST_NAME.log"
log=$PVRDMA_OUT/vm/$TEST_NAME.log
grep -q '^GUEST-OK' "$log" || fail "guest checks failed (see $log)"
grep "^faults:" "$log" | sed 's/^/  /'
# Guest errors are expected (a QP the device failed is in ERR; a user
# that goes on to INIT is refused and logged): counted, not judged.
echo "  QEMU logged $(grep -c . "$qlog" 2>/dev/null || echo 0) guest-error lines"
pass "driver under injected faults: 3 module load/unload rounds with refused and late commands, CQ/QP/SRQ errors and a device fatal error; no oops, warning, hung task or leaked object"
