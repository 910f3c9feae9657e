#!/usr/bin/env bash
# Hot-plug and hot-unplug of the device in running guests (QMP device_add
# and device_del), two VMs on one fabric directory:
#   B (pc, ACPI hot-plug on pci.0) has pvrdma0 on the fabric from boot;
#     first two more devices are added to it, the first with an IOThread
#     (object-add), both on the fabric the first makes (the drivers bind,
#     the ports go ACTIVE, a ping-pong between them); the first is
#     removed and its IOThread deleted (object-del), then a ping-pong on
#     the second and its removal (the fabric holds the IOThread it runs
#     in until it goes).
#   A (q35, a PCIe root port, native PCIe hot-plug; no SATA controller:
#     the firmware's probe of its ports takes 30 s under TCG) boots without the
#     device; it is added with fabric-path= (joining B's fabric) and
#     removed $HP_CYCLES times (20). In the first cycle, before the
#     removal: a verified ping-pong with B, then under the removal, all
#     running at once: ibv_rc_pingpong polling and with completion
#     events, ib_write_bw, rping -V (RDMA CM), NVMe over RDMA (the
#     kernel's target and host in A, I/O in a loop), the kernel verbs
#     test as a kernel client (pvrdma_ktest loop=1: SEND, WRITE and READ
#     rounds on two QPs, stopped by the client's remove) and B's
#     ib_write_bw to A, and a user that only watches the device's async
#     events.
#     Every process in A must end with an error within 60 s (our
#     driver's removal marks the rings of user objects dead:
#     docs/abi.md), never hang; the watcher gets IBV_EVENT_DEVICE_FATAL;
#     the NVMe controller goes away; B's
#     ib_write_bw fails with RETRY_EXC_ERR (status 12). The removal
#     itself must end within 60 s. In every later cycle a ping-pong runs
#     across the removal; the last cycle's new device runs a verified
#     ping-pong with B again. The kernel verbs test stays loaded
#     throughout: it starts on every new device and must end on every
#     removal with all its checks passed.
# The host checks that after each removal A's QEMU has as many open file
# descriptors and no more memory mappings than before the first device_add (the
# device's links, rings and memory gone), and that its anonymous memory
# grew by less than 32 MiB from the 2nd to the last cycle. Neither guest
# kernel may log an oops, a warning or a hung task.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/vmpair.sh"
. "$(dirname "$0")/migrate.sh"          # qmp

cycles=${HP_CYCLES:-20}
d=$TEST_OUT
kver=$(basename "$(readlink -f "$PVRDMA_OUT/kernel")")
make -s -C "$TESTS_TOP/tests/guest/kmod" KVER="$kver" >&2 ||
    fail "cannot build the kernel verbs test module"
fdir=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-hp.XXXXXX")
qa=$d/qmp-a.sock qb=$d/qmp-b.sock
rm -f "$qa" "$qb"
trap 'rm -rf "$fdir"; jobs -p | xargs -r kill 2> /dev/null || true' EXIT

