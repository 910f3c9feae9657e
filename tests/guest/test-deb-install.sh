#!/usr/bin/env bash
# The packages of `make deb` in stock Debian guests, one after the other:
# Debian 12 (bookworm, rdma-core 44, dkms 3.0) on its 6.1 kernel
# (build/kernel, build/vmlinuz) and Debian 13 (trixie, rdma-core 56.1,
# dkms 3.2, gcc-14) on its 6.12 kernel (build/kernel-6.12,
# build/vmlinuz-6.12 from make kernel-6.12). Each is a dpkg-managed root
# (scripts/build-deb-guest.sh) with the distribution's own rdma-core
# (including the stock vmw_pvrdma provider), dkms, gcc, make and the
# booted kernel's headers, without our module or provider. In the guest:
# `apt install ./*.deb` (offline), dkms builds and installs pvrdma.ko,
# modprobe, the device shows up through OUR provider (the library a verbs
# process has mapped), ibv_rc_pingpong -c between two processes; then
# removing the packages gives the stock provider back untouched and it
# still works.
#
#   test-deb-install.sh [bookworm] [trixie]   (default: both)
#
# PVRDMA_DEB_KERNEL_HOOK=1 also runs dkms's kernel postinst hook (what a
# kernel upgrade runs) and checks that it rebuilds the module.
. "$(dirname "$0")/lib.sh"

dists=("$@")
[ ${#dists[@]} -gt 0 ] || dists=(bookworm trixie)
for d in "${dists[@]}"; do
    case $d in
    bookworm|trixie) ;;
    *) fail "unknown distribution '$d' (bookworm or trixie)" ;;
    esac
done

SECONDS=0
mapfile -t debs < <("$PVRDMA_TOP/scripts/build-debs.sh") ||
    fail "make deb failed"
[ ${#debs[@]} -eq 2 ] || fail "build-debs.sh printed ${#debs[@]} packages, want 2"
rm -rf "$TEST_OUT/debs" && mkdir -p "$TEST_OUT/debs"
cp "${debs[@]}" "$TEST_OUT/debs/"
prep_debs=$SECONDS
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
    listeners > "/tmp/$1.before"
    $2 > "/tmp/$1.probe" 2>&1 &
    pid=$!
    # The server opens the device, which loads the provider, before it
    # listens for its client.
    wait_listening "$pid" "/tmp/$1.before"
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

# dkms_ko: pvrdma's module in dkms's tree for the running kernel, as
# dkms left it (dkms 3.2 on a kernel with xz modules makes pvrdma.ko.xz).
dkms_ko() {
    ls "/lib/modules/$(uname -r)/updates/dkms/"pvrdma.ko* 2>/dev/null || true
}

# Stock Debian: the distribution's rdma-core, nothing of ours.
echo "=== $(. /etc/os-release; echo "$PRETTY_NAME"), kernel $(uname -r)"
dpkg-query -W libibverbs1 ibverbs-providers ibverbs-utils rdma-core dkms \
    "linux-headers-$(uname -r)"
[ ! -e /etc/libibverbs.d/pvrdma.driver ] || fail "our provider is preinstalled"
[ -z "$(dkms status pvrdma)" ] || fail "our module is preinstalled"
modinfo pvrdma >/dev/null 2>&1 && fail "a pvrdma module is already there"
stock_sum=$(md5sum < "$stock")

echo "=== apt install ./debs/*.deb"
t0=$(date +%s)
DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q -o Dpkg::Progress-Fancy=0 ./debs/*.deb || fail "apt install failed"
t1=$(date +%s)
echo "=== install (dkms build) took $((t1 - t0)) s"
dkms status pvrdma
dkms status pvrdma | grep -q "$(uname -r).*: installed" ||
    fail "dkms did not install pvrdma for $(uname -r)"
modinfo -n pvrdma | grep -q /updates/dkms/ || fail "pvrdma.ko is not dkms's"
[ -n "$(dkms_ko)" ] || fail "no pvrdma.ko in /lib/modules/$(uname -r)/updates/dkms"
echo "=== dkms installed $(dkms_ko)"
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
    [ -z "$(dkms_ko)" ] || fail "$(dkms_ko) still there after dkms unbuild -k"
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
[ -z "$(dkms_ko)" ] || fail "$(dkms_ko) left behind"
p=$(provider_of stock "ibv_rc_pingpong -d pvrdma0 -g 1 -n 5")
[ "$p" = stock ] || fail "after removal the provider is '$p', not the stock one"
pair rc_pingpong_stock 120 "ibv_rc_pingpong -d pvrdma0 -g 1 -n 20 -c" \
    "ibv_rc_pingpong -d pvrdma0 -g 1 -n 20 -c 127.0.0.1"
echo GUEST-OK
GUEST

# One guest per distribution, each with its own kernel and initramfs.
results=()
for dist in "${dists[@]}"; do
    t0=$SECONDS
    case $dist in
    bookworm) kt=$PVRDMA_OUT/kernel kimg=$PVRDMA_OUT/vmlinuz
              desc="Debian 12" suffix= ;;
    trixie)   kt=$PVRDMA_OUT/kernel-6.12 kimg=$PVRDMA_OUT/vmlinuz-6.12
              desc="Debian 13" suffix=-trixie ;;
    esac
    if [ ! -e "$kt/.done" ] || [ ! -e "$kimg" ]; then
        fail "$kt or $kimg missing (make kernel${suffix:+ kernel-6.12})"
    fi
    guest=$("$PVRDMA_TOP/scripts/build-deb-guest.sh" "$kt" "$dist") ||
        fail "cannot build the $desc guest"
    prep_guest=$((SECONDS - t0))
    # The guest's own initramfs (mounts the image, switch_root), vm.sh's
    # files.
    name=$TEST_NAME$suffix
    PVRDMA_KERNEL=$kimg PVRDMA_INITRD=$guest/initrd.cpio.gz \
    "$PVRDMA_TOP/scripts/vm.sh" --name "$name" --timeout 900 --smp 2 \
        --qemu-arg -drive \
        --qemu-arg "file=$guest/root.ext4,format=raw,if=virtio,snapshot=on" \
        --add "$TESTS_TOP/tests/guest/pair.sh" --add "$TEST_OUT/debs" \
        --add "$TEST_OUT/guest.sh" "${hook[@]}" \
        -- sh ./guest.sh < /dev/null ||
        fail "$desc: see $PVRDMA_OUT/vm/$name.log"
    grep -q '^GUEST-OK' "$PVRDMA_OUT/vm/$name.log" ||
        fail "$desc: guest script did not finish (see $PVRDMA_OUT/vm/$name.log)"
    results+=("$desc on $(basename "$(readlink -f "$kt")") ${prep_guest}s+$((SECONDS - t0 - prep_guest))s")
done
summary=$(printf '%s; ' "${results[@]}")
summary=${summary%; }
pass "make deb packages in stock Debian (${dists[*]}): dkms build, our provider, ibv_rc_pingpong -c; removal restores the stock provider (debs ${prep_debs}s; guest build+run: $summary; total ${SECONDS}s)"
