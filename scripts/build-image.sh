#!/usr/bin/env bash
# Build the guest initramfs: the kernel's modules for RDMA,
# virtio-net and NVMe over RDMA (host and target, brd for a RAM disk), our
# pvrdma.ko, rdma-core (with our provider) from the staging
# tree, perftest from Debian 12, busybox and iproute2, plus their shared
# libraries. The image is cached under $PVRDMA_CACHE/image keyed by the
# hash of every input; the path of the image is printed on stdout.
#
#   build-image.sh KERNEL_TREE RDMA_CORE_STAGE MODULE.ko...
# KERNEL_TREE is a tree of scripts/fetch-kernel.sh (Debian 12's 6.1, or
# a newer series such as Debian 13's 6.12), named by its release; the
# modules (MODULE.ko) must be built for that release.
. "$(dirname "$0")/lib.sh"

[ $# -ge 2 ] || die "usage: $0 KERNEL_TREE RDMA_CORE_STAGE [MODULE.ko...]"
ktree=$(readlink -f "$1") stage=$(readlink -f "$2"); shift 2
modules=("$@")
abi=$(basename "$ktree")
kroot=$ktree/root

# Debian 12 packages unpacked into the image (not installed on the host):
# perftest, UCX (libucx0's transports, ucx_info, ucx_perftest), Open MPI
# (mpirun, UCX PML), the NFS server and client tools, glib and cmocka (for
# tests/ibverbs), qperf (make bench), and what they need
# beyond the host's libraries.
GUEST_DEBS=(perftest libpci3 libucx0 ucx-utils libnuma1 libgomp1
            openmpi-bin libopenmpi3 openmpi-common libevent-core-2.1-7
            libevent-pthreads-2.1-7 libfabric1 libhwloc15 libpmix2
            libmunge2 libpsm-infinipath1 libpsm2-2
            nfs-kernel-server nfs-common libnfsidmap1 libtirpc3
            libtirpc-common libwrap0 keyutils libglib2.0-0 libcmocka0
            qperf)
debdir=$PVRDMA_CACHE/image/debs-$(printf '%s\n' "${GUEST_DEBS[@]}" |
                                    sha256sum | cut -c1-12)
if [ ! -e "$debdir/.done" ]; then
    rm -rf "$debdir" && mkdir -p "$debdir"
    fetch_deb "$debdir" "${GUEST_DEBS[@]}"
    touch "$debdir/.done"
fi

# Kernel modules we load in the guest; dependencies are resolved below.
# (button and evdev: a guest can wait for the ACPI power button, as
# `virsh shutdown` presses it.)
KMODS=(virtio_pci virtio_net vmxnet3 ib_core ib_uverbs ib_umad rdma_ucm
       crc32_generic rdma_rxe nvme_rdma nvmet_rdma brd nfsd nfsv4 rpcrdma
       button evdev)

key=$( { echo "$abi"; cat "$ktree/.done"; printf '%s\n' "${KMODS[@]}";
         hash_inputs "${modules[@]}" "$stage" "$debdir" \
             "$PVRDMA_TOP/scripts/guest" "$0"; } | sha256sum | cut -c1-16)
out=$PVRDMA_CACHE/image/initrd-$abi-$key.cpio.gz
if [ -e "$out" ]; then
    echo "$out"
    exit 0
fi

root=$(mktemp -d "$PVRDMA_CACHE/image/root.XXXXXX")
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,sbin,etc,proc,sys,dev,tmp,run,root,mnt,lib,lib64} \
         "$root"/usr/{bin,sbin,lib/x86_64-linux-gnu} \
         "$root/lib/modules/$abi/extra"
ln -s ../usr/lib/x86_64-linux-gnu "$root/lib/x86_64-linux-gnu"