cat > "$d/guest-a.sh" <<GUEST
cycles=$cycles
GUEST
cat >> "$d/guest-a.sh" <<'GUEST'
. ./sync.sh
. ./nvmeof.sh
modprobe pvrdma || fail "modprobe pvrdma"
zero=0000:0000:0000:0000:0000:0000:0000:0000
gid_set() {
    g=$(cat /sys/class/infiniband/pvrdma0/ports/1/gids/1 2> /dev/null)
    [ -n "$g" ] && [ "$g" != $zero ]
}
active() { ibv_devinfo -d pvrdma0 2> /dev/null | grep -q PORT_ACTIVE; }
# ended PID: the process is gone or a zombie (this shell reaps it only
# at its wait).
ended() {
    st=$(sed 's/^.*) //' "/proc/$1/stat" 2> /dev/null | cut -c1)
    [ -z "$st" ] || [ "$st" = Z ]
}
# dev_up K: the host adds the device now; wait for it.
dev_up() {
    echo "HP-PLUG $1"
    wait_for 120 test -e /sys/class/infiniband/pvrdma0 ||
        fail "cycle $1: no pvrdma0 120 s after HP-PLUG"
    wait_for 30 active || fail "cycle $1: port not ACTIVE"
    wait_for 30 gid_set || fail "cycle $1: no IPv4 GID"
}
# dev_down K PID...: the host removes the device now; every PID must end
# within 60 s of the device's going, with a non-zero status.
dev_down() {
    k=$1
    shift
    echo "HP-UNPLUG $k"
    wait_for 120 not test -e /sys/class/infiniband/pvrdma0 ||
        fail "cycle $k: pvrdma0 still there 120 s after HP-UNPLUG"
    for p in "$@"; do
        wait_for 60 ended "$p" ||
            fail "cycle $k: process $p (of: $(cat /proc/$p/cmdline | tr '\0' ' ')) still runs 60 s after the removal"
        wait "$p" && fail "cycle $k: process $p ended with status 0 after the removal"
    done
    echo "cycle $k: the device went, $# processes ended with errors"
}
# a ping-pong pair that runs across the removal (server, then client)
long_pingpong() { # PORT [OPTS]
    start_server "pp$1" 3000 "ibv_rc_pingpong -d pvrdma0 -g 1 -n 100000000 -p $1 $2"
    pids="$pids $spid"
    ibv_rc_pingpong -d pvrdma0 -g 1 -n 100000000 -p "$1" $2 127.0.0.1 > /tmp/pp$1.c 2>&1 &
    pids="$pids $!"
}
dmesg_bad() {
    dmesg | grep -E "BUG:|WARNING:|Oops|general protection|INFO: task .* blocked|hung_task|left at removal" &&
        fail "the kernel logged the above"
    return 0
}

# ---- cycle 1: everything across the removal ----------------------------
dev_up 1
xpair_client pp1 120 "ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c $PEER_IP"
pair local1 120 "ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c" \
    "ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c 127.0.0.1"
# A kernel user: the kernel verbs test as an ib_client, in rounds.
insmod ./pvrdma_ktest.ko loop=1 || fail "insmod pvrdma_ktest loop=1"
wait_for 20 sh -c 'dmesg | grep -q "ktest: LOOP pvrdma0 started"' ||
    fail "the kernel verbs test did not start on pvrdma0"
# loops K: the kernel verbs test's rounds ended K times, none failed.
loops() {
    dmesg | grep "ktest: LOOP pvrdma0 rounds=" > /tmp/loops
    [ "$(wc -l < /tmp/loops)" = "$1" ]
}
loops_ok() {
    wait_for 30 loops "$1" ||
        fail "the kernel verbs test ended $(wc -l < /tmp/loops) times, not $1"
    grep -v "failed=0$" /tmp/loops && fail "kernel verbs checks failed (above)"
    dmesg | grep "ktest: FAIL" && fail "kernel verbs checks failed (above)"
    return 0
}
pids=
long_pingpong 18600
long_pingpong 18601 -e
start_server bw 3000 "ib_write_bw -d pvrdma0 -x 1 -F -D 900 -p 18602"
pids="$pids $spid"
ib_write_bw -d pvrdma0 -x 1 -F -D 900 -p 18602 127.0.0.1 > /tmp/bw.c 2>&1 &
pids="$pids $!"
start_server rping 3000 "rping -s -a 10.9.0.1 -C 100000000 -S 4000"
pids="$pids $spid"
rping -c -a 10.9.0.1 -C 100000000 -S 4000 -V > /tmp/rping.c 2>&1 &
pids="$pids $!"
nvmeof_target 10.9.0.1
nvmeof_connect 10.9.0.1
ctrl=$NVME_DEV
# (a block device that went away would leave dd a regular file there)
(i=0; while [ -b "/dev/${ctrl}n1" ] && nvme_io "$ctrl" $i; do i=$((i + 1)); done
 exit 1) > /dev/null 2>&1 &
pids="$pids $!"
# B streams WRITEs to this device: its server here.
start_server bwb 3000 "ib_write_bw -d pvrdma0 -x 1 -F -D 900 -p 18603"
pids="$pids $spid"
# A user that only watches the device's events: the removal must tell it
# (it then waits for more, as any reader of the event file would: killed).
ibv_asyncwatch -d pvrdma0 > /tmp/watch 2>&1 &
watch=$!
wait_for 20 sh -c "ls -l /proc/$watch/fd | grep -q uverbs" ||
    fail "ibv_asyncwatch did not open pvrdma0"
