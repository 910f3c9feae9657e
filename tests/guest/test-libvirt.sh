#!/usr/bin/env bash
# libvirt: Debian 12's libvirtd (9.0) runs two domains on one fabric, made
# from docs/libvirt/pvrdma-vm.xml (domain type qemu, direct kernel boot,
# our QEMU as <emulator>, the device and its fabric-path through
# <qemu:commandline>, QEMU run as libvirt's unprivileged libvirt-qemu
# user). Their guests run ibv_rc_pingpong between them, then wait for the
# ACPI power button: `virsh shutdown` must end both. Also: virsh define,
# start, domstate and undefine; both QEMU command lines carry the device.
#
# libvirtd runs in a Debian 12 root of its own (debootstrap, cached; a
# fresh copy each run), started by hand (no init there), with
# security_driver "none" (no AppArmor in a chroot; docs/libvirt.md gives
# the rules a confined host needs) and no private namespaces. Our QEMU in
# that root: the Debian 12 package of `make host-deb`, installed with apt.
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || fail "libvirtd and chroot need root"
# libvirt, the firmware and the libraries our QEMU needs, but not
# Debian's own QEMU: libvirtd would probe it too (tens of seconds under
# TCG), and our domains do not use it.
LV_PACKAGES=(libvirt-daemon-system libvirt-clients libvirt-daemon-driver-qemu
             qemu-system-data seabios ipxe-qemu libibverbs1 librdmacm1
             libpixman-1-0 libpng16-16 libfdt1 libslirp0 libglib2.0-0
             libncursesw6 libgnutls30 libbz2-1.0 libudev1)
