#!/usr/bin/env bash
# Bring-up: a guest with -device pvrdma (non-default limits) loads our
# module; ibv_devinfo -v shows the port ACTIVE on Ethernet with exactly the
# limits the device was given; `rdma link` lists it; user space allocates
# PDs; the module unloads and reloads cleanly and the device works again.
. "$(dirname "$0")/lib.sh"

props=",max-qp=500,max-cq=300,max-pd=100,max-mr=200,max-srq=50"
pd_alloc=$(build_prog pd_alloc)
# The QEMU scripts/vm.sh boots (PVRDMA_QEMU: another build).
qemu=${PVRDMA_QEMU:-$PVRDMA_OUT/qemu-system-x86_64}

# Errors a person sees: a bad property is refused with its name and range.
if out=$("$qemu" -M pc -nodefaults -accel tcg -L /usr/share/qemu -L /usr/share/seabios \
         -device pvrdma,max-qp=70000 \
         -display none 2>&1); then
    fail "QEMU accepted max-qp=70000"
fi
echo "$out" | grep -q "max-qp" || fail "unclear error for max-qp=70000: $out"
pass "bad property refused: $out"
if out=$("$qemu" -M pc -nodefaults -accel tcg -L /usr/share/qemu -L /usr/share/seabios \
         -device pvrdma,backend=bogus \
         -display none 2>&1); then
    fail "QEMU accepted backend=bogus"
fi
echo "$out" | grep -q "backend=bogus is not known: use backend=fabric" ||
    fail "unclear error for backend=bogus: $out"
pass "unknown backend refused: $out"
# Fabric properties: each mistake is named, with what to do.
refused() { # PROPS EXPECTED-TEXT [QEMU-ARG...]
    local out props=$1 text=$2
    shift 2
    if out=$("$qemu" -M pc -nodefaults -accel tcg \
             -L /usr/share/qemu -L /usr/share/seabios "$@" \
             -device "pvrdma,$props" -display none 2>&1 </dev/null); then
        fail "QEMU accepted $props"
    fi
    echo "$out" | grep -qE "$text" || fail "unclear error for $props: $out"
    pass "refused $props: $out"
}
refused fabric-path=/nonexistent/dir "is not a writable directory \(No such file or directory\): create it"
# A fabric directory on a read-only or a full file system, or a file
# (host resources: each says what to do; tmpfs mounts, so root).
fs=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-fs.XXXXXX")
trap 'umount "$fs/ro" "$fs/full" 2> /dev/null; rm -rf "$fs"' EXIT
mkdir "$fs/ro" "$fs/full" && touch "$fs/file" &&
    mount -t tmpfs -o ro,size=1m none "$fs/ro" &&
    mount -t tmpfs -o size=64k,nr_inodes=2 none "$fs/full" &&
    touch "$fs/full/taken" ||
    fail "cannot mount the test file systems (needs root)"
refused fabric-path="$fs/ro" "\(Read-only file system\): mount its file system read-write"
refused fabric-path="$fs/full" "No space left on device; the file system is full"
refused fabric-path="$fs/file" "\(Not a directory\): choose a directory"
refused fabric-listen=no-port "is not HOST:PORT"
refused fabric-listen=127.0.0.1:7471,fabric-allow-uid=0 "give fabric-path too"
refused fabric-path=/tmp,fabric-allow-uid=no-such-user-x "'no-such-user-x' is not a user of this host"
refused fabric-listen=192.0.2.1:7471 "is the address local, and the port free\?"
# The host verbs backend (docs/ibverbs.md): what is missing, and the fix.
refused backend=ibverbs "needs ibdev=NAME, the host RDMA device"
refused backend=ibverbs,ibdev=x,fabric-path=/tmp "belong to backend=fabric"
refused ibdev=x "belong to backend=ibverbs"
refused cm-ports=7174 "belong to backend=ibverbs"
refused backend=ibverbs,ibdev=x,iothread=io0 \
    "iothread= is not supported with backend=ibverbs" \
    -object iothread,id=io0
refused iothread=nosuch "nosuch"
for bad in 0 70000 7174:x 7174::4420; do
    refused backend=ibverbs,ibdev=x,cm-ports=$bad \
        "cm-ports=$bad: give up to 16 port numbers separated by ':'" \
        -m 128 -object memory-backend-memfd,id=ram,size=128M,share=on \
        -machine memory-backend=ram
done
refused backend=ibverbs,ibdev=x \
    "needs it shared: add -object memory-backend-memfd,id=ram,size=SIZE,share=on"
refused backend=ibverbs,ibdev=pvrdma-test-none \
    "ibdev=pvrdma-test-none: (this host has no RDMA device.*rdma link add pvrdma-test-none type rxe|no such host RDMA device; this host has: )" \
    -m 128 -object memory-backend-memfd,id=ram,size=128M,share=on \
    -machine memory-backend=ram