sync_signal bw-up 120
sleep 5
for p in $pids; do
    kill -0 "$p" 2> /dev/null || fail "process $p ended before the removal"
done
dev_down 1 $pids
for f in pp18600.c pp18601.c bw.c rping.c; do
    echo "--- $f"; tail -n 3 /tmp/$f
done
grep -q "poll CQ failed\|parse WC failed\|Failed status\|Couldn't" /tmp/pp18600.c ||
    fail "the polling ping-pong ended without an error message"
wait_for 30 grep -q "IBV_EVENT_DEVICE_FATAL" /tmp/watch ||
    fail "the removal did not reach a user as IBV_EVENT_DEVICE_FATAL: $(cat /tmp/watch)"
kill "$watch"
echo "--- watch"; cat /tmp/watch
# The NVMe controller is deleted with the device under it.
wait_for 60 not test -e /sys/class/nvme/$ctrl ||
    fail "NVMe controller $ctrl still there 60 s after the removal"
nvmeof_target_down
echo "cycle 1: NVMe controller $ctrl gone, target removed"
loops_ok 1
grep -q "rounds=[1-9]" /tmp/loops ||
    fail "the kernel verbs test ran no round before the removal: $(cat /tmp/loops)"
echo "cycle 1: kernel verbs test stopped by the removal: $(cat /tmp/loops)"
sync_wait "$PEER_IP" bw-done 120
dmesg_bad

# ---- cycles 2..N: a ping-pong across each removal ---------------------
k=2
while [ $k -le "$cycles" ]; do
    dev_up $k
    pids=
    long_pingpong 18610
    sleep 2
    dev_down $k $pids
    k=$((k + 1))
done
loops_ok "$cycles"
dmesg_bad
# ---- and a device added once more works with B -----------------------
dev_up $((cycles + 1))
xpair_client ppz 120 "ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c $PEER_IP"
rmmod pvrdma_ktest || fail "rmmod pvrdma_ktest"
loops_ok $((cycles + 1))
echo "kernel verbs test: $((cycles + 1)) lives, every check passed"
dmesg_bad
echo "HP-DONE"
sync_signal end 120
GUEST

cat > "$d/guest-b.sh" <<'GUEST'
. ./sync.sh
zero=0000:0000:0000:0000:0000:0000:0000:0000
# pc: two more devices added through ACPI hot-plug (the first with an
# IOThread; both on the fabric the first makes), used, removed one by one.
echo "HP-PLUG-B"
wait_for 120 sh -c 'test -e /sys/class/infiniband/pvrdma1 &&
                    test -e /sys/class/infiniband/pvrdma2' ||
    fail "no pvrdma1 and pvrdma2 after HP-PLUG-B"
for dev in pvrdma1 pvrdma2; do
    wait_for 30 sh -c "ibv_devinfo -d $dev | grep -q PORT_ACTIVE" ||
        fail "$dev: port not ACTIVE"
done
pair b1 120 "ibv_rc_pingpong -d pvrdma1 -g 0 -n 200 -c" \
    "ibv_rc_pingpong -d pvrdma2 -g 0 -n 200 -c 127.0.0.1"
echo "HP-UNPLUG-B"
# (which of the two names the one left has is the driver's probe order)
left() { ls /sys/class/infiniband | grep -x 'pvrdma[12]'; }
wait_for 120 sh -c '[ "$(ls /sys/class/infiniband | grep -cx "pvrdma[12]")" = 1 ]' ||
    fail "still $(left | tr '\n' ' ')120 s after HP-UNPLUG-B"
dev=$(left)
pair b2 120 "ibv_rc_pingpong -d $dev -g 0 -n 200 -c" \
    "ibv_rc_pingpong -d $dev -g 0 -n 200 -c 127.0.0.1"
echo "HP-UNPLUG-B2"
wait_for 120 not test -e /sys/class/infiniband/$dev ||
    fail "$dev still there 120 s after HP-UNPLUG-B2"
echo "pc: pvrdma1 and pvrdma2 added and removed, the second used after the first and its IOThread went"
xpair_server pp1 120 "ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c"
# WRITEs to A's device until it goes: RETRY_EXC_ERR (status 12).
sync_wait "$PEER_IP" bw-up 300
timeout 300 ib_write_bw -d pvrdma0 -x 1 -F -D 900 -p 18603 "$PEER_IP" > /tmp/bwb.c 2>&1 &&
    fail "ib_write_bw to the removed device ended with status 0"