key=$( { printf '%s\n' "${LV_PACKAGES[@]}"; echo v1; } | sha256sum | cut -c1-12)
base=$PVRDMA_CACHE/libvirt-root-$key
exec 8> "$base.lock"
flock 8
if [ ! -e "$base/.done" ]; then
    command -v debootstrap > /dev/null ||
        fail "debootstrap is missing: run scripts/install-deps.sh"
    umount_below "$base.tmp"
    rm -rf "$base.tmp"
    log "debootstrap bookworm with libvirt into $base (a minute, once)"
    debootstrap --variant=minbase --components=main bookworm "$base.tmp" \
        "$(debian_mirror)" > "$TEST_OUT/debootstrap.log" 2>&1 ||
        fail "debootstrap failed, see $TEST_OUT/debootstrap.log"
    # No init in the root: nothing is to start services while installing.
    printf '#!/bin/sh\nexit 101\n' > "$base.tmp/usr/sbin/policy-rc.d"
    chmod +x "$base.tmp/usr/sbin/policy-rc.d"
    chroot "$base.tmp" env DEBIAN_FRONTEND=noninteractive apt-get install \
        -y -q --no-install-recommends "${LV_PACKAGES[@]}" \
        > "$TEST_OUT/apt.log" 2>&1 ||
        fail "installing libvirt into the root failed, see $TEST_OUT/apt.log"
    rm -f "$base.tmp"/var/cache/apt/archives/*.deb
    touch "$base.tmp/.done"
    mv "$base.tmp" "$base"
fi
flock -u 8

R=$TEST_OUT/root
daemons_stop() {
    local p pid
    for p in libvirtd virtlogd; do
        pid=$(cat "$R/run/$p.pid" 2> /dev/null) || continue
        kill "$pid" 2> /dev/null || continue
        for _ in $(seq 50); do
            kill -0 "$pid" 2> /dev/null || break
            sleep 0.1
        done
    done
}
cleanup() {
    pkill -f "guest=pvrdma-[ab]," 2> /dev/null || true
    daemons_stop
    umount_below "$R"
}
umount_below "$R"
rm -rf "$R"
cp -a "$base" "$R"
trap cleanup EXIT

# Our QEMU in the root: the Debian 12 package of `make host-deb`.
mapfile -t pkgs < <(HOST_DEB_DISTS=bookworm "$PVRDMA_TOP/scripts/build-host-deb.sh") ||
    fail "make host-deb (bookworm) failed"
[ ${#pkgs[@]} -eq 1 ] || fail "build-host-deb.sh printed ${#pkgs[@]} packages, want 1"
xml=$TEST_OUT/pvrdma-a.xml
cp "$PVRDMA_TOP/docs/libvirt/pvrdma-vm.xml" "$xml"
cp "${pkgs[0]}" "$R/tmp/"
chroot "$R" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    "/tmp/$(basename "${pkgs[0]}")" > "$TEST_OUT/apt-qemu.log" 2>&1 ||
    fail "installing $(basename "${pkgs[0]}") failed, see $TEST_OUT/apt-qemu.log"
how="the package $(basename "${pkgs[0]}")"
emulator=$(sed -n 's|.*<emulator>\(.*\)</emulator>.*|\1|p' "$xml")
[ -x "$R$emulator" ] || fail "the root has no $emulator"

# The guests: kernel and image as scripts/vm.sh boots them, each image
# with its command in front. A serves the ping-pong, B connects; then
# both wait for the power button and report.
boot=$R/var/lib/pvrdma/boot
mkdir -p "$boot"
cp "$(boot_kernel "$PVRDMA_OUT/vmlinuz")" "$boot/vmlinuz"
cat > "$TEST_OUT/guest.sh" <<'GUEST'
. ./sync.sh
. ./pair.sh
pp="ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -s 8192"
if [ "$VMPAIR_ROLE" = a ]; then
    xpair_server rc_pingpong 180 "$pp"
else
    xpair_client rc_pingpong 180 "$pp $PEER_IP"
fi
grep -E "bytes in .* seconds|iters in" /tmp/rc_pingpong.* ||
    fail "no ping-pong figures"
modprobe button && modprobe evdev || fail "cannot load button, evdev"
ev=
for i in /sys/class/input/input*; do
    [ "$(cat "$i/name")" = "Power Button" ] && ev=$(ls -d "$i"/event* | head -n 1)
done
[ -n "$ev" ] || fail "no power button"
echo "GUEST-WAITS-FOR-POWER-BUTTON"
dd if="/dev/input/${ev##*/}" of=/dev/null bs=24 count=1 2> /dev/null
echo "GUEST-POWER-BUTTON-PRESSED"
GUEST
for r in a b; do
    peer=b n=1 p=2
    [ $r = b ] && peer=a n=2 p=1
    guest_files_cpio "$TEST_OUT/extra-$r.cpio" \
        "VMPAIR_ROLE=$r SELF_IP=10.0.9.$n PEER_IP=10.0.9.$p sh ./guest.sh" \
        "$TEST_OUT/guest.sh" "$TESTS_TOP/tests/guest/sync.sh" \
        "$TESTS_TOP/tests/guest/pair.sh"
    cat "$TEST_OUT/extra-$r.cpio" "$(boot_initrd "$PVRDMA_OUT/initrd.cpio.gz")" \
        > "$boot/initrd-$r"
    if [ $r = b ]; then
        sed -e "s/pvrdma-a/pvrdma-b/g; s/initrd-a/initrd-b/" \
            -e "s/52:54:00:00:09:01/52:54:00:00:09:02/" \
            -e "s/port='41112'/port='X'/; s/port='41111'/port='41112'/; s/port='X'/port='41111'/" \
            -e "s|pvrdma.ip=10.0.9.1/24|pvrdma.ip=10.0.9.2/24|" "$xml" \
            > "$TEST_OUT/pvrdma-b.xml"
    fi
    cp "$TEST_OUT/pvrdma-$r.xml" "$R/tmp/"
done
grep -q "initrd-b" "$TEST_OUT/pvrdma-b.xml" || fail "cannot derive domain b"

# libvirtd and virtlogd, by hand; the fabric directory for libvirt-qemu.
mount -t proc proc "$R/proc"
mount --rbind /sys "$R/sys"
# A /dev of its own: this host's /dev/kvm exists but cannot run guests,
# and libvirtd, finding it, probes QEMU again on every call (20 times, 40
# s, per virsh define). TCG is what these domains ask for.
mount -t tmpfs -o mode=0755 tmpfs "$R/dev"
for d in null zero full random urandom tty ptmx; do
    touch "$R/dev/$d"
    mount --bind "/dev/$d" "$R/dev/$d"
