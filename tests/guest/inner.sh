# Guest-side helper (busybox sh) of an outer guest that runs our QEMU
# (packed by tests/guest/nested.sh):
#   inner_run NAME IP MEM_MB TIMEOUT [DEVICE_OPTS]
# boots the inner guest (its command came with the bundle) with guest RAM
# from a shared memory backend, a user-mode NIC on IP's /24 (the outer
# guest is reachable as .1 of it) and -device pvrdma,backend=ibverbs,
# ibdev=rxe0 plus DEVICE_OPTS; its console is shown prefixed [NAME] and
# kept in /tmp/NAME.log. Returns 0 if the inner command exited 0.
# $INNER_QEMU_ARGS: more QEMU arguments (e.g. "-d guest_errors");
# $INNER_NET_OPTS: more -netdev user options (",hostfwd=...").
inner_run() {
    local name=$1 ip=$2 mem=$3 limit=$4 opts=$5 net st
    net=${ip%.*}
    echo "=== inner guest $name: $ip, ${mem} MiB, backend=ibverbs,ibdev=rxe0$opts"
    LD_LIBRARY_PATH=/usr/lib/nested timeout "$limit" \
        qemu-system-x86_64 -M pc -accel tcg -smp 1 -m "$mem" -nodefaults \
        -vga none -display none -no-reboot -L /usr/share/nested-fw \
        -object "memory-backend-memfd,id=ram,size=${mem}M,share=on" \
        -machine memory-backend=ram \
        -kernel /nested/vmlinuz -initrd /nested/initrd \
        -append "console=ttyS0 panic=-1 quiet loglevel=4 pvrdma.ip=$ip/24" \
        -netdev "user,id=n0,net=$net.0/24,host=$net.1$INNER_NET_OPTS" \
        -device virtio-net-pci,netdev=n0,romfile= \
        -device "pvrdma,backend=ibverbs,ibdev=rxe0$opts" \
        $INNER_QEMU_ARGS -serial stdio </dev/null 2>&1 | tr -d '\r' | tee "/tmp/$name.log" |
        sed "s/^/[$name] /"
    st=$(sed -n 's/^PVRDMA-GUEST-EXIT-STATUS=\([0-9]*\).*/\1/p' "/tmp/$name.log" | tail -n 1)
    [ "$st" = 0 ]
}
