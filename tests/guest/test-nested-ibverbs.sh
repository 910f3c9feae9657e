#!/usr/bin/env bash
# Nested QEMU with the host verbs backend: a test guest (the "host")
# makes Soft-RoCE rxe0 on its eth0 and runs our QEMU with
# -device pvrdma,backend=ibverbs,ibdev=rxe0 for inner guests, whose RDMA
# then goes through rxe0:
#  (a) an inner guest A (10.0.3.2) against native programs of the outer
#      guest: ibv_rc_pingpong (data checked, -c), ib_write_bw (64 KiB,
#      1 MiB), and our verification program rc_verify with its requester
#      in the inner guest and its responder (agent) on the outer rxe0:
#      every opcode, byte and completion field, the error statuses;
#      RDMA CM both ways: the inner rping client against a native rping
#      server, a native rping client against the inner rping server
#      (rping -V: the client checks every byte it gets back), and UD
#      through RDMA CM (SIDR) with udaddy both ways; NVMe over
#      RDMA from the inner guest to a kernel target in the outer guest
#      (a kernel user: RDMA CM, fast-reg MRs), the data found on the
#      target's disk; an NFS over RDMA client of the outer guest's nfsd,
#      the file checked on the server;
#  (b) a second inner guest B (10.0.5.2) against A, both through rxe0:
#      ibv_rc_pingpong -c between them (B reaches A's TCP port through a
#      user-mode hostfwd of A's QEMU, once A listens), then rping (RDMA
#      CM) from B to A, and NVMe over RDMA from B (host) to A (target),
#      the data found on A's disk. A is the inner guest of (a), which
#      turns to B when it is done with the native programs; B boots while
#      A runs (a) (two inner guests, one boot less than a guest per part);
#  (c) what QEMU says when the host device is missing, has no such port
#      or GID, is down, or guest RAM is not shared, and when such a VM is
#      asked to migrate.
# Each inner guest's address is also given to the outer eth0, so that
# rxe0 owns its GID (docs/ibverbs.md), and each inner guest routes to the
# others through its user-mode NIC's gateway (.1 of its /24).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nested.sh"
rc_verify=$(build_prog rc_verify)

cat > "$TEST_OUT/inner-cmd.sh" <<'INNER'
# (where the time goes: seconds since this guest booted)
stamp() { echo "T+$(cut -d' ' -f1 /proc/uptime)s $*"; }
stamp start
ip=$(sed -n 's/.*pvrdma\.ip=\([0-9.]*\).*/\1/p' /proc/cmdline)
gw=${ip%.*}.1
# The guest kernel resolves a route to the peer's address before it
# modifies a RoCE QP: peers are behind the user-mode NIC's gateway.
ip route add default via "$gw"
ibv_devinfo -d pvrdma0 | grep -E "state|active_mtu"
case $ip in
10.0.3.2)   # (a): the outer guest's native programs serve
    ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c "$gw" || exit 1
    ib_write_bw -d pvrdma0 -x 1 -F -n 200 -p 18516 "$gw" || exit 1
    ib_write_bw -d pvrdma0 -x 1 -F -n 50 -s 1048576 -p 18517 "$gw" ||
        exit 1
    # The agent's rxe0 uses its first RoCE v2 IPv4 GID (10.0.2.15).
    stamp "ping-pong and ib_write_bw done"
    ./rc_verify -d pvrdma0 -g 1 -D rxe0 -P -t 30 -c "$gw" || exit 1
    stamp "rc_verify done"
    # RDMA CM: to the outer guest's own address, then serving it.
    rping -c -a 10.0.2.15 -C 20 -S 4000 -V -v | tee /tmp/rping.out
    [ "$(grep -c "^ping data: " /tmp/rping.out)" = 20 ] || exit 1
    echo "RPING-CLIENT-OK"
    rping -s -a "$ip" -C 20 -S 4000 -v | tee /tmp/rping.out
    [ "$(grep -c "^server ping data: " /tmp/rping.out)" = 20 ] || exit 1
    echo "RPING-SERVER-OK"
    # UD through RDMA CM (SIDR): both ways, 20 datagrams each way.
    udaddy -s 10.0.2.15 -C 20 -S 400 || exit 1
    echo "UDADDY-CLIENT-OK"
    udaddy -b "$ip" -C 20 -S 400 || exit 1
    echo "UDADDY-SERVER-OK"
    stamp "rping and udaddy done"
    # A kernel user: NVMe over RDMA to the outer guest's target (RDMA
    # CM, fast-reg MRs, DMA MRs).
    fail() { echo "FAIL: $*"; exit 1; }
    . ./nvmeof.sh
    dmesg_mark
    nvmeof_host 10.0.2.15
    dmesg_clean
    echo "NVMEOF-HOST-OK"
    stamp "NVMe over RDMA done"
    # Another: an NFS over RDMA client of the outer guest's nfsd.
    . ./nfs.sh
    dmesg_mark
    # (4 MiB: nested, each MiB costs seconds; 16 in the other tests)
    NFS_MB=4 nfs_client 10.0.2.15
    dmesg_clean
    echo "NFS-CLIENT-OK"
    stamp "NFS over RDMA done"
    # (b): serves B (port 18515, forwarded from the outer 18600); the
    # outer guest lets B go once this ping-pong listens.
    echo "SERVE-B"
    ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c || exit 1
    nvmeof_target "$ip"
    rping -s -a "$ip" -C 20 -S 4000 -v | tee /tmp/rping.out
    [ "$(grep -c "^server ping data: " /tmp/rping.out)" = 20 ] || exit 1
    echo "RPING-SERVER-OK"
    # B says when its NVMe host is done (port 5000, forwarded from the
    # outer 18601); then what is on the disk.
    nc -l -p 5000 > /dev/null
    stamp "B's NVMe host done"
    echo "NVMET-DISK $(dd if=/dev/ram0 bs=65536 count=64 2>/dev/null | md5sum | cut -c1-32)"
    nvmeof_target_down ;;
