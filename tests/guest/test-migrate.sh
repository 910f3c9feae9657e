#!/usr/bin/env bash
# Live migration of one VM with RDMA running (docs/migration.md): the guest
# streams RDMA WRITEs between two of its processes (tests/guest/progs/
# ev_bw.c -b: every block of the target buffer checked for the bytes of
# its last WRITE, so memory the device wrote during the copy must have
# been copied again) and runs rounds of a verified ibv_rc_pingpong (-c),
# perftest's ib_write_bw, NVMe over RDMA I/O (the kernel's target and
# host in the guest, connected across the switch, data read back uncached
# and compared) and rc_verify (every RC opcode, bytes and completions
# checked) one after the other, while the host moves it to a second QEMU
# (QMP, tests/guest/qmp.py). After the switch the host tells the guest
# over its user-mode network (hostfwd on the destination); only then does
# the stream end (one more WRITE, then the server checks its buffer) and
# two more rounds run: the traffic spans the switch by construction,
# whatever the timing. Every process must succeed: an error completion or a QP gone to
# ERR makes the tools exit non-zero.
#
#   unix: first to a destination whose -device pvrdma has another max-qp
#         (refused, the property named in its log; the source goes on),
#         a migration cancelled while it copies and one whose destination
#         is killed (the source goes on), then to a good destination,
#         whose device runs in an IOThread (iothread=: the VM moves from
#         doorbells run by its vCPUs to doorbells run by an IOThread);
#   file: `migrate file:` by a QEMU whose device runs in an IOThread
#         (doorbells it still had queued run before the save), the VM
#         stopping at the end; a copy of the file
#         with one byte of the device state changed is refused by a
#         destination (-incoming defer + migrate-incoming) with the
#         device's message; the file itself restores the VM (no IOThread
#         there), which goes on;
#   snapshot: `savevm` to a qcow2 image with the traffic running, then a
#         new QEMU started with -loadvm goes on from it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/migrate.sh"