done
mkdir -p "$R/dev/pts" "$R/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666 devpts "$R/dev/pts"
mount -t tmpfs -o mode=1777 tmpfs "$R/dev/shm"
mount -t tmpfs tmpfs "$R/run"
mkdir -p "$R/run/libvirt" "$R/run/lock"
printf 'security_driver = "none"\nnamespaces = [ ]\n' >> "$R/etc/libvirt/qemu.conf"
chroot "$R" install -d -o libvirt-qemu -g kvm -m 0770 /var/lib/pvrdma/fabric
chroot "$R" /usr/sbin/virtlogd -d -p /run/virtlogd.pid
chroot "$R" /usr/sbin/libvirtd -d -p /run/libvirtd.pid
V() { chroot "$R" virsh -q -c qemu:///system "$@"; }
for _ in $(seq 100); do
    V list --all > /dev/null 2>&1 && break
    sleep 0.2
done
V list --all > /dev/null || fail "libvirtd did not come up, see $R/var/log/libvirt"
echo "  $(chroot "$R" libvirtd --version)"
for r in a b; do
    V define "/tmp/pvrdma-$r.xml" > /dev/null || fail "virsh define pvrdma-$r"
done
for r in a b; do
    V start "pvrdma-$r" || fail "virsh start pvrdma-$r"
done
con() { echo "$R/var/log/libvirt/qemu/pvrdma-$1.console"; }
SECONDS=0
for _ in $(seq 300); do
    grep -qs GUEST-WAITS-FOR-POWER-BUTTON "$(con a)" &&
        grep -qs GUEST-WAITS-FOR-POWER-BUTTON "$(con b)" && break
    grep -qs "PVRDMA-GUEST-EXIT-STATUS=" "$(con a)" "$(con b)" && break
    sleep 1
done
for r in a b; do
    grep -q GUEST-WAITS-FOR-POWER-BUTTON "$(con $r)" ||
        fail "pvrdma-$r did not get through its ping-pong, see $(con $r)"
    [ "$(V domstate "pvrdma-$r")" = running ] ||
        fail "pvrdma-$r is $(V domstate "pvrdma-$r"), not running"
done
echo "  both guests ran their ping-pong (${SECONDS}s after virsh start)"
SECONDS=0
# QEMU runs as libvirt's unprivileged user, its fabric socket in the
# directory made for that user.
owners=$(stat -c %u "$R"/var/lib/pvrdma/fabric/*.sock | sort -u)
[ "$owners" = "$(chroot "$R" id -u libvirt-qemu)" ] ||
    fail "fabric sockets owned by uid '$owners', not libvirt-qemu"
[ "$(ls "$R"/var/lib/pvrdma/fabric/*.sock | wc -l)" -eq 2 ] ||
    fail "not two fabric sockets: $(ls "$R"/var/lib/pvrdma/fabric)"
for r in a b; do
    V shutdown "pvrdma-$r" > /dev/null || fail "virsh shutdown pvrdma-$r"
done
for _ in $(seq 120); do
    [ "$(V domstate pvrdma-a)" = "shut off" ] &&
        [ "$(V domstate pvrdma-b)" = "shut off" ] && break
    sleep 1
done
for r in a b; do
    [ "$(V domstate "pvrdma-$r")" = "shut off" ] ||
        fail "pvrdma-$r still $(V domstate "pvrdma-$r") 120 s after virsh shutdown"
    # (the serial console's file has CRLF line ends)
    log=$PVRDMA_OUT/vm/$TEST_NAME-$r.log
    tr -d '\r' < "$(con $r)" > "$log"
    grep -q GUEST-POWER-BUTTON-PRESSED "$log" ||
        fail "pvrdma-$r did not see the power button, see $log"
    grep -qx "PVRDMA-GUEST-EXIT-STATUS=0" "$log" ||
        fail "pvrdma-$r's guest failed, see $log"
    qlog=$R/var/log/libvirt/qemu/pvrdma-$r.log
    grep -q "^$emulator" "$qlog" || fail "pvrdma-$r did not run $emulator, see $qlog"
    grep -q -- "-device pvrdma,addr=0x10,fabric-path=/var/lib/pvrdma/fabric" "$qlog" ||
        fail "pvrdma-$r's QEMU had no pvrdma device, see $qlog"
    grep -hE "^\[rc_pingpong .*bytes in .* seconds" "$log" |
        sed "s/^/  pvrdma-$r: /"
    V undefine "pvrdma-$r" > /dev/null || fail "virsh undefine pvrdma-$r"
done
echo "  virsh shutdown: both shut off in ${SECONDS}s"
pass "libvirt (Debian 12's libvirtd) with $how: two domains from docs/libvirt/pvrdma-vm.xml on one fabric, ibv_rc_pingpong between them, virsh shutdown ends both"