10.0.5.2)   # (b), B: waits until the outer guest says A listens (port
    # 18602 of the outer guest; refused until then)
    i=0
    until timeout 10 nc "$gw" 18602 < /dev/null 2> /dev/null | grep -q go; do
        i=$((i + 1))
        [ $i -lt 600 ] || { echo "FAIL: never told that A listens"; exit 1; }
        sleep 2
    done
    stamp "A listens"
    ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c -p 18600 "$gw" || exit 1
    # A's rping server starts after its ping-pong: until then A rejects.
    for i in $(seq 120); do
        rping -c -a 10.0.3.2 -C 20 -S 4000 -V -v > /tmp/rping.out
        if [ "$(grep -c "^ping data: " /tmp/rping.out)" = 20 ]; then
            echo "RPING-CLIENT-OK"
            break
        fi
        sleep 2
    done
    # NVMe over RDMA to A's target (set up before A's rping server);
    # A is told when it is over, whatever the outcome.
    (
        fail() { echo "FAIL: $*"; exit 1; }
        . ./nvmeof.sh
        dmesg_mark
        nvmeof_host 10.0.3.2
        dmesg_clean
        echo "NVMEOF-HOST-OK"
    )
    st=$?
    stamp "NVMe over RDMA to A done"
    echo done | nc "$gw" 18601
    exit $st ;;
esac
INNER
nested_bundle "$TEST_OUT/nested" "sh ./inner-cmd.sh" "$TEST_OUT/inner-cmd.sh" \
    "$rc_verify" "$TESTS_TOP/tests/guest/nvmeof.sh" \
    "$TESTS_TOP/tests/guest/nfs.sh"
cat > "$TEST_OUT/guest.sh" <<'GUEST'
stamp() { echo "T+$(cut -d' ' -f1 /proc/uptime)s $*"; }
. ./pair.sh
. ./rxe.sh
. ./inner.sh
. ./nvmeof.sh
. ./nfs.sh
rxe_up
for a in 10.0.3.2 10.0.5.2; do
    ip addr add $a/24 dev eth0
done
for i in $(seq 20); do
    [ -n "$(rxe_gid_index 10.0.5.2)" ] && break
    sleep 0.5
done
idx=$(rxe_gid_index 10.0.2.15)
for a in 10.0.3.2 10.0.5.2; do
    [ -n "$(rxe_gid_index $a)" ] || fail "rxe0 has no GID for $a"
done
echo "rxe0: GID index $idx for 10.0.2.15, $(rxe_gid_index 10.0.3.2) for 10.0.3.2"