# A client that floods a fabric-listen port (docs/fabric.md, "Hostile
# input"): each link comes up and goes down, but QEMU's log gets at most
# 10 lines a second of each, and one line per second saying how many it
# held back; silent connections are bounded (64 wait, a newer one closes
# the oldest) and closed after 10 s without a HELLO, trickling or not.
flood=$TESTS_TOP/tests/guest/fabric_flood.py
fport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
fqmp=$TEST_OUT/flood.qmp fout=$TEST_OUT/flood.log
rm -f "$fqmp"
"$qemu" -M pc -nodefaults -accel tcg -L /usr/share/qemu -L /usr/share/seabios \
    -device "pvrdma,fabric-listen=127.0.0.1:$fport" -display none \
    -qmp "unix:$fqmp,server=on,wait=off" > "$fout" 2>&1 &
fpid=$!
trap 'kill $fpid 2> /dev/null || true; umount "$fs/ro" "$fs/full" 2> /dev/null; rm -rf "$fs"' EXIT
info_pvrdma() {
    python3 "$TESTS_TOP/tests/guest/qmp.py" "$fqmp" human-monitor-command \
        '{"command-line": "info pvrdma"}'
}
# said PATTERN: QEMU's log lines matching it; held CAUSE: the sum of what
# the log said it held back of that cause.
said() { grep -cE "$1" "$fout" || true; }
held() {
    sed -n "s/.*pvrdma-fabric: \([0-9]*\) more messages about $1 in the last second.*/\1/p" "$fout" |
        awk '{ n += $1 } END { print n + 0 }'
}
for _ in $(seq 100); do
    info_pvrdma > /dev/null 2>&1 && break
    sleep 0.2
done
info_pvrdma > /dev/null || fail "QEMU with fabric-listen did not start: $(cat "$fout")"
secs=$(python3 "$flood" "127.0.0.1:$fport" flood 40) ||
    fail "the flood client failed"
# What was held back is said when its second ends: wait for it.
for _ in $(seq 150); do
    [ $(( $(said 'pvrdma-fabric: link .* up$') + $(held "links up") )) -eq 40 ] &&
        [ $(( $(said 'pvrdma-fabric: link .* down: ') + $(held "links down") )) -eq 40 ] &&
        break
    sleep 0.2
done
up=$(said 'pvrdma-fabric: link .* up$') down=$(said 'pvrdma-fabric: link .* down: ')
[ $((up + $(held "links up"))) -eq 40 ] && [ $((down + $(held "links down"))) -eq 40 ] ||
    fail "40 links up and down, but the log shows $up up and $down down lines and says it held back $(held "links up") and $(held "links down"): $(cat "$fout")"
# At most 10 a second: the flood took $secs s, so it touched at most
# ceil(secs) + 1 windows of a second.
most=$(( (${secs%.*} + 2) * 10 ))
[ "$up" -le "$most" ] && [ "$down" -le "$most" ] ||
    fail "$up up and $down down lines for a flood of $secs s (at most $most)"
info_pvrdma | grep -q "messages not shown $(( 80 - up - down )), " ||
    fail "info pvrdma does not count the $(( 80 - up - down )) lines held back: $(info_pvrdma)"
pass "40 connections with garbage in $secs s: $up up and $down down lines, the rest counted"
python3 "$flood" "127.0.0.1:$fport" silent 70 20 &
spid=$!
for _ in $(seq 200); do
    info_pvrdma | grep -q "for newer ones, 64 after 10 s" && break
    sleep 0.2
done
wait $spid
info_pvrdma | grep -q "links closed before their HELLO: 7 for newer ones, 64 after 10 s" ||
    fail "71 silent connections (one trickling): not 7 closed for newer ones and 64 after 10 s: $(info_pvrdma)"
kill $fpid
wait $fpid 2> /dev/null || true
pass "71 silent connections (one trickling its HELLO): 64 kept at most, each closed after 10 s"

# fabric-path admits QEMUs of its own user only (SO_PEERCRED), unless
# fabric-allow-uid / fabric-allow-gid name others: a QEMU run as nobody
# beside one run as root, without and with them (docs/fabric.md,
# "Isolation"). nobody runs a copy of QEMU (root's cache is closed to it).
udir=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-uid.XXXXXX")
chmod 755 "$udir" && mkdir -m 1777 "$udir/fab" "$udir/q" &&
    cp "$(readlink -f "$qemu")" "$udir/qemu" || fail "cannot set up $udir"
