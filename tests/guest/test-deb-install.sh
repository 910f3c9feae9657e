#!/usr/bin/env bash
# The packages of `make deb` in a stock Debian 12 guest: a dpkg-managed root
# (scripts/build-deb-guest.sh) with Debian's own rdma-core 44 (including
# the stock vmw_pvrdma provider), dkms, gcc, make and the booted kernel's
# headers, without our module or provider. In the guest: `apt install
# ./*.deb` (offline), dkms builds and installs pvrdma.ko, modprobe, the
# device shows up through OUR provider (the library a verbs process has
# mapped), ibv_rc_pingpong -c between two processes; then removing the
# packages gives the stock provider back untouched and it still works.
# PVRDMA_DEB_KERNEL_HOOK=1 also runs dkms's kernel postinst hook (what a
# kernel upgrade runs) and checks that it rebuilds the module.
. "$(dirname "$0")/lib.sh"

SECONDS=0
guest=$("$PVRDMA_TOP/scripts/build-deb-guest.sh" "$PVRDMA_OUT/kernel") ||
    fail "cannot build the Debian 12 guest"
prep_guest=$SECONDS
mapfile -t debs < <("$PVRDMA_TOP/scripts/build-debs.sh") ||
    fail "make deb failed"
[ ${#debs[@]} -eq 2 ] || fail "build-debs.sh printed ${#debs[@]} packages, want 2"
rm -rf "$TEST_OUT/debs" && mkdir -p "$TEST_OUT/debs"
cp "${debs[@]}" "$TEST_OUT/debs/"
prep=$SECONDS
hook=()
if [ "${PVRDMA_DEB_KERNEL_HOOK:-}" = 1 ]; then
    touch "$TEST_OUT/kernel-hook"
    hook=(--add "$TEST_OUT/kernel-hook")
fi

cat > "$TEST_OUT/guest.sh" <<'GUEST'
. ./pair.sh
pdir=/usr/lib/x86_64-linux-gnu/libibverbs
stock=$pdir/libvmw_pvrdma-rdmav34.so
diverted=$pdir/libvmw_pvrdma-stock-rdmav34.so

# provider_of NAME SERVER-CMD: start a verbs server, report which pvrdma
# provider library it mapped (ours, stock), stop it.
provider_of() {
    $2 > "/tmp/$1.probe" 2>&1 &
    pid=$!
    sleep 2
    if grep -q '/libpvrdma-rdmav34\.so' "/proc/$pid/maps"; then
        echo ours
    elif grep -q '/libvmw_pvrdma' "/proc/$pid/maps"; then
        echo stock
    else
        echo none
    fi
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# Stock Debian 12: the distribution's rdma-core, nothing of ours.
dpkg-query -W libibverbs1 ibverbs-providers ibverbs-utils rdma-core dkms
[ ! -e /etc/libibverbs.d/pvrdma.driver ] || fail "our provider is preinstalled"
[ -z "$(dkms status pvrdma)" ] || fail "our module is preinstalled"
modinfo pvrdma >/dev/null 2>&1 && fail "a pvrdma module is already there"
stock_sum=$(md5sum < "$stock")

echo "=== apt install ./debs/*.deb"
t0=$(date +%s)
apt-get install -y -q -o Dpkg::Progress-Fancy=0 ./debs/*.deb || fail "apt install failed"
t1=$(date +%s)
echo "=== install (dkms build) took $((t1 - t0)) s"
dkms status pvrdma
dkms status pvrdma | grep -q "$(uname -r).*: installed" ||
    fail "dkms did not install pvrdma for $(uname -r)"
modinfo -n pvrdma | grep -q /updates/dkms/ || fail "pvrdma.ko is not dkms's"
modinfo pvrdma | grep -q '^alias: *pci:v000015ADd00000820' ||
    fail "pvrdma.ko lacks the device's PCI alias"
grep -q '^#blacklist vmw_pvrdma' /etc/modprobe.d/pvrdma.conf ||
    fail "/etc/modprobe.d/pvrdma.conf missing or blacklisting"
dpkg-divert --list | grep -F "$stock" || fail "no diversion of $stock"
[ "$(md5sum < "$diverted")" = "$stock_sum" ] ||
    fail "the stock provider library was changed"
[ "$(readlink "$stock")" = libpvrdma-rdmav34.so ] || fail "$stock is not ours"

modprobe pvrdma || fail "modprobe pvrdma"
zero=0000:0000:0000:0000:0000:0000:0000:0000
for i in $(seq 50); do
    g=$(cat /sys/class/infiniband/pvrdma0/ports/1/gids/1 2>/dev/null || true)
    [ -n "$g" ] && [ "$g" != "$zero" ] && break
    sleep 0.1
done
cat /sys/class/infiniband/pvrdma0/ports/1/gids/1
ibv_devices | tee /tmp/devices
grep -q pvrdma0 /tmp/devices || fail "ibv_devices does not list pvrdma0"
ibv_devinfo -d pvrdma0 | tee /tmp/devinfo
grep -q PORT_ACTIVE /tmp/devinfo || fail "pvrdma0's port is not active"
p=$(provider_of ours "ibv_rc_pingpong -d pvrdma0 -g 1 -n 5")
[ "$p" = ours ] || fail "the provider loaded is '$p', not ours"
echo "=== provider in use: ours (libpvrdma-rdmav34.so)"
pair rc_pingpong 120 "ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c" \
    "ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c 127.0.0.1"
grep -q "200 iters" /tmp/rc_pingpong.cli || fail "no iteration count in the client's output"

# Optional (PVRDMA_DEB_KERNEL_HOOK=1, one more dkms build, about a minute):
# what a kernel upgrade runs, dkms's kernel postinst hook, builds and
# installs pvrdma for a kernel that lacks it (AUTOINSTALL=yes).
if [ -e ./kernel-hook ]; then
    echo "=== dkms's kernel postinst hook"
    ver=$(dpkg-query -W -f='${Version}' pvrdma-dkms)
    dkms unbuild -m pvrdma -v "$ver" -k "$(uname -r)" || fail "dkms unbuild -k"
    [ ! -e "/lib/modules/$(uname -r)/updates/dkms/pvrdma.ko" ] ||
        fail "pvrdma.ko still there after dkms unbuild -k"
    /etc/kernel/postinst.d/dkms "$(uname -r)" || fail "the kernel hook failed"
    dkms status pvrdma | grep -q "$(uname -r).*: installed" ||
        fail "the kernel hook did not rebuild pvrdma"
    echo "=== the kernel hook rebuilt pvrdma"
fi

# Removal: the stock provider back under its name, unchanged, and in use.
echo "=== dpkg --purge"
dpkg --purge ibverbs-provider-pvrdma pvrdma-dkms || fail "dpkg --purge failed"
dpkg-divert --list | grep -F "$stock" && fail "the diversion is still there"
[ -f "$stock" ] && [ ! -L "$stock" ] || fail "$stock was not restored"
[ "$(md5sum < "$stock")" = "$stock_sum" ] || fail "the restored stock provider differs"
[ ! -e /etc/libibverbs.d/pvrdma.driver ] || fail "pvrdma.driver left behind"
[ -z "$(dkms status pvrdma)" ] || fail "dkms still has pvrdma"
[ ! -e "/lib/modules/$(uname -r)/updates/dkms/pvrdma.ko" ] || fail "pvrdma.ko left behind"
p=$(provider_of stock "ibv_rc_pingpong -d pvrdma0 -g 1 -n 5")
[ "$p" = stock ] || fail "after removal the provider is '$p', not the stock one"
pair rc_pingpong_stock 120 "ibv_rc_pingpong -d pvrdma0 -g 1 -n 20 -c" \
    "ibv_rc_pingpong -d pvrdma0 -g 1 -n 20 -c 127.0.0.1"
echo GUEST-OK
GUEST

# The guest's own initramfs (mounts the image, switch_root), vm.sh's files.
PVRDMA_INITRD=$guest/initrd.cpio.gz \
"$PVRDMA_TOP/scripts/vm.sh" --name "$TEST_NAME" --timeout 900 --smp 2 \
    --qemu-arg -drive \
    --qemu-arg "file=$guest/root.ext4,format=raw,if=virtio,snapshot=on" \
    --add "$TESTS_TOP/tests/guest/pair.sh" --add "$TEST_OUT/debs" \
    --add "$TEST_OUT/guest.sh" "${hook[@]}" \
    -- sh ./guest.sh < /dev/null ||
    fail "see $PVRDMA_OUT/vm/$TEST_NAME.log"
grep -q '^GUEST-OK' "$PVRDMA_OUT/vm/$TEST_NAME.log" || fail "guest script did not finish"
pass "make deb packages in stock Debian 12: dkms build, our provider, ibv_rc_pingpong -c; removal restores the stock provider (prep ${prep}s of which guest ${prep_guest}s, total ${SECONDS}s)"