stamp "=== (c) errors"
q="qemu-system-x86_64 -M pc -accel tcg -nodefaults -display none -L /usr/share/nested-fw"
shm="-m 128 -object memory-backend-memfd,id=ram,size=128M,share=on -machine memory-backend=ram"
refused() { # EXPECTED-TEXT QEMU-ARGS...
    local text=$1 out
    shift
    if out=$(LD_LIBRARY_PATH=/usr/lib/nested $q "$@" 2>&1 </dev/null); then
        fail "QEMU accepted $*"
    fi
    echo "$out"
    echo "$out" | grep -qE "$text" || fail "unclear error for $*"
}
refused "ibdev=nope: no such host RDMA device; this host has: .*rxe0" \
    $shm -device pvrdma,backend=ibverbs,ibdev=nope
refused "ibport=2: host RDMA device rxe0 has ports 1 to 1" \
    $shm -device pvrdma,backend=ibverbs,ibdev=rxe0,ibport=2
refused "gid-index=900: port 1 of host RDMA device rxe0 has no GID there" \
    $shm -device pvrdma,backend=ibverbs,ibdev=rxe0,gid-index=900
refused "gid-index=5000: port 1 of host RDMA device rxe0 has GID indexes 0 to" \
    $shm -device pvrdma,backend=ibverbs,ibdev=rxe0,gid-index=5000
refused "needs it shared: add -object memory-backend-memfd" \
    -m 128 -device pvrdma,backend=ibverbs,ibdev=rxe0
# A VM with the backend does not migrate, and says why (QEMU paused, no
# guest needed).
out=$(printf 'migrate file:/tmp/vm.state\nquit\n' |
      LD_LIBRARY_PATH=/usr/lib/nested $q $shm -S -monitor stdio \
          -device pvrdma,backend=ibverbs,ibdev=rxe0 2>&1)
echo "$out" | grep "^Error:"
echo "$out" | grep -q "backend=ibverbs: the VM's RDMA objects live in host RDMA device rxe0 and cannot move" ||
    fail "migration of a VM with backend=ibverbs was not refused with the reason"
[ ! -s /tmp/vm.state ] || fail "a migration stream was written"

stamp "=== (a) an inner guest and native programs"
timeout 900 ibv_rc_pingpong -d rxe0 -g "$idx" -n 200 -c > /tmp/native.out 2>&1 &
native=$!
timeout 900 ib_write_bw -d rxe0 -x "$idx" -F -n 200 -p 18516 > /tmp/bw.out 2>&1 &
bw=$!
timeout 900 ib_write_bw -d rxe0 -x "$idx" -F -n 50 -s 1048576 -p 18517 \
    > /tmp/bw1m.out 2>&1 &
bw1m=$!
./rc_verify -s > /tmp/agent.out 2>&1 &
agent=$!
timeout 900 rping -s -a 10.0.2.15 -C 20 -S 4000 -v > /tmp/rping-srv.out 2>&1 &
rping_srv=$!
nvmeof_target 10.0.2.15
nfs_server 10.0.2.15
# The inner guest serves rping after its client: until then its device
# rejects.
(
    for i in $(seq 450); do
        timeout 120 rping -c -a 10.0.3.2 -C 20 -S 4000 -V -v > /tmp/rping-try.out
        [ "$(grep -c "^ping data: " /tmp/rping-try.out)" = 20 ] &&
            cat /tmp/rping-try.out && exit 0
        sleep 2
    done
    exit 1
) > /tmp/rping-cli.out 2>&1 &
rping_cli=$!
timeout 900 udaddy -b 10.0.2.15 -C 20 -S 400 > /tmp/ud-srv.out 2>&1 &
ud_srv=$!
# The inner guest serves udaddy after its client: until then its guest
# CM answers that nobody serves the port.
(
    for i in $(seq 450); do
        timeout 120 udaddy -s 10.0.3.2 -C 20 -S 400 > /tmp/ud-try.out 2>&1 &&
            cat /tmp/ud-try.out && exit 0
        sleep 2
    done
    exit 1
) > /tmp/ud-cli.out 2>&1 &
ud_cli=$!
# What each native server said, for a failure of the inner guest.
servers_said() {
    local f
    for f in native.out bw.out bw1m.out agent.out rping-srv.out \
             rping-cli.out ud-srv.out ud-cli.out; do
        [ -s /tmp/$f ] && sed "s/^/[${f%.out}] /" /tmp/$f
    done
    return 0
}
INNER_QEMU_ARGS="-d guest_errors" \
INNER_NET_OPTS=",hostfwd=tcp:127.0.0.1:18600-10.0.3.2:18515,hostfwd=tcp:127.0.0.1:18601-10.0.3.2:5000" \
    inner_run innerA 10.0.3.2 512 1300 > /tmp/innerA.out 2>&1 &