trap 'kill $fpid $upids 2> /dev/null || true; umount "$fs/ro" "$fs/full" 2> /dev/null; rm -rf "$fs" "$udir"' EXIT
upids=
# uid_qemu NAME WRAP PROPS: a QEMU (under WRAP) on the shared directory,
# its QMP socket $udir/q/NAME, its log $udir/NAME.log.
uid_qemu() {
    rm -f "$udir/q/$1"
    $2 "$udir/qemu" -M pc -nodefaults -accel tcg -L /usr/share/qemu \
        -L /usr/share/seabios -display none \
        -device "pvrdma,fabric-path=$udir/fab$3" \
        -qmp "unix:$udir/q/$1,server=on,wait=off" > "$udir/$1.log" 2>&1 &
    upids="$upids $!"
    for _ in $(seq 100); do
        uid_info "$1" > /dev/null 2>&1 && return 0
        sleep 0.2
    done
    fail "QEMU $1 did not start: $(cat "$udir/$1.log")"
}
uid_info() {
    python3 "$TESTS_TOP/tests/guest/qmp.py" "$udir/q/$1" \
        human-monitor-command '{"command-line": "info pvrdma"}'
}
nobody="setpriv --reuid=65534 --regid=65534 --clear-groups"
uid_qemu other "$nobody" ""
uid_qemu own "" ""
for _ in $(seq 100); do
    uid_info own | grep -q "links refused for their user: 1" && break
    sleep 0.2
done
uid_info own | grep -q "links refused for their user: 1" ||
    fail "root's QEMU did not refuse nobody's: $(uid_info own)"
grep -q "not linking to $udir/fab/.*runs as uid 65534, not as this QEMU (uid 0); to join it, give this QEMU fabric-allow-uid=65534" "$udir/own.log" ||
    fail "root's QEMU does not say why it refused nobody's: $(cat "$udir/own.log")"
uid_info own | grep -q "no links" && uid_info other | grep -q "no links" ||
    fail "a link between the QEMUs of two users: $(uid_info own) $(uid_info other)"
kill $upids
wait $upids 2> /dev/null || true
upids=
pass "fabric-path: a QEMU of another user is refused: $(grep -o 'not linking.*' "$udir/own.log")"
rm -f "$udir"/fab/*
uid_qemu other "$nobody" ",fabric-allow-uid=root"
uid_qemu own "" ",fabric-allow-uid=65534"
for _ in $(seq 100); do
    uid_info own | grep -q ": shm, up" && uid_info other | grep -q ": shm, up" && break
    sleep 0.2
done
uid_info own | grep -q ": shm, up" && uid_info other | grep -q ": shm, up" ||
    fail "fabric-allow-uid on both: no link: $(uid_info own) $(uid_info other)"
kill $upids
wait $upids 2> /dev/null || true
upids=
pass "fabric-allow-uid on both QEMUs: their link is up"

guest_script=$TEST_OUT/bringup-guest.sh
cat > "$guest_script" <<'GUEST'
fail() { echo "GUEST-FAIL: $*"; exit 1; }
check_devinfo() {
    ibv_devinfo -v > /tmp/devinfo || fail "ibv_devinfo failed"
    cat /tmp/devinfo
    for kv in "hca_id pvrdma0" "state PORT_ACTIVE" "link_layer Ethernet" \
        "max_qp 500" "max_cq 300" "max_pd 100" "max_mr 200" "max_srq 50" \
        "phys_port_cnt 1"; do
        set -- $kv
        grep -qE "^[[:space:]]*$1:[[:space:]]+$2" /tmp/devinfo ||
            fail "ibv_devinfo -v does not show $1: $2"
    done
    grep -qE "GID\[ *0\]:" /tmp/devinfo || fail "no GID in ibv_devinfo -v"
}
grep -l 0x0820 /sys/bus/pci/devices/*/device || fail "no 15ad:0820 device"
lsmod | grep -q '^pvrdma ' || fail "pvrdma.ko is not loaded"
check_devinfo
rdma link show | tee /tmp/link
grep -q "pvrdma0/1 state ACTIVE" /tmp/link || fail "rdma link: port not ACTIVE"
./pd_alloc pvrdma 8 || fail "PD allocation failed"
rmmod pvrdma || fail "rmmod pvrdma failed"
[ -z "$(ls /sys/class/infiniband 2>/dev/null)" ] || fail "device left after rmmod"
ibv_devices
modprobe pvrdma || fail "modprobe pvrdma (reload) failed"
sleep 1
check_devinfo
./pd_alloc pvrdma 8 || fail "PD allocation after reload failed"
dmesg | grep -iE "pvrdma|BUG|WARNING|Oops" | tail -n 20
dmesg | grep -qE "BUG|WARNING:|Oops" && fail "kernel warnings in dmesg"
echo "GUEST-OK"
GUEST

scripts=$PVRDMA_TOP/scripts
"$scripts/vm.sh" --name "$TEST_NAME" --timeout 300 --device "$props" \
    --add "$pd_alloc" --add "$guest_script" -- sh ./bringup-guest.sh ||
    fail "guest test failed (status $?), see $PVRDMA_OUT/vm/$TEST_NAME.log"
grep -q GUEST-OK "$PVRDMA_OUT/vm/$TEST_NAME.log" || fail "guest did not finish"
pass "device visible, port ACTIVE, caps as configured, PDs allocated, reload works"