# busybox provides the shell and the usual tools.
cp /bin/busybox "$root/bin/busybox"
for applet in $("$root/bin/busybox" --list); do
    [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
done

# Kernel modules with their dependencies, then our own.
for m in "${KMODS[@]}"; do
    modprobe -d "$kroot" -S "$abi" --show-depends "$m" |
        awk '$1 == "insmod" { print $2 }'
done | sort -u | while read -r ko; do
    rel=${ko#"$kroot"/}
    mkdir -p "$root/$(dirname "$rel")"
    cp "$ko" "$root/$rel"
done
cp "$kroot/lib/modules/$abi"/modules.{order,builtin,builtin.modinfo} \
    "$root/lib/modules/$abi/" 2>/dev/null || true
# Newer Debian kernels (6.12 on) ship compressed modules (.ko.xz). They
# go into the image plain, so that loading them depends neither on the
# guest's busybox modprobe reading compressed files nor on the kernel's
# own decompression; the image is compressed as a whole anyway. depmod
# below records the plain names.
find "$root/lib/modules" -name '*.ko.xz' -exec xz -d {} +
find "$root/lib/modules" -name '*.ko.zst' -exec zstd -q -d --rm {} +
find "$root/lib/modules" -name '*.ko.gz' -exec gzip -d {} +
for ko in "${modules[@]}"; do
    cp "$ko" "$root/lib/modules/$abi/extra/"
    strip --strip-debug "$root/lib/modules/$abi/extra/$(basename "$ko")"
done
depmod -b "$root" "$abi"

# rdma-core (libraries, providers, utilities, rdmacm-utils) from staging.
cp -a "$stage"/. "$root/"
# Our provider and rdma-core's stock vmw_pvrdma provider both match the
# device, and libibverbs takes the first one it loaded (directory order).
# Keep the stock one's driver file aside; a test enables it on purpose.
mkdir -p "$root/usr/share/pvrdma/stock-provider"
mv "$root/etc/libibverbs.d/vmw_pvrdma.driver" \
    "$root/usr/share/pvrdma/stock-provider/"
# perftest from Debian 12.
for d in "$debdir"/*.deb; do
    dpkg-deb -x "$d" "$root"
done
# libpsm-infinipath1 names its library through update-alternatives, which
# unpacking does not run.
for f in "$root"/usr/lib/libpsm1/libpsm_infinipath.so.1.*; do
    ln -sf "../libpsm1/${f##*/}" \
        "$root/usr/lib/x86_64-linux-gnu/libpsm_infinipath.so.1"
done
# glibc loads libgcc_s when a thread exits or is cancelled (rping's
# threads do); ldd cannot see it.
cp -L /lib/x86_64-linux-gnu/libgcc_s.so.1 "$root/usr/lib/x86_64-linux-gnu/"
# iproute2's rdma and ip tools from the host (Debian 12).
for tool in rdma ip; do
    path=$(PATH=/usr/sbin:/usr/bin:/sbin:/bin command -v "$tool") ||
        die "$tool not found: install iproute2 (scripts/install-deps.sh)"
    cp "$path" "$root/usr/sbin/"
done

# Shared libraries: resolve every ELF file against the image first, then
# the host (also Debian 12).
libpath=$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu
libpath=$libpath:$root/usr/lib/x86_64-linux-gnu/ucx      # UCX's modules
find "$root" -type f -perm -u+x -o -type f -name '*.so*' |
while read -r f; do
    file -b "$f" | grep -q '^ELF' || continue
    LD_LIBRARY_PATH=$libpath ldd "$f" 2>/dev/null || true
done > "$root/.ldd"
if grep -q 'not found' "$root/.ldd"; then
    die "libraries missing from the image: $(grep 'not found' "$root/.ldd" | sort -u | tr -d '\t' | tr '\n' ' ')"
fi
awk '/=> \// { print $3 } /^\t\/lib64/ { print $1 }' "$root/.ldd" | sort -u |
while read -r lib; do
    case "$lib" in "$root"/*) continue ;; esac
    dest=$root/usr/lib/x86_64-linux-gnu/$(basename "$lib")
    [ "$lib" = /lib64/ld-linux-x86-64.so.2 ] && dest=$root/lib64/ld-linux-x86-64.so.2
    [ -e "$dest" ] || cp -L "$lib" "$dest"
done
[ -e "$root/lib64/ld-linux-x86-64.so.2" ] ||
    cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
printf "/usr/lib/x86_64-linux-gnu\\n/usr/lib/x86_64-linux-gnu/ucx\\n" \
    > "$root/etc/ld.so.conf"
rm -f "$root/.ldd"
ldconfig -r "$root"

# Guest-side scripts (/init and helpers).
cp "$PVRDMA_TOP"/scripts/guest/init "$root/init"
chmod +x "$root/init"
echo "root:x:0:0:root:/root:/bin/sh" > "$root/etc/passwd"
echo "root:x:0:" > "$root/etc/group"
printf '127.0.0.1 localhost\n' > "$root/etc/hosts"

(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) |
    gzip -1 > "$out.tmp"
mv "$out.tmp" "$out"
log "image $out ($(du -h "$out" | cut -f1))"
echo "$out"
