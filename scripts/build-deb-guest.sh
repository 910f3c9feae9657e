#!/usr/bin/env bash
# A stock Debian 12 or 13 guest for the package test
# (tests/guest/test-deb-install.sh): a dpkg-managed root made with
# debootstrap holding the distribution's OWN rdma-core (ibverbs-providers,
# ibverbs-utils, rdma-core: 44 in Debian 12, 56.1 in Debian 13), dkms, gcc,
# make and the headers of the guest kernel, but neither our module nor our
# provider; turned into an ext4 image, plus a small busybox initramfs that
# loads virtio_blk and ext4, mounts the image and switch_roots into it.
#
#   build-deb-guest.sh KERNEL_TREE [DIST]
#       build/kernel (Debian 12's 6.1)        -> bookworm
#       build/kernel-6.12 (Debian 13's 6.12)  -> trixie
#   DIST (bookworm or trixie) defaults to the one the kernel tree's release
#   belongs to (6.1.0-NN-amd64: bookworm; 6.12.x+deb13-amd64: trixie).
#   Debian 13's linux-headers-<release> depends on the very same
#   linux-image-<release> (=version): both are installed, pinned to the
#   kernel tree's package version (TREE/.done), so the headers match the
#   booted kernel exactly. Debian 12's headers need no image.
#
# Prints the directory holding root.ext4 and initrd.cpio.gz on stdout. Boot:
#   PVRDMA_INITRD=DIR/initrd.cpio.gz scripts/vm.sh \
#       --qemu-arg -drive --qemu-arg file=DIR/root.ext4,format=raw,if=virtio,snapshot=on ...
# The root's /sbin/pvrdma-guest-init then runs vm.sh's command (/run/cmd,
# files in /run/files) and reports its status as scripts/guest/init does.
#
# Cached under $PVRDMA_CACHE/deb-guest/<abi>-<key>, key = hash of this
# script, the distribution and the kernel tree's marker; built under a temporary name and
# renamed into place when complete. The mirror comes from the system's apt
# sources (read only), as scripts/build-root13.sh does.
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

# From the release itself (debootstrap), then the headers of the guest
# kernel, which may be in <dist>-security only (apt in the root, the
# system's sources: as they are for bookworm, suites replaced for trixie).
DEB_GUEST_PACKAGES=(
    ibverbs-providers ibverbs-utils rdma-core libibverbs1 dkms gcc make
    kmod iproute2 procps busybox debian-archive-keyring
)
# Kernel modules the root and the initramfs need (dependencies resolved).
DEB_GUEST_KMODS=(virtio_pci virtio_net virtio_blk crc32c_generic ext4
                 ib_core ib_uverbs ib_umad rdma_ucm)
DEB_GUEST_INITRD_KMODS=(virtio_pci virtio_blk crc32c_generic ext4)

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    die "usage: $0 KERNEL_TREE [bookworm|trixie]"
fi
[ "$(id -u)" -eq 0 ] || die "debootstrap and chroot need root"
ktree=$(readlink -f "$1")
abi=$(basename "$ktree")
kroot=$ktree/root
[ -e "$ktree/.done" ] || die "$ktree is not a complete kernel tree"
case $abi in
6.1.0-*-amd64) kdist=bookworm ;;
*+deb13-amd64) kdist=trixie ;;
*) kdist= ;;
esac
dist=${2:-$kdist}
case $dist in
bookworm) distname="Debian 12" ;;
trixie) distname="Debian 13" ;;
*) die "kernel $abi: give the distribution (bookworm or trixie)" ;;
esac
[ -z "$kdist" ] || [ "$kdist" = "$dist" ] ||
    log "warning: a $kdist kernel ($abi) in a $dist root"
# The kernel packages installed in the root: Debian 12's headers alone
# (any version of that ABI, as security updates replace them); Debian
# 13's headers with the image they depend on, at the tree's version.
if [ "$dist" = bookworm ]; then
    kpkgs=("linux-headers-$abi")
else
    kver=$(cat "$ktree/.done")
    [ -n "$kver" ] || die "$ktree/.done names no package version"
    kpkgs=("linux-headers-$abi=$kver" "linux-image-$abi=$kver")
