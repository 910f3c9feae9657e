#!/usr/bin/env bash
# ABI check from the other side: the upstream Linux vmw_pvrdma driver, as
# Debian 12 ships its source (linux-source-6.1) but does not build it,
# unmodified, against our device. It requires a vmxnet3 NIC at function 0
# of the slot. With it: the port is ACTIVE, ibv_rc_pingpong and ib_write_bw
# pass through our provider and through rdma-core's stock one, and our
# kernel verbs test passes.
. "$(dirname "$0")/lib.sh"
kver=$(basename "$(readlink -f "$PVRDMA_OUT/kernel")")

# The driver's source, cached by package version; built like any
# out-of-tree module. Nothing of it is kept in this repository.
pkgver=$(apt-cache policy linux-source-6.1 | sed -n 's/^ *Candidate: //p')
[ -n "$pkgver" ] && [ "$pkgver" != "(none)" ] ||
    fail "linux-source-6.1 is not available from apt"
src=$PVRDMA_CACHE/stock-driver/$pkgver
if [ ! -e "$src/.done" ]; then
    rm -rf "$src" && mkdir -p "$src/deb"
    fetch_deb "$src/deb" linux-source-6.1
    dpkg-deb --fsys-tarfile "$src"/deb/linux-source-6.1_*.deb |
        tar -x -C "$src" --wildcards './usr/src/linux-source-6.1.tar.*'
    tar -xf "$src"/usr/src/linux-source-6.1.tar.* -C "$src" \
        linux-source-6.1/drivers/infiniband/hw/vmw_pvrdma
    rm -rf "$src/deb" "$src/usr"
    touch "$src/.done"
fi
drv=$TEST_OUT/vmw_pvrdma
rm -rf "$drv" && cp -r "$src/linux-source-6.1/drivers/infiniband/hw/vmw_pvrdma" "$drv"
make -s -C "/usr/src/linux-headers-$kver" M="$drv" \
    CONFIG_INFINIBAND_VMWARE_PVRDMA=m modules >&2 ||
    fail "cannot build the upstream vmw_pvrdma driver"
kmod=$TESTS_TOP/tests/guest/kmod
make -s -C "$kmod" KVER="$kver" >&2 || fail "cannot build the test module"

cat > "$TEST_OUT/guest.sh" <<'GUEST'
. ./pair.sh
vmx=
for n in /sys/class/net/*; do
    [ "$(basename "$(readlink -f "$n/device/driver" 2>/dev/null)")" = vmxnet3 ] &&
        vmx=$(basename "$n")
done
[ -n "$vmx" ] || fail "no vmxnet3 netdev"
ip addr add 10.0.3.15/24 dev "$vmx"
ip link set "$vmx" up
lsmod | grep -q '^pvrdma ' && fail "our driver is loaded"
insmod ./vmw_pvrdma.ko || fail "insmod vmw_pvrdma.ko"
# The port comes up and the address's GID is added after insmod returns.
devinfo_ready() {
    ibv_devinfo -v > /tmp/devinfo 2>&1 && grep -q PORT_ACTIVE /tmp/devinfo &&
        grep -q "::ffff:10.0.3.15" /tmp/devinfo
}
wait_for 30 devinfo_ready || echo "(vmw_pvrdma0 not ready after 30 s)"
ibv_devinfo -v > /tmp/devinfo || fail "ibv_devinfo"
grep -E "hca_id|state:|link_layer|fw_ver|GID" /tmp/devinfo
grep -q "hca_id:	vmw_pvrdma0" /tmp/devinfo || fail "no vmw_pvrdma0"
grep -q "PORT_ACTIVE" /tmp/devinfo || fail "port not ACTIVE"
gid=$(grep -n "::ffff:10.0.3.15" /tmp/devinfo | head -n 1 |
      sed 's/.*GID\[ *\([0-9]*\)\].*/\1/')
[ -n "$gid" ] || fail "no RoCE v2 GID for 10.0.3.15"
for provider in ours stock; do
    if [ $provider = stock ]; then
        mv /etc/libibverbs.d/pvrdma.driver /tmp/
        cp /usr/share/pvrdma/stock-provider/vmw_pvrdma.driver /etc/libibverbs.d/
    fi
    pair "rc_pingpong_$provider" 120 \
        "ibv_rc_pingpong -d vmw_pvrdma0 -g $gid -n 200 -c" \
        "ibv_rc_pingpong -d vmw_pvrdma0 -g $gid -n 200 -c 10.0.3.15"
    pair "ib_write_bw_$provider" 300 \
        "ib_write_bw -d vmw_pvrdma0 -x $gid -F -n 200" \
        "ib_write_bw -d vmw_pvrdma0 -x $gid -F -n 200 10.0.3.15"
    grep -qE "^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+" "/tmp/ib_write_bw_$provider.cli" ||
        fail "ib_write_bw printed no result row"
done
dmesg -c > /dev/null
insmod ./pvrdma_ktest.ko ibdev=vmw_pvrdma0 kernel_srq=0 kernel_uc=0 kernel_resize_cq=0 ||
    fail "insmod pvrdma_ktest"
rmmod pvrdma_ktest
dmesg | grep "ktest:" | tee /tmp/ktest
grep -q "ktest: RESULT passed=[1-9][0-9]* failed=0" /tmp/ktest ||
    fail "kernel verbs through vmw_pvrdma"
rmmod vmw_pvrdma || fail "rmmod vmw_pvrdma"
dmesg | grep -qE "BUG|WARNING:|Oops" && fail "kernel warnings in dmesg"
echo GUEST-OK
GUEST
"$PVRDMA_TOP/scripts/vm.sh" --name "$TEST_NAME" --timeout 600 --smp 2 \
    --pvrdma 0 --noload \
    --qemu-arg -netdev --qemu-arg user,id=vmx0,net=10.0.3.0/24 \
    --qemu-arg -device \
    --qemu-arg vmxnet3,netdev=vmx0,addr=0x6.0,multifunction=on,romfile= \
    --qemu-arg -device --qemu-arg pvrdma,addr=0x6.1 \
    --add "$drv/vmw_pvrdma.ko" --add "$kmod/pvrdma_ktest.ko" \
    --add "$TESTS_TOP/tests/guest/pair.sh" --add "$TEST_OUT/guest.sh" \
    -- sh ./guest.sh || fail "see $PVRDMA_OUT/vm/$TEST_NAME.log"
# A live migration (unix socket, then file) with the upstream driver and
# rdma-core's stock provider, as Ubuntu, Fedora, RHEL or SUSE guests run
# them, their processes running.
PVRDMA_MIGRATE_DRIVER=$drv/vmw_pvrdma.ko PVRDMA_MIGRATE_PROVIDER=stock \
    PVRDMA_MIGRATE_FULL=0 \
    PVRDMA_TEST_SUFFIX=-stockdrv \
    bash "$TESTS_TOP/tests/guest/test-migrate.sh" ||
    fail "a migration with the upstream driver failed"
pass "upstream vmw_pvrdma driver: port ACTIVE, ping-pong and ib_write_bw with both providers, kernel verbs, a live migration with traffic (driver and provider both stock)"