d=$TEST_OUT
rm -f "$d"/*.sock "$d"/*.state
evbw=$(build_prog ev_bw)
rcv=$(build_prog rc_verify)

# Variant runs: PVRDMA_MIGRATE_PROVIDER=stock, the processes use
# rdma-core's stock vmw_pvrdma provider instead of ours
# (test-stock-driver, with the next); PVRDMA_MIGRATE_DRIVER=KO, the guest runs the
# upstream vmw_pvrdma kernel driver KO (built by test-stock-driver) on
# one device beside a vmxnet3 at function 0, instead of ours on two.
# PVRDMA_MIGRATE_FULL=0 (the variants): only the switches of the
# migration proper (unix socket; file and -incoming defer), without the
# refused, cancelled and killed migrations, the corrupted file and the
# snapshot, whose handling does not depend on the guest's software or
# the IOThread.
full=${PVRDMA_MIGRATE_FULL:-1}
provider=${PVRDMA_MIGRATE_PROVIDER:-ours}
ko=${PVRDMA_MIGRATE_DRIVER:-}
driver=ours
vmargs=(--pvrdma 2)
# The unix destination and the file source run the devices in an
# IOThread (vm.sh --iothread; not for the one -device the driver variant
# writes itself).
io=(--iothread)
if [ -n "$ko" ]; then
    io=()
    [ -e "$ko" ] || fail "PVRDMA_MIGRATE_DRIVER: no $ko"
    driver=stock
    vmargs=(--pvrdma 0 --noload --add "$ko"
            --add "$TESTS_TOP/tests/guest/stock.sh"
            -q -netdev -q user,id=vmx0,net=10.0.3.0/24
            -q -device -q vmxnet3,netdev=vmx0,addr=0x6.0,multifunction=on,romfile=
            -q -device -q pvrdma,addr=0x6.1)
fi
cat > "$d/guest.sh" <<GUEST
provider=$provider
driver=$driver
GUEST
cat >> "$d/guest.sh" <<'GUEST'
. ./pair.sh
. ./nvmeof.sh
if [ $provider = stock ]; then
    mv /etc/libibverbs.d/pvrdma.driver /tmp/
    cp /usr/share/pvrdma/stock-provider/vmw_pvrdma.driver /etc/libibverbs.d/
fi
dev=pvrdma0 gidx=1 ip=10.0.2.15
if [ $driver = stock ]; then
    # As test-stock-driver: the vmxnet3 at function 0 carries its GIDs.
    . ./stock.sh
    ip=10.0.3.15
    stock_driver_up $ip
    dev=vmw_pvrdma0 gidx=$gid
fi
# The kernel's NVMe over RDMA, target and host in this guest, connected
# before the switch; each round writes 1 MiB of fresh random data and
# reads it back uncached.
dmesg_mark
nvmeof_target $ip > /dev/null
nvmeof_connect $ip
nvme=$NVME_DEV
# Told by the host (port 7000) once the VM runs on the destination; the
# stream stops at once then.
(nc -l -p 7000 > /tmp/go 2>/dev/null; touch /tmp/go.seen) &
# A slow stream of WRITEs (at most 1000 a second) of their own bytes
# round a 32 MiB buffer, each block checked for its last WRITE at the end: the
# blocks written while the migration copied the guest's memory are not
# written again before the check, and must be on the destination.
ev="./ev_bw -d $dev -g $gidx -s 4096 -t 64 -b 8192 -n 1 -p 18531"
$ev > /tmp/ev.s 2>&1 &
es=$!
$ev -w 1000 -f /tmp/go.seen 127.0.0.1 > /tmp/ev.c 2>&1 &
ec=$!
if [ $provider = stock ]; then
    # The server opens the device (loads a provider) before it listens.
    until grep -q "libvmw_pvrdma\|libpvrdma-" /proc/$es/maps 2>/dev/null; do
        kill -0 $es 2>/dev/null || fail "the stream's server stopped"
        sleep 0.1
    done
    grep -q libvmw_pvrdma /proc/$es/maps || fail "the stock provider is not loaded"
fi
# One round: a verified ping-pong and perftest's ib_write_bw (pair.sh
# starts each server and waits until it listens).
round() {
    port=$((18600 + $1 % 200 * 2))
    pair "pp$1" 600 "ibv_rc_pingpong -d $dev -g $gidx -s 4096 -n 500 -c -p $port" \
        "ibv_rc_pingpong -d $dev -g $gidx -s 4096 -n 500 -c -p $port $ip" \
        > /tmp/pp.out || { cat /tmp/pp.out; return 1; }
    pair "wbw$1" 600 "ib_write_bw -d $dev -x $gidx -F -s 65536 -n 1000 -p $((port + 1))" \
        "ib_write_bw -d $dev -x $gidx -F -s 65536 -n 1000 -p $((port + 1)) $ip" \
        > /tmp/wbw.out || { cat /tmp/wbw.out; return 1; }
    grep -qE "^\[wbw$1 client\] +65536 +1000 +[0-9.]+ +[0-9.]+" /tmp/wbw.out ||
        { cat /tmp/wbw.out; return 1; }
}
# rc_verify: every RC opcode between two QPs, bytes and completions
# checked, each error status provoked; on one device, then between the
# guest's two pvrdma devices (each saves and loads its own state).
# (Not with the stock provider: it lacks inline data and refuses no
# BIND_MW, which rc_verify checks; test-stock-provider says the same;
# nor with the stock driver, which has neither, and one device.)
verify() {
    [ $provider = ours ] && [ $driver = ours ] || return 0
    ./rc_verify -d pvrdma0 > /tmp/rv.out 2>&1 &&
        grep -q '^RESULT passed=[1-9][0-9]* failed=0' /tmp/rv.out &&
        ./rc_verify -d pvrdma0 -D pvrdma1 > /tmp/rv.out 2>&1 &&
        grep -q '^RESULT passed=[1-9][0-9]* failed=0' /tmp/rv.out ||
        { cat /tmp/rv.out; return 1; }
}
echo MIGRATE-NOW
r=0
while ! [ -s /tmp/go ]; do
    r=$((r + 1))
    round $r || { echo "FAIL: ping-pong round $r"; exit 1; }
    nvme_io $nvme $r || { echo "FAIL: NVMe I/O round $r"; exit 1; }
    verify || { echo "FAIL: rc_verify run $r"; exit 1; }
    echo "round $r ok"
done
echo "migrated after $r rounds"
round 1000 && nvme_io $nvme 1000 && verify && round 1001 && nvme_io $nvme 1001 ||
    { echo "FAIL: ping-pong, NVMe I/O or rc_verify after the switch"; exit 1; }
echo 1 > /sys/class/nvme/$nvme/delete_controller || fail "NVMe disconnect"
nvmeof_target_down > /dev/null
dmesg_clean
wait $ec || { cat /tmp/ev.c /tmp/ev.s; echo "FAIL: WRITE stream"; exit 1; }
wait $es || { cat /tmp/ev.s; echo "FAIL: WRITE stream server"; exit 1; }
cat /tmp/ev.c
echo MIGRATE-OK
GUEST


srclog=$PVRDMA_OUT/vm/mig-src.log
cleanup() {
    jobs -p | xargs -r kill 2> /dev/null || true
}
trap cleanup EXIT

# start NAME PORT [vm.sh args...]: a guest running guest.sh, or a
# destination (with -incoming); its QMP socket is $d/qmp-NAME.sock.
start() {
    local name=$1 port=$2
    shift 2
    rm -f "$d/qmp-$name.sock"
    "$PVRDMA_TOP/scripts/vm.sh" --name "mig-$name" --smp 2 --timeout 900 \
        "${vmargs[@]}" \
        --add "$evbw" --add "$rcv" --add "$d/guest.sh" \
        --add "$TESTS_TOP/tests/guest/nvmeof.sh" \
        --add "$TESTS_TOP/tests/guest/pair.sh" \
        --net "user,hostfwd=tcp:127.0.0.1:$port-:7000" \
        -q -qmp -q "unix:$d/qmp-$name.sock,server=on,wait=off" "$@" \
        -- sh ./guest.sh > /dev/null 2> "$d/$name.err" &
    pid=$!
    until [ -S "$d/qmp-$name.sock" ]; do
        kill -0 "$pid" 2> /dev/null || fail "QEMU $name did not start (log: $PVRDMA_OUT/vm/mig-$name.log)"
        sleep 0.1
    done
}

# return_path NAME: the destination tells the source whether it took the
# VM (without it, a source whose stream was sent counts the migration as
# completed, and a destination's refusal cannot make it go on).
return_path() {
    qmp "$d/qmp-$1.sock" migrate-set-capabilities \
        '{"capabilities": [{"capability": "return-path", "state": true}]}' \
        > /dev/null
}

# tell NAME PID PORT: the moved guest runs on NAME now.
tell() {
    local name=$1 pid=$2 port=$3
    send_go() { { echo go >&3; } 3<> "/dev/tcp/127.0.0.1/$port"; }
    until send_go 2> /dev/null; do
        kill -0 "$pid" 2> /dev/null || fail "QEMU $name stopped (log: $PVRDMA_OUT/vm/mig-$name.log)"
        sleep 0.1
    done
}

# finish NAME PID: the moved guest's result.
finish() {
    local name=$1 pid=$2 rc=0 log=$PVRDMA_OUT/vm/mig-$1.log rounds
    wait "$pid" || rc=$?
    [ "$rc" = 0 ] || fail "the guest failed after the migration (status $rc; log: $log)"
    grep -q '^MIGRATE-OK' "$log" || fail "no MIGRATE-OK in $log"
    grep -q '^ev_bw: WRITE' "$log" || fail "no stream result in $log"
    rounds=$(sed -n 's/^migrated after \([0-9]*\) rounds$/\1/p' "$log")
    log "$name: $(grep '^ev_bw: WRITE' "$log"), $rounds rounds before the switch"
}

# in_iothread NAME: QEMU NAME has the IOThread vm.sh --iothread makes
# (its devices run there; scripts/vm.sh).
in_iothread() {
    qmp "$d/qmp-$1.sock" query-iothreads | grep -q '"id": "pvrdma-io"' ||
        fail "QEMU $1 has no IOThread pvrdma-io"
}

wait_traffic() {
    until grep -q '^MIGRATE-NOW' "$srclog" 2> /dev/null; do
        kill -0 "$src" 2> /dev/null || fail "the source guest stopped before the migration (log: $srclog)"
        sleep 0.2
    done
}

# ---- unix: a refused destination, then a good one ----------------------
start src "$(free_port)"
src=$pid
wait_traffic
if [ "$full" = 1 ]; then
start bad "$(free_port)" -q -global -q pvrdma.max-qp=512 \
    -q -incoming -q "unix:$d/bad.sock"
bad=$pid
return_path src
return_path bad
qmp "$d/qmp-src.sock" migrate "{\"uri\": \"unix:$d/bad.sock\"}" > /dev/null
[ "$(migrate_wait src)" = failed ] ||
    fail "a destination with max-qp=512 took the VM"
wait "$bad" || true
grep -q "property max-qp is 512 where the source's is 1024" "$d/bad.err" ||
    fail "the refusing destination did not name the property ($d/bad.err)"
wait_running src || fail "the source did not go on after a refused migration"
# A migration cancelled while it copies, and one whose destination dies
# before the switch (SIGKILL): the source goes on each time (its traffic
# is checked at the end). 1 MB/s keeps the copy going until then.
qmp "$d/qmp-src.sock" migrate-set-parameters '{"max-bandwidth": 1048576}' \
    > /dev/null
for how in cancel kill; do
    start "$how" "$(free_port)" -q -incoming -q "unix:$d/$how.sock" \
        -q -pidfile -q "$d/$how.pid"
    slow=$pid
    qmp "$d/qmp-src.sock" migrate "{\"uri\": \"unix:$d/$how.sock\"}" \
        > /dev/null
    until qmp "$d/qmp-src.sock" query-migrate | grep -q '"status": "active"'; do
        sleep 0.1
    done
    if [ $how = cancel ]; then
        qmp "$d/qmp-src.sock" migrate_cancel > /dev/null
        [ "$(migrate_wait src)" = cancelled ] || fail "migrate_cancel did not cancel"
        qmp "$d/qmp-$how.sock" quit > /dev/null 2>&1 || true  # (it may have gone)
    else
        kill -9 "$(cat "$d/$how.pid")"
        [ "$(migrate_wait src)" = failed ] ||
            fail "a migration whose destination was killed did not fail"
    fi
    wait "$slow" || true
    wait_running src ||
        fail "the source did not go on after a migration ended by $how"
    log "unix: a migration ended by $how, the source goes on"
done
qmp "$d/qmp-src.sock" migrate-set-parameters \
    '{"max-bandwidth": 17179869184}' > /dev/null
fi
port=$(free_port)
start dst "$port" "${io[@]}" -q -incoming -q "unix:$d/mig.sock"
dst=$pid
[ ${#io[@]} -eq 0 ] || in_iothread dst
return_path dst
qmp "$d/qmp-src.sock" migrate "{\"uri\": \"unix:$d/mig.sock\"}" > /dev/null
st=$(migrate_wait src)
[ "$st" = completed ] || fail "migration $st (logs: $srclog, $PVRDMA_OUT/vm/mig-dst.log)"
tell dst "$dst" "$port"
log "unix: migration completed, $(migrate_info src)"
qmp "$d/qmp-src.sock" quit > /dev/null || true
wait "$src" || true
finish dst "$dst"

# ---- file: a corrupted copy refused, then the file restored -------------
start src "$(free_port)" "${io[@]}"
src=$pid
[ ${#io[@]} -eq 0 ] || in_iothread src
wait_traffic
rm -f "$d/vm.state"
qmp "$d/qmp-src.sock" migrate "{\"uri\": \"file:$d/vm.state\"}" > /dev/null
st=$(migrate_wait src)
[ "$st" = completed ] || fail "migrate file: $st (log: $srclog)"
log "file: saved, $(migrate_info src)"
qmp "$d/qmp-src.sock" quit > /dev/null || true
wait "$src" || true
if [ "$full" = 1 ]; then
# One byte inside the device's first object record (past its header).
badv=$(python3 - "$d/vm.state" "$d/bad.state" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
at = b.find(b"PVRDMAS1")
assert at >= 0, "no pvrdma device state in the file"
b[at + 8] ^= 0x7f          # the format version
open(sys.argv[2], "wb").write(b)
print(b[at + 8])
PY
)
start badf "$(free_port)" -q -incoming -q defer
badf=$pid
qmp "$d/qmp-badf.sock" migrate-incoming "{\"uri\": \"file:$d/bad.state\"}" \
    > /dev/null || true
wait "$badf" || true
grep -q "pvrdma: the saved device state is invalid: device state version $badv," \
    "$d/badf.err" ||
    fail "a corrupted device state was not refused with the device's message ($d/badf.err)"
fi
port=$(free_port)
start restore "$port" -q -incoming -q defer
restore=$pid
qmp "$d/qmp-restore.sock" migrate-incoming \
    "{\"uri\": \"file:$d/vm.state\"}" > /dev/null
tell restore "$restore" "$port"
finish restore "$restore"
# ---- snapshot: savevm with the traffic running, -loadvm in a new QEMU ----
if [ "$full" = 1 ]; then
rm -f "$d/snap.qcow2"
qemu-img create -q -f qcow2 "$d/snap.qcow2" 64M ||
    fail "qemu-img create failed (scripts/install-deps.sh installs qemu-utils)"
snap=(-q -drive -q "if=none,id=snap,file=$d/snap.qcow2,format=qcow2")
start src "$(free_port)" "${snap[@]}"
src=$pid
wait_traffic
# (after a whole round: the stream has run a while)
until grep -q '^round 1 ok' "$srclog" 2> /dev/null; do
    kill -0 "$src" 2> /dev/null || fail "the source guest stopped (log: $srclog)"
    sleep 0.2
done
out=$(qmp "$d/qmp-src.sock" human-monitor-command \
      '{"command-line": "savevm pvrdma-snap"}')
[ "$out" = '""' ] || fail "savevm: $out"
qmp "$d/qmp-src.sock" query-status | grep -q '"running"' ||
    fail "the VM did not go on after savevm"
log "snapshot: saved with the traffic running"
qmp "$d/qmp-src.sock" quit > /dev/null || true
wait "$src" || true
port=$(free_port)
start loadvm "$port" "${snap[@]}" -q -loadvm -q pvrdma-snap
tell loadvm "$pid" "$port"
finish loadvm "$pid"
fi
trap - EXIT
what="ping-pongs, ib_write_bw, NVMe over RDMA I/O and rc_verify"
[ "$provider" = ours ] || what="ping-pongs, ib_write_bw and NVMe over RDMA I/O (the stock provider)"
[ "$driver" = ours ] || what="ping-pongs, ib_write_bw and NVMe over RDMA I/O (the upstream vmw_pvrdma driver, $provider provider)"
if [ "$full" = 1 ]; then
    pass "one VM moved with RDMA WRITEs streaming and $what running: over a unix socket (after a destination with other properties refused it, a cancelled migration and a killed destination, the source going on each time) to a device in an IOThread, through a file from a device in an IOThread (a corrupted copy refused) and as a snapshot restored with -loadvm; the traffic went on after each switch, data checked"
else
    io_where=" to a device in an IOThread" io_from=" from one"
    [ ${#io[@]} -gt 0 ] || io_where= io_from=
    pass "one VM moved with RDMA WRITEs streaming and $what running: over a unix socket$io_where and through a file (-incoming defer)$io_from; the traffic went on after each switch, data checked"
fi