tail -n 4 /tmp/bwb.c
grep -q "Failed status 12" /tmp/bwb.c ||
    fail "ib_write_bw to the removed device did not end with RETRY_EXC_ERR (12)"
echo "B: WRITEs to A's removed device ended with RETRY_EXC_ERR"
sync_signal bw-done 120
xpair_server ppz 600 "ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c"
sync_wait "$PEER_IP" end 600
dmesg | grep -E "BUG:|WARNING:|Oops|INFO: task .* blocked" &&
    fail "the kernel logged the above"
echo "HP-B-DONE"
GUEST

# ---- host: the QMP side -------------------------------------------------
loga=$PVRDMA_OUT/vm/$TEST_NAME-a.log logb=$PVRDMA_OUT/vm/$TEST_NAME-b.log
rm -f "$loga" "$logb"
vmpair_run "$TEST_NAME" 1500 "$d/guest-a.sh" "$d/guest-b.sh" \
    --a-arg --add --a-arg "$TESTS_TOP/tests/guest/kmod/pvrdma_ktest.ko" \
    --a-arg --pvrdma --a-arg 0 \
    --a-arg -q --a-arg -M --a-arg -q --a-arg q35,sata=off \
    --a-arg -q --a-arg -device --a-arg -q --a-arg pcie-root-port,id=rp1,slot=1 \
    --a-arg -q --a-arg -qmp --a-arg -q --a-arg "unix:$qa,server=on,wait=off" \
    --b-arg -d --b-arg ",fabric-path=$fdir" \
    --b-arg -q --b-arg -qmp --b-arg -q --b-arg "unix:$qb,server=on,wait=off" \
    > "$d/pair.out" 2>&1 &
pair=$!