fi
for t in debootstrap mke2fs cpio; do
    command -v "$t" >/dev/null || die "$t not installed (scripts/install-deps.sh)"
done
[ -x /bin/busybox ] || die "/bin/busybox missing (busybox-static)"

# copy_kmods ROOT MODULE...: the modules with their dependencies from the
# kernel tree into ROOT, plus the lists depmod wants.
copy_kmods() {
    local dst=$1 ko rel
    shift
    for m in "$@"; do
        modprobe -d "$kroot" -S "$abi" --show-depends "$m" |
            awk '$1 == "insmod" { print $2 }'
    done | sort -u | while read -r ko; do
        rel=${ko#"$kroot"/}
        mkdir -p "$dst/$(dirname "$rel")"
        cp "$ko" "$dst/$rel"
    done
    cp "$kroot/lib/modules/$abi"/modules.{order,builtin,builtin.modinfo} \
        "$dst/lib/modules/$abi/"
    depmod -b "$dst" "$abi"
}

key=$( { echo "$abi $dist"; cat "$ktree/.done"; cat "$0"; } | sha256sum | cut -c1-12)
top=$PVRDMA_CACHE/deb-guest
out=$top/$abi-$key
mkdir -p "$top"
exec 9> "$out.lock"
flock 9
if [ -e "$out/.done" ]; then
    echo "$out"
    exit 0
fi

SECONDS=0
tmp=$out.tmp
root=$tmp/root
umount_below "$tmp"
rm -rf "$tmp" && mkdir -p "$tmp"
mirror=$(debian_mirror)
[ -n "$mirror" ] || die "no URIs: line in the system's debian.sources"
log "debootstrap $dist into $root (a few minutes, once)"
trap 'umount_below "$tmp"' EXIT
incl=$(IFS=,; echo "${DEB_GUEST_PACKAGES[*]}")
debootstrap --variant=minbase --components=main --include="$incl" \
    "$dist" "$root" "$mirror" >&2 ||
    die "debootstrap failed (log: $root/debootstrap/debootstrap.log)"

# The guest kernel's headers, through apt in the root with the system's
# own sources (the headers of a security update are not in bookworm), or
# for trixie those sources with trixie's suites (lib.sh: debian_sources).
log "installing ${kpkgs[*]} in the root"
if [ "$dist" = bookworm ]; then
    cp /etc/apt/sources.list.d/debian.sources "$root/etc/apt/sources.list.d/"
else
    debian_sources "trixie trixie-updates" trixie-security \
        > "$root/etc/apt/sources.list.d/debian.sources"
fi
rm -f "$root/etc/apt/sources.list"
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
chroot "$root" apt-get -q update >&2 || die "apt-get update in the root failed"
chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends "${kpkgs[@]}" >&2 ||
    die "cannot install ${kpkgs[*]} in the root"
umount_below "$root"
trap - EXIT
# Offline from here on: no lists, no downloaded packages, no sources; no
# initramfs of the installed image (the guest boots ours).
rm -f "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin
rm -rf "$root"/var/lib/apt/lists/*
rm -f "$root/etc/apt/sources.list.d/debian.sources"
rm -f "$root/boot/initrd.img-$abi"
[ -e "$root/lib/modules/$abi/build/Makefile" ] ||
    die "the root lacks /lib/modules/$abi/build (linux-headers)"
for f in usr/bin/ibv_rc_pingpong usr/sbin/dkms usr/bin/gcc usr/bin/make \
         "usr/lib/x86_64-linux-gnu/libibverbs/libvmw_pvrdma-rdmav34.so" \
         etc/libibverbs.d/vmw_pvrdma.driver; do
    [ -e "$root/$f" ] || die "the root lacks /$f"
done

# The guest kernel's modules we need, unless its image package is
# installed (Debian 13): Debian 12's is not, the kernel is booted from
# outside.
if [ ! -e "$root/lib/modules/$abi/modules.dep" ]; then
    copy_kmods "$root" "${DEB_GUEST_KMODS[@]}"
fi

echo guest > "$root/etc/hostname"
printf '127.0.0.1 localhost\n::1 localhost\n' > "$root/etc/hosts"
cat > "$root/sbin/pvrdma-guest-init" <<'INIT'
#!/bin/sh
# PID 1 of the Debian package-test guest (after the initramfs's
# switch_root): runs /run/cmd from scripts/vm.sh in /run/files and reports
# its exit status as scripts/guest/init does, then powers off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8
mount -t proc proc /proc
mount -t sysfs sysfs /sys
# What udev would add to devtmpfs (bash's and dkms's <(...) need /dev/fd).
ln -sfn /proc/self/fd /dev/fd
ln -sf /proc/self/fd/0 /dev/stdin
ln -sf /proc/self/fd/1 /dev/stdout
ln -sf /proc/self/fd/2 /dev/stderr
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
hostname guest
ulimit -l unlimited
modprobe virtio_net
ip link set lo up
if ip link show eth0 >/dev/null 2>&1; then
    ip link set eth0 up
    ip addr add 10.0.2.15/24 dev eth0
fi
modprobe ib_uverbs
modprobe rdma_ucm
rc=1
if [ -r /run/cmd ]; then
    echo "[guest] running: $(head -c 300 /run/cmd | tr '\n' ';')"
    cd /run/files 2>/dev/null || cd /root
    sh -e /run/cmd
    rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "[guest] command failed with status $rc; last kernel messages:"
        dmesg | tail -n 40
    fi
else
    echo "[guest] no /run/cmd"
fi
echo "PVRDMA-GUEST-EXIT-STATUS=$rc"
sync
echo o > /proc/sysrq-trigger
sleep 10
INIT
chmod +x "$root/sbin/pvrdma-guest-init"

# The initramfs: busybox, the block and ext4 modules, a switch_root.
ird=$tmp/initrd
mkdir -p "$ird"/{bin,proc,sys,dev,run,newroot} "$ird/lib/modules/$abi"
cp /bin/busybox "$ird/bin/busybox"
for applet in sh mount umount modprobe switch_root mkdir cp sleep cat echo; do
    ln -s busybox "$ird/bin/$applet"
done
copy_kmods "$ird" "${DEB_GUEST_INITRD_KMODS[@]}"
# Newer kernels (Debian 13's 6.12) ship .ko.xz, which busybox's modprobe
# may not read: plain .ko in the initramfs (the root's kmod reads both).
if [ -n "$(find "$ird/lib/modules" -name '*.ko.xz' -print -quit)" ]; then
    find "$ird/lib/modules" -name '*.ko.xz' -exec xz -d {} +
    depmod -b "$ird" "$abi"
fi
printf '%s\n' "${DEB_GUEST_INITRD_KMODS[@]}" > "$ird/modules.list"
cat > "$ird/init" <<'INIT'
#!/bin/sh
# Load the disk and ext4, mount the Debian root, hand vm.sh's /run/cmd and
# /run/files over to it and switch_root into its /sbin/pvrdma-guest-init.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /modules.list); do modprobe "$m"; done
i=0
while [ ! -b /dev/vda ] && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
mount -t ext4 /dev/vda /newroot || {
    echo "[initrd] cannot mount /dev/vda"; echo "PVRDMA-GUEST-EXIT-STATUS=99"
    echo o > /proc/sysrq-trigger; sleep 10; }
mount -t tmpfs tmpfs /newroot/run
cp -a /run/. /newroot/run/
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /sbin/pvrdma-guest-init
INIT
chmod +x "$ird/init"
(cd "$ird" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) |
    gzip -1 > "$tmp/initrd.cpio.gz"

# The ext4 image: the root plus 1 GiB for dkms's build and the packages.
mb=$(( $(du -sm "$root" | cut -f1) + 1024 ))
mke2fs -q -t ext4 -L debroot -d "$root" "$tmp/root.ext4" "${mb}M" >&2 ||
    die "mke2fs failed"
rm -rf "$root" "$ird"
log "$distname guest ($dist, kernel $abi) built in ${SECONDS}s ($(du -sh --apparent-size "$tmp/root.ext4" | cut -f1) image)"
touch "$tmp/.done"
rm -rf "$out"
mv "$tmp" "$out"
echo "$out"
