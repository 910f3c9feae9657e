# Guest-side helper (busybox sh) for NVMe over RDMA with the kernel's own
# target and host (no nvme-cli, no nvmetcli: configfs and /dev/nvme-fabrics):
#   nvmeof_target IP     export a 16 MiB RAM disk (brd) as testnqn on IP:4420
#   nvmeof_target_down   remove it again
#   nvmeof_connect IP    connect; NVME_DEV is the controller (nvmeN)
#   nvmeof_host IP       connect, write 4 MiB of random data, drop the page
#                        cache, read it back and compare; disconnect
#   nvme_io DEV N        on the connected namespace DEV (nvmeN), write 1 MiB
#                        of fresh random data at the N-th of 15 places,
#                        drop the page cache, read it back and compare
#                        (status only: a test's rounds call it)
#   dmesg_mark, dmesg_clean [WORDS]
#                        fail on errors of NVMe, NFS or RDMA (or of the
#                        extended regex WORDS) logged in between
# Each calls fail() (pair.sh or sync.sh) on any error; the caller checks
# the target's RAM disk itself where it can (same guest).
NQN=testnqn
CFS=/sys/kernel/config/nvmet

nvmeof_target() {
    modprobe brd rd_nr=1 rd_size=16384 || fail "modprobe brd"
    modprobe nvmet_rdma || fail "modprobe nvmet_rdma"
    grep -q " /sys/kernel/config " /proc/mounts ||
        mount -t configfs configfs /sys/kernel/config ||
        fail "cannot mount configfs"
    mkdir $CFS/subsystems/$NQN &&
        echo 1 > $CFS/subsystems/$NQN/attr_allow_any_host &&
        mkdir $CFS/subsystems/$NQN/namespaces/1 &&
        echo -n /dev/ram0 > $CFS/subsystems/$NQN/namespaces/1/device_path &&
        echo 1 > $CFS/subsystems/$NQN/namespaces/1/enable &&
        mkdir $CFS/ports/1 &&
        echo rdma > $CFS/ports/1/addr_trtype &&
        echo ipv4 > $CFS/ports/1/addr_adrfam &&
        echo "$1" > $CFS/ports/1/addr_traddr &&
        echo 4420 > $CFS/ports/1/addr_trsvcid &&
        ln -s $CFS/subsystems/$NQN $CFS/ports/1/subsystems/$NQN ||
        fail "nvmet: configuring the target failed"
    echo "nvmet: $NQN on $1:4420 (rdma), namespace 1 = /dev/ram0"
}

nvmeof_target_down() {
    rm $CFS/ports/1/subsystems/$NQN && rmdir $CFS/ports/1 &&
        echo 0 > $CFS/subsystems/$NQN/namespaces/1/enable &&
        rmdir $CFS/subsystems/$NQN/namespaces/1 &&
        rmdir $CFS/subsystems/$NQN || fail "nvmet: teardown failed"
    echo "nvmet: target removed"
}

# nvmeof_connect IP: connect the host to the target; NVME_DEV names the
# controller (nvmeN) once its namespace block device is there.
nvmeof_connect() {
    local i
    modprobe nvme_rdma || fail "modprobe nvme_rdma"
    echo "transport=rdma,traddr=$1,trsvcid=4420,nqn=$NQN" \
        > /dev/nvme-fabrics || fail "nvme-rdma: connect to $1 failed"
    for i in 1 2 3 4 5 6 7 8 9 10; do
        NVME_DEV=$(for d in /sys/class/nvme/nvme*; do
                       [ "$(cat "$d/subsysnqn" 2>/dev/null)" = $NQN ] &&
                           basename "$d"; done | head -1)
        [ -n "$NVME_DEV" ] && [ -b "/dev/${NVME_DEV}n1" ] && break
        sleep 1
    done
    [ -b "/dev/${NVME_DEV}n1" ] || fail "nvme-rdma: no namespace block device"
}

nvmeof_host() {
    local dev
    nvmeof_connect "$1"
    dev=$NVME_DEV
    echo "nvme-rdma: $dev connected, $(cat /sys/block/${dev}n1/size) sectors"
    dd if=/dev/urandom of=/tmp/nvme.data bs=65536 count=64 2>/dev/null &&
        dd if=/tmp/nvme.data of=/dev/${dev}n1 bs=65536 count=64 conv=fsync \
            2>/dev/null || fail "nvme-rdma: write failed"
    echo 3 > /proc/sys/vm/drop_caches
    dd if=/dev/${dev}n1 of=/tmp/nvme.back bs=65536 count=64 2>/dev/null ||
        fail "nvme-rdma: read failed"
    cmp /tmp/nvme.data /tmp/nvme.back ||
        fail "nvme-rdma: the data read back differs"
    echo "nvme-rdma: 4 MiB written and read back equal ($(md5sum < /tmp/nvme.data | cut -c1-32))"
    echo 1 > /sys/class/nvme/$dev/delete_controller ||
        fail "nvme-rdma: disconnect failed"
    echo "nvme-rdma: $dev disconnected"
}

# Kernel messages of the storage and RDMA stacks, since dmesg_mark, that
# mean something broke.
dmesg_mark() {
    DMESG_MARK=$(dmesg | wc -l)
}

dmesg_clean() {
    if dmesg | tail -n +$((DMESG_MARK + 1)) |
       grep -iE "${1:-nvme|nfs|rpc|rdma}" |
       grep -iE "error|fail|timeout|timed out|reset|warn"; then
        fail "kernel reported errors (above)"
    fi
}

nvme_io() {
    dd if=/dev/urandom of=/tmp/nvme.data bs=65536 count=16 2> /dev/null &&
        dd if=/tmp/nvme.data of="/dev/${1}n1" bs=65536 count=16 \
            seek=$(($2 % 15 * 16)) conv=fsync 2> /dev/null &&
        echo 3 > /proc/sys/vm/drop_caches &&
        dd if="/dev/${1}n1" of=/tmp/nvme.back bs=65536 count=16 \
            skip=$(($2 % 15 * 16)) 2> /dev/null &&
        cmp /tmp/nvme.data /tmp/nvme.back
}