# await LOG LINE: until the guest printed LINE (a whole line).
await() {
    until grep -qx "$2" "$1" 2> /dev/null; do
        kill -0 $pair 2> /dev/null || { tail -n 30 "$d/pair.out"; fail "the guests ended before '$2'"; }
        sleep 0.2
    done
}
# gone SOCK ID: until QEMU no longer has device ID (DEVICE_DELETED), at
# most 60 s; prints the seconds it took.
gone() {
    local t0=$SECONDS
    while qmp "$1" qom-list '{"path": "/machine/peripheral"}' | grep -q "\"name\": \"$2\""; do
        [ $((SECONDS - t0)) -lt 60 ] || fail "device $2 not deleted 60 s after device_del"
        sleep 0.2
    done
    echo $((SECONDS - t0))
}
qemu_pid() {
    local p
    for p in $(pgrep -f -- "unix:$qa,server=on"); do
        [ "$(cat "/proc/$p/comm" 2> /dev/null)" = qemu-system-x86 ] && echo "$p"
    done | head -n 1
}
fds() { ls "/proc/$1/fd" | wc -l; }
maps() { wc -l < "/proc/$1/maps"; }
anon_kb() { sed -n 's/^RssAnon:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status"; }
# same_as PID FDS MAPS: both counts back to those (a closed socket may
# take a moment to leave the table: up to 10 s).
# same_as PID FDS MAPS: as many fds, no more mappings (an allocator may
# merge two). On the ASan QEMU (tests/guest/run-all.sh) only the fds:
# its allocator maps and keeps memory as it likes (a quarantine of freed
# blocks), and ASan itself finds what leaks or is used after free.
asan=${ASAN_OPTIONS:+1}
same_as() {
    local i
    for i in $(seq 50); do
        [ "$(fds "$1")" = "$2" ] &&
            { [ -n "$asan" ] || [ "$(maps "$1")" -le "$3" ]; } && return 0
        sleep 0.2
    done
    return 1
}

# hb makes the fabric of B's devices without fabric-* (pvrdma0 is on the
# fabric directory), in its IOThread; hb2 joins it.  When hb and then its
# IOThread are gone, the fabric must still run for hb2 (it holds the
# IOThread until it goes) and go cleanly with it.
await "$logb" HP-PLUG-B
qmp "$qb" object-add '{"qom-type": "iothread", "id": "hbio"}' > /dev/null
qmp "$qb" device_add '{"driver": "pvrdma", "id": "hb", "iothread": "hbio"}' > /dev/null
qmp "$qb" device_add '{"driver": "pvrdma", "id": "hb2"}' > /dev/null
await "$logb" HP-UNPLUG-B
qmp "$qb" device_del '{"id": "hb"}' > /dev/null
log "B (pc): device hb deleted $(gone "$qb" hb) s after device_del"
qmp "$qb" object-del '{"id": "hbio"}' > /dev/null ||
    fail "object-del of hb's IOThread failed"
await "$logb" HP-UNPLUG-B2
qmp "$qb" device_del '{"id": "hb2"}' > /dev/null
log "B (pc): device hb2 deleted $(gone "$qb" hb2) s after device_del (hb's IOThread deleted before)"

pid=
for k in $(seq 1 $((cycles + 1))); do
    await "$loga" "HP-PLUG $k"
    if [ -z "$pid" ]; then
        pid=$(qemu_pid)
        [ -n "$pid" ] || fail "cannot find A's QEMU"
        # A device whose fabric cannot start is refused with the reason
        # and leaves nothing behind. (The first refusal maps glibc's
        # gconv cache for the error text: mappings are counted after it.)
        fd0=$(fds "$pid")
        for i in 1 2; do
            if out=$(qmp "$qa" device_add \
                     '{"driver": "pvrdma", "id": "bad", "bus": "rp1", "fabric-listen": "192.0.2.1:7471"}' 2>&1); then
                fail "device_add with an unusable fabric-listen was accepted"
            fi
            echo "$out" | grep -q "cannot listen on fabric-listen=192.0.2.1:7471" ||
                fail "the refusal does not say why: $out"
            [ $i = 2 ] || map0=$(maps "$pid")
            same_as "$pid" "$fd0" "$map0" ||
                fail "a refused device_add left $(fds "$pid") fds and $(maps "$pid") mappings ($fd0, $map0 before)"
        done
        log "refused twice, nothing left behind: $out"
        log "A's QEMU before any device: $fd0 fds, $map0 mappings, $(anon_kb "$pid") kB anonymous"
    fi
    qmp "$qa" device_add \
        "{\"driver\": \"pvrdma\", \"id\": \"hp$k\", \"bus\": \"rp1\", \"fabric-path\": \"$fdir\"}" \
        > /dev/null
    [ $k -le "$cycles" ] || break
    await "$loga" "HP-UNPLUG $k"
    qmp "$qa" device_del "{\"id\": \"hp$k\"}" > /dev/null
    secs=$(gone "$qa" "hp$k")
    same_as "$pid" "$fd0" "$map0" ||
        fail "cycle $k: A's QEMU has $(fds "$pid") fds and $(maps "$pid") mappings after the removal, $fd0 and $map0 before the first device"
    [ $k -ne 2 ] || anon2=$(anon_kb "$pid")
    [ $k -ne "$cycles" ] || anonn=$(anon_kb "$pid")
    [ $k -eq 1 ] || [ $k -eq "$cycles" ] || [ $((k % 5)) -eq 0 ] ||
        continue
    log "cycle $k: device hp$k deleted ${secs} s after device_del; $(fds "$pid") fds, $(maps "$pid") mappings, $(anon_kb "$pid") kB anonymous"
done
if [ -n "${anon2:-}" ] && [ -z "$asan" ]; then
    grow=$((anonn - anon2))
    log "A's anonymous memory grew by $grow kB from cycle 2 to $cycles"
    [ "$grow" -lt 32768 ] || fail "A's QEMU grew by $grow kB of anonymous memory over $((cycles - 2)) add/remove cycles"
fi
wait $pair || { tail -n 40 "$d/pair.out"; fail "the guests failed (logs: $loga, $logb)"; }
grep -qx HP-DONE "$loga" && grep -qx HP-B-DONE "$logb" ||
    fail "a guest did not finish (logs: $loga, $logb)"
grep -h "^cycle 1:\|^B: \|^pc: " "$loga" "$logb" | sed 's/^/  /'
pass "hot-plug (q35 root port and pc) and hot-unplug under traffic: ping-pongs (poll, events), ib_write_bw, rping, NVMe over RDMA end with errors, the kernel verbs client stops cleanly with every check passed, B's WRITEs with RETRY_EXC_ERR; $cycles add/remove cycles, fds and mappings back each time; the device added again works"