a=$!
inner_run innerB 10.0.5.2 512 1300 > /tmp/innerB.out 2>&1 &
b=$!
# B's connection through the hostfwd must find A listening (a forwarded
# connection to a port nobody listens on yet can hang): A says SERVE-B
# and prints its address just before it listens; then B is told so.
(
    for i in $(seq 1300); do
        if sed -n '/^SERVE-B/,$p' /tmp/innerA.log 2>/dev/null |
           grep -q "local address"; then
            nc -l -p 18602 -w 600 -e echo go
            exit
        fi
        kill -0 $a 2>/dev/null || exit 1
        sleep 1
    done
    exit 1
) > /dev/null 2>&1 &
tell_b=$!
wait $a || rc_a=1
# B would wait for A until its time is up
[ -z "$rc_a" ] || pkill -f "pvrdma.ip=10.0.5.2" 2>/dev/null
wait $b || rc_b=1
stamp "inner guests done"
kill $tell_b 2>/dev/null
cat /tmp/innerA.out /tmp/innerB.out | grep -v "^\[inner[AB]\] \[ *[0-9]"
if [ -n "$rc_a" ] && ! grep -q NFS-CLIENT-OK /tmp/innerA.log; then
    kill $agent 2>/dev/null
    servers_said
    fail "inner guest A failed against the native programs"
fi
# The agent waits for its client without a limit: one the inner guest
# never reached is stopped here (its rc_verify has failed by then).
grep -q "agent: client .* connected" /tmp/agent.out || kill $agent 2>/dev/null
wait $native || { cat /tmp/native.out; fail "native ibv_rc_pingpong failed"; }
sed 's/^/[native] /' /tmp/native.out
wait $bw && wait $bw1m ||
    { cat /tmp/bw.out /tmp/bw1m.out; fail "native ib_write_bw failed"; }
sed 's/^/[native] /' /tmp/bw.out /tmp/bw1m.out
grep -qE "^ *65536 +200 " /tmp/bw.out && grep -qE "^ *1048576 +50 " /tmp/bw1m.out ||
    fail "ib_write_bw printed no result rows"
wait $agent || { cat /tmp/agent.out; fail "the rc_verify agent failed"; }
sed 's/^/[agent] /' /tmp/agent.out
# (its requester's side: every check passed, none failed)
res=$(sed -n 's/^RESULT passed=\([0-9]*\) failed=\([0-9]*\)$/\1 \2/p' /tmp/innerA.log)
[ -n "$res" ] || fail "rc_verify in the inner guest printed no RESULT"
set -- $res
[ "$1" -gt 0 ] && [ "$2" -eq 0 ] ||
    fail "rc_verify inner guest -> native rxe0: $2 of $(($1 + $2)) checks failed"
echo "rc_verify inner guest -> native rxe0: all $1 checks passed"
wait $rping_srv && [ "$(grep -c "^server ping data: " /tmp/rping-srv.out)" = 20 ] ||
    { cat /tmp/rping-srv.out; fail "native rping server failed"; }
grep -q RPING-CLIENT-OK /tmp/innerA.log ||
    fail "the inner guest's rping client did not connect to the native server"
wait $rping_cli || { tail /tmp/rping-cli.out; fail "native rping client failed"; }
grep -q RPING-SERVER-OK /tmp/innerA.log ||
    fail "the native rping client never reached the inner guest's server"
echo "RDMA CM: inner rping client -> native server, native client -> inner server: ok"
wait $ud_srv || { cat /tmp/ud-srv.out; fail "native udaddy server failed"; }
grep -q UDADDY-CLIENT-OK /tmp/innerA.log ||
    fail "the inner guest's udaddy client did not reach the native server (SIDR)"
wait $ud_cli || { tail /tmp/ud-cli.out; fail "native udaddy client failed"; }
grep -q UDADDY-SERVER-OK /tmp/innerA.log ||
    fail "the native udaddy client never reached the inner guest's server"
echo "RDMA CM UD (SIDR): inner udaddy client -> native server, native client -> inner server: ok"
grep -q NVMEOF-HOST-OK /tmp/innerA.log ||
    fail "NVMe over RDMA from the inner guest to the native target failed"
