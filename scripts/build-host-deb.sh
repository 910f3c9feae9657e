#!/usr/bin/env bash
# `make host-deb`: Debian packages of our QEMU (10.0 with hw/pvrdma) for
# Debian 12 (bookworm) and Debian 13 (trixie) hosts, into build/host-deb/
# (HOST_DEB_DISTS="bookworm trixie" by default; one of them to choose).
# Prints the paths of the .debs on stdout, logs on stderr.
#
# Package qemu-system-pvrdma, version <packaging/VERSION>+qemu<QEMU
# version>~deb12 or ~deb13. It installs beside Debian's own QEMU (no file
# of qemu-system-x86, no Conflicts):
#   /usr/lib/pvrdma/qemu-system-x86_64   the binary (our build)
#   /usr/bin/qemu-system-x86_64-pvrdma   the command: runs it with -L for
#       Debian's firmware and data (qemu-system-data: /usr/share/qemu with
#       keymaps and linuxboot_dma.bin; seabios: /usr/share/seabios;
#       ipxe-qemu: /usr/lib/ipxe/qemu), so no -L is needed
#   /usr/share/doc/qemu-system-pvrdma/   the device's documentation
# Depends: those firmware packages and the shared libraries of the binary
# (dpkg-shlibdeps, against the distribution's own libraries).
#
# bookworm packages the host's build (scripts/build-qemu.sh, this machine
# is Debian 12). trixie configures and builds the same source tree and
# options inside a Debian 13 root: scripts/build-root13.sh's root copied
# to $PVRDMA_CACHE/qemu-root13-<key> with QEMU's build dependencies added
# (once), the build kept in $PVRDMA_CACHE/qemu/trixie-<key> (key: source
# tree, root, options; hw/pvrdma and include/ synced in by content), so a
# repeated run with no change rebuilds nothing and a device change only
# recompiles the device.
. "$(dirname "$0")/lib.sh"

PKG=qemu-system-pvrdma
DEB_OUT=$PVRDMA_OUT/host-deb
DISTS=${HOST_DEB_DISTS:-bookworm trixie}
for d in $DISTS; do
    case $d in bookworm|trixie) ;; *) die "HOST_DEB_DISTS: '$d' is not bookworm or trixie" ;; esac
done
# QEMU's build dependencies in the Debian 13 root (the libraries the host
# build links: see ldd build/qemu-system-x86_64).
TRIXIE_BUILD_DEPS=(
    ninja-build pkgconf python3 python3-venv meson dpkg-dev file
    libglib2.0-dev libpixman-1-dev libslirp-dev zlib1g-dev libfdt-dev
    libgnutls28-dev libpng-dev libibverbs-dev librdmacm-dev libudev-dev
    libncurses-dev libbz2-dev
)
# Must match scripts/build-qemu.sh's QEMU_CONFIGURE_OPTS (the same device
# set on both distributions).
QEMU_CONFIGURE_OPTS=(
    --target-list=x86_64-softmmu
    --disable-install-blobs --disable-docs --disable-werror
    --disable-gtk --disable-sdl --disable-vnc --disable-opengl
    --disable-xen --disable-spice --enable-slirp
)

[ "$(id -u)" -eq 0 ] || die "the trixie build and dpkg-deb --root-owner-group want root"

# The host build and its source tree (build-VER-KEY-CFG beside src-VER-KEY).
host_bin=$("$PVRDMA_TOP/scripts/build-qemu.sh") || die "QEMU build failed"
host_bld=$(dirname "$(readlink -f "$host_bin")")
if [ -e "$host_bld/pvrdma-qemu.env" ]; then
    src=$(sed -n 's/^QEMU_SRC_DIR=//p' "$host_bld/pvrdma-qemu.env")
