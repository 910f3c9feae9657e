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