# What the inner guest wrote is on the target's RAM disk, byte for byte.
sum=$(sed -n 's/.*4 MiB written and read back equal (\([0-9a-f]*\)).*/\1/p' /tmp/innerA.log)
[ -n "$sum" ] && [ "$(dd if=/dev/ram0 bs=65536 count=64 2>/dev/null | md5sum | cut -c1-32)" = "$sum" ] ||
    fail "the native target's RAM disk does not hold what the inner guest wrote"
nvmeof_target_down
echo "NVMe over RDMA: inner guest host -> native target: 4 MiB written, read back and found on the target's disk"
grep -q NFS-CLIENT-OK /tmp/innerA.log ||
    fail "NFS over RDMA from the inner guest to the native nfsd failed"
sum=$(sed -n 's/.*4 MiB written and read back equal in .* READs (\([0-9a-f]*\)).*/\1/p' /tmp/innerA.log)
[ -n "$sum" ] && [ "$(nfs_server_md5)" = "$sum" ] ||
    fail "the native nfsd's file is not what the inner guest wrote"
nfs_server_down
echo "NFS over RDMA: inner guest client -> native nfsd: 4 MiB written, read back over RDMA and found on the server"

stamp "=== (b) inner guest B against A"
[ -z "$rc_a$rc_b" ] || fail "inner guests A and B: ping-pong failed"
# (A's log has a ping-pong and an rping server of (a) before B's.)
[ "$(grep -c "200 iters in" /tmp/innerA.log)" = 2 ] && grep -q "200 iters in" /tmp/innerB.log ||
    fail "inner guests A and B: no ping-pong result"
[ "$(grep -c RPING-SERVER-OK /tmp/innerA.log)" = 2 ] && grep -q RPING-CLIENT-OK /tmp/innerB.log ||
    fail "inner guests A and B: rping (RDMA CM) did not complete"
echo "RDMA CM: inner B rping client -> inner A server: ok"
grep -q NVMEOF-HOST-OK /tmp/innerB.log ||
    fail "inner guests A and B: NVMe over RDMA from B to A failed"
sum=$(sed -n 's/.*4 MiB written and read back equal (\([0-9a-f]*\)).*/\1/p' /tmp/innerB.log)
[ -n "$sum" ] && grep -q "^NVMET-DISK $sum" /tmp/innerA.log ||
    fail "A's disk does not hold what B wrote over NVMe/RDMA"
echo "NVMe over RDMA: inner B host -> inner A target: 4 MiB written, read back and found on A's disk"

stamp "=== (c) a port that is down"
ip link set eth0 down
sleep 1
refused "port 1 of host RDMA device rxe0 is DOWN, not ACTIVE: bring its network interface up \\(ip link set eth0 up\\)" \
    $shm -device pvrdma,backend=ibverbs,ibdev=rxe0
ip link set eth0 up
echo GUEST-OK
GUEST
# The outer guest has no pvrdma device of its own: rxe0 must be the only
# RDMA device on its eth0, or the host's RDMA CM may pick the other one.
"$PVRDMA_TOP/scripts/vm.sh" --name "$TEST_NAME" --timeout 1500 --smp 2 \
    --pvrdma 0 --mem 3072 --add "$TESTS_TOP/tests/guest/pair.sh" "${NESTED_ADDS[@]}" \
    --add "$TESTS_TOP/tests/guest/nvmeof.sh" --add "$TESTS_TOP/tests/guest/nfs.sh" \
    --add "$rc_verify" \
    --add "$TEST_OUT/guest.sh" -- sh ./guest.sh ||
    fail "see $PVRDMA_OUT/vm/$TEST_NAME.log"
grep -hE "^(\[inner[AB]\] )?T\+|^\[inner[AB]?\] (.*iters in|  *(65536|1048576) )|^\[native\] .*iters in|^rc_verify inner|^RDMA CM|^NVMe over RDMA|^NFS over RDMA" \
    "$PVRDMA_OUT/vm/$TEST_NAME.log" | sed 's/^/  /'
pass "backend=ibverbs on Soft-RoCE under nested QEMU: inner guest <-> native (ping-pong -c, ib_write_bw, rc_verify, rping and udaddy both ways, NVMe-oF host, NFS/RDMA client), inner <-> inner (ping-pong -c, rping, NVMe-oF), errors named"