else
    b=$(basename "$host_bld")
    b=${b#build-}
    src=$(dirname "$host_bld")/src-${b%-*}
fi
[ -e "$src/.done" ] || die "QEMU source tree $src not found"
qver=$("$host_bin" --version | sed -n '1s/.*version \([0-9.]*\).*/\1/p')
[ -n "$qver" ] || die "cannot read the QEMU version of $host_bin"

base=$(tr -d ' \n' < "$PVRDMA_TOP/packaging/VERSION")

# trixie_root: the Debian 13 root with QEMU's build dependencies.
trixie_root() {
    local r13 key root tmp
    r13=$("$PVRDMA_TOP/scripts/build-root13.sh") || die "no Debian 13 root"
    key=$(printf '%s\n' "$r13" "${TRIXIE_BUILD_DEPS[@]}" | sha256sum | cut -c1-12)
    root=$PVRDMA_CACHE/qemu-root13-$key
    exec 8> "$root.lock"
    flock 8
    if [ ! -e "$root/.done" ]; then
        tmp=$root.tmp
        umount_below "$tmp"
        rm -rf "$tmp"
        log "copying $r13 and installing QEMU's build dependencies (once)"
        cp -a "$r13" "$tmp"
        rm -f "$tmp/.done"
        trap 'umount_below "$tmp"' EXIT
        mount -t proc proc "$tmp/proc"
        chroot "$tmp" apt-get -q update >&2 || die "apt-get update in the root failed"
        chroot "$tmp" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
            --no-install-recommends "${TRIXIE_BUILD_DEPS[@]}" >&2 ||
            die "cannot install QEMU's build dependencies in the Debian 13 root"
        chroot "$tmp" apt-get clean
        umount_below "$tmp"
        trap - EXIT
        touch "$tmp/.done"
        rm -rf "$root"
        mv "$tmp" "$root"
    fi
    echo "$root"
}

# trixie_build: configure (once) and build QEMU in the Debian 13 root;
# prints the binary's path (on the host). The source tree (with hw/pvrdma
# and include/ as build-qemu.sh synced them) is synced into the build's
# own copy by checksum, so ninja recompiles only what changed.
trixie_build() {
    local root key b
    root=$(trixie_root)
    key=$(printf '%s\n' "$(basename "$src")" "$root" "${QEMU_CONFIGURE_OPTS[@]}" |
          sha256sum | cut -c1-12)
    b=$PVRDMA_CACHE/qemu/trixie-$key
    exec 6> "$root.build-lock"  # one build at a time in the root (/build)
    flock 6
    mkdir -p "$b/src" "$b/bld" "$root/build"
    rsync -rlpc --delete "$src/" "$b/src/"
    umount_below "$root/build"
    umount_below "$root/proc"
    mount --bind "$b" "$root/build"
    mount -t proc proc "$root/proc"
    trap 'umount_below "$root/build"; umount_below "$root/proc"' EXIT
    if [ ! -e "$b/bld/build.ninja" ]; then
        log "configuring QEMU $qver for Debian 13 in $b (the first build takes about 7 minutes)"
        chroot "$root" sh -c "cd /build/bld && /build/src/configure \
            --python=/usr/bin/python3 ${QEMU_CONFIGURE_OPTS[*]}" >&2 ||
            { rm -f "$b/bld/build.ninja"; die "QEMU configure in the Debian 13 root failed"; }
    fi
    log "building qemu-system-x86_64 for Debian 13"
    chroot "$root" ninja -C /build/bld qemu-system-x86_64 >&2 ||
        die "QEMU build in the Debian 13 root failed"
    umount_below "$root/build"
    umount_below "$root/proc"
    trap - EXIT
    exec 6>&-
    echo "$b/bld/qemu-system-x86_64"
}

# shlibs_depends BIN [ROOT]: dpkg-shlibdeps' Depends for BIN, run on the
# host or in ROOT (whose libraries the binary was linked against).
shlibs_depends() {
    local bin=$1 root=${2:-} d
    d=$(mktemp -d "${root:-}/tmp/shlibs.XXXXXX")
    mkdir -p "$d/debian"
    printf 'Source: x\n\nPackage: x\nArchitecture: amd64\n' > "$d/debian/control"
    cp "$bin" "$d/qemu"
    if [ -n "$root" ]; then
        chroot "$root" sh -c "cd ${d#"$root"} && dpkg-shlibdeps -O qemu"
    else
        (cd "$d" && dpkg-shlibdeps -O qemu)
    fi | sed -n 's/^shlibs:Depends=//p'
    rm -rf "$d"
}

# package DIST BIN DEPENDS SUFFIX
package() {
    local dist=$1 bin=$2 deps=$3 sfx=$4 ver st doc deb
    ver=$base+qemu$qver~$sfx
    st=$(mktemp -d "${TMPDIR:-/tmp}/host-deb.XXXXXX")
    chmod 0755 "$st"
    mkdir -p "$st/DEBIAN" "$st/usr/lib/pvrdma" "$st/usr/bin"
    doc=$st/usr/share/doc/$PKG
    mkdir -p "$doc"
    install -m 0755 "$bin" "$st/usr/lib/pvrdma/qemu-system-x86_64"
    strip --strip-unneeded "$st/usr/lib/pvrdma/qemu-system-x86_64"
    cat > "$st/usr/bin/qemu-system-x86_64-pvrdma" <<'EOF'
#!/bin/sh
# QEMU with the pvrdma device (package qemu-system-pvrdma), with the
# firmware and data of Debian's qemu-system-data, seabios and ipxe-qemu.
exec /usr/lib/pvrdma/qemu-system-x86_64 -L /usr/share/qemu \
    -L /usr/share/seabios -L /usr/lib/ipxe/qemu "$@"
EOF
    chmod 0755 "$st/usr/bin/qemu-system-x86_64-pvrdma"
    {
        echo "qemu-system-pvrdma $ver for Debian $( [ "$sfx" = deb12 ] && echo 12 || echo 13) ($dist)"
        echo
        echo "QEMU $qver (Debian's qemu source $QEMU_DEB_VERSION with Debian's patches)"
        echo "with the paravirtual RDMA device 'pvrdma' compiled in."
        echo
        echo "  qemu-system-x86_64-pvrdma -accel kvm -m 2G -smp 2 \\"
        echo "      -drive file=guest.qcow2,if=virtio \\"
        echo "      -netdev user,id=n0 -device virtio-net-pci,netdev=n0 \\"
        echo "      -device pvrdma"
        echo
        echo "The command runs /usr/lib/pvrdma/qemu-system-x86_64 with -L for Debian's"
        echo "firmware (qemu-system-data, seabios, ipxe-qemu); it does not touch"
        echo "Debian's own qemu-system-x86_64. The guest needs our driver and"
        echo "provider (pvrdma-dkms, ibverbs-provider-pvrdma: make deb)."
        echo "Device properties and the fabric: README.md here, docs/."
    } > "$doc/README.Debian"
    cp "$PVRDMA_TOP/README.md" "$doc/README.md"
    mkdir -p "$doc/docs"
    for f in abi architecture fabric migration ibverbs faults datapath; do
        [ -e "$PVRDMA_TOP/docs/$f.md" ] && cp "$PVRDMA_TOP/docs/$f.md" "$doc/docs/"
    done
    gzip -9n "$doc/README.md"
    cat > "$doc/copyright" <<EOF
QEMU: GPL-2.0-only and other free licences, see Debian's qemu package
(/usr/share/doc/qemu-system-x86/copyright) and its source $QEMU_DEB_VERSION.
hw/pvrdma and the packaging: GPL-2.0-or-later, see the pvrdma project.
EOF
    cat > "$st/DEBIAN/control" <<EOF
Package: $PKG
Version: $ver
Architecture: amd64
Maintainer: pvrdma developers <pvrdma@localhost>
Section: otherosfs
Priority: optional
Depends: $deps, qemu-system-data, seabios, ipxe-qemu
Suggests: qemu-system-x86, qemu-utils
Installed-Size: $(du -sk "$st" | cut -f1)
Description: QEMU $qver with the paravirtual RDMA device pvrdma
 qemu-system-x86_64 (QEMU $qver, Debian's source and patches) with the
 pvrdma device: RC/UD verbs for guests through our guest driver and
 rdma-core provider, between VMs of one host or of several hosts.
 Installed as qemu-system-x86_64-pvrdma (binary in /usr/lib/pvrdma),
 beside Debian's own qemu-system-x86, using Debian's firmware packages.
EOF
    mkdir -p "$DEB_OUT"
    deb=$DEB_OUT/${PKG}_${ver}_amd64.deb
    rm -f "$DEB_OUT/${PKG}_"*"~${sfx}_amd64.deb"
    dpkg-deb --root-owner-group -Zxz -b "$st" "$deb" >&2 || die "dpkg-deb failed"
    rm -rf "$st"
    echo "$deb"
}

for d in $DISTS; do
    case $d in
    bookworm)
        deps=$(shlibs_depends "$host_bin")
        [ -n "$deps" ] || die "dpkg-shlibdeps gave nothing for $host_bin"
        package bookworm "$host_bin" "$deps" deb12 ;;
    trixie)
        tbin=$(trixie_build)
        root=$(trixie_root)
        deps=$(shlibs_depends "$tbin" "$root")
        [ -n "$deps" ] || die "dpkg-shlibdeps gave nothing for $tbin"
        package trixie "$tbin" "$deps" deb13 ;;
    esac
done
