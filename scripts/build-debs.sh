#!/usr/bin/env bash
# make deb: Debian packages of the guest side, for a stock Debian 12 or 13
# guest (packaging/README.md), written to build/deb/:
#   pvrdma-dkms_<ver>_all.deb              the module as DKMS source
#   ibverbs-provider-pvrdma_<ver>_amd64.deb  our provider for Debian's libibverbs
# Built with dpkg-deb from the tree (no debhelper); the provider library
# comes from scripts/build-rdma-core.sh (rdma-core 56.1, cached). Prints
# the paths of the two packages on stdout.
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

PKG=$PVRDMA_TOP/packaging
MULTIARCH=x86_64-linux-gnu
PROVIDER_PKG=ibverbs-provider-pvrdma
MAINTAINER="pvrdma developers <pvrdma@localhost>"
HOMEPAGE_NOTE="Paravirtual RDMA device for QEMU (-device pvrdma, PCI 15ad:0820)."

command -v dpkg-deb >/dev/null || die "dpkg-deb not installed"

# Version: VERSION plus the checkout's position (read-only git queries).
pkg_version() {
    local base d
    base=$(tr -d ' \n' < "$PKG/VERSION")
    if d=$(git -C "$PVRDMA_TOP" describe --tags 2>/dev/null); then
        d=${d#v}                   # v1.2-3-gabc1234 -> 1.2+3.gabc1234
        [[ $d =~ ^(.*)-([0-9]+)-g([0-9a-f]+)$ ]] &&
            d=${BASH_REMATCH[1]}+${BASH_REMATCH[2]}.g${BASH_REMATCH[3]}
        echo "$d"
    elif git -C "$PVRDMA_TOP" rev-parse --git-dir >/dev/null 2>&1; then
        echo "$base+git$(git -C "$PVRDMA_TOP" rev-list --count HEAD).$(git -C "$PVRDMA_TOP" rev-parse --short=7 HEAD)"
    else
        echo "$base"
    fi
}
ver=$(pkg_version)
[[ $ver =~ ^[0-9][A-Za-z0-9.+~]*$ ]] || die "bad package version '$ver'"

out=$PVRDMA_OUT/deb
work=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

# subst FILE DEST [MODE]: copy with @VERSION@ replaced.
subst() {
    sed "s/@VERSION@/$ver/g" "$1" > "$2"
    chmod "${3:-0644}" "$2"
}

# copyright FILE: the package's copyright file (GPL-2.0, as LICENSE).
copyright() {
    cat > "$1" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: pvrdma
Comment: $HOMEPAGE_NOTE

Files: *
License: GPL-2.0-only
 On Debian systems the full text of the GNU General Public License
 version 2 is in /usr/share/common-licenses/GPL-2.
EOF
}

# installed_size DIR: kB of the package contents, for the control file.
installed_size() {
    du -sk --exclude=DEBIAN "$1" | cut -f1
}

build_deb() {
    local dir=$1 deb=$2
    find "$dir" -type d -exec chmod 0755 {} +
    dpkg-deb --root-owner-group -Zxz --build "$dir" "$deb" >&2 ||
        die "dpkg-deb failed for $deb"
}

# --- (a) pvrdma-dkms: the module's sources for DKMS ---------------------
d=$work/dkms
src=$d/usr/src/pvrdma-$ver
mkdir -p "$src/include" "$d/DEBIAN" "$d/etc/modprobe.d" \
         "$d/usr/share/doc/pvrdma-dkms"
for f in "$PVRDMA_TOP"/guest-driver/*.[ch]; do
    case $f in *.mod.c) continue ;; esac
    install -m 0644 "$f" "$src/"
done
install -m 0644 "$PVRDMA_TOP/include/pvrdma_dev_abi.h" "$src/include/"
# The tree's Kbuild finds the ABI header in ../include; the package keeps
# it in include/ beside the sources.
# shellcheck disable=SC2016 # $(src) is make's, not the shell's
sed 's|-I$(src)/\.\./include|-I$(src)/include|' \
    "$PVRDMA_TOP/guest-driver/Kbuild" > "$src/Kbuild"
# shellcheck disable=SC2016
grep -q 'I$(src)/include' "$src/Kbuild" ||
    die "guest-driver/Kbuild: the ABI header's include path was not rewritten"
subst "$PKG/dkms/dkms.conf.in" "$src/dkms.conf"
install -m 0644 "$PKG/dkms/pvrdma.conf" "$d/etc/modprobe.d/pvrdma.conf"
install -m 0644 "$PKG/dkms/README.Debian" "$d/usr/share/doc/pvrdma-dkms/"
copyright "$d/usr/share/doc/pvrdma-dkms/copyright"
subst "$PKG/dkms/postinst" "$d/DEBIAN/postinst" 0755
subst "$PKG/dkms/prerm" "$d/DEBIAN/prerm" 0755
echo /etc/modprobe.d/pvrdma.conf > "$d/DEBIAN/conffiles"
cat > "$d/DEBIAN/control" <<EOF
Package: pvrdma-dkms
Version: $ver
Architecture: all
Maintainer: $MAINTAINER
Section: kernel
Priority: optional
Depends: dkms (>= 3.0)
Recommends: linux-headers-amd64 | linux-headers, $PROVIDER_PKG
Installed-Size: $(installed_size "$d")
Description: pvrdma guest kernel module (DKMS source)
 $HOMEPAGE_NOTE
 .
 The guest driver pvrdma.ko as DKMS source: dkms builds and installs it
 for the running kernel (with its headers installed) and rebuilds it on
 kernel upgrades. Nothing is blacklisted; /etc/modprobe.d/pvrdma.conf
 documents the PCI ID overlap with the upstream vmw_pvrdma driver.
EOF
build_deb "$d" "$out/pvrdma-dkms_${ver}_all.deb"

# --- (b) the provider for Debian's libibverbs ----------------------------
stage=$("$PVRDMA_TOP/scripts/build-rdma-core.sh")
so=$stage/usr/lib/$MULTIARCH/libibverbs/libpvrdma-rdmav34.so
[ -e "$so" ] || die "$so missing from the rdma-core build"
d=$work/provider
pdir=$d/usr/lib/$MULTIARCH/libibverbs
mkdir -p "$pdir" "$d/DEBIAN" "$d/etc/libibverbs.d" \
         "$d/usr/share/doc/$PROVIDER_PKG"
install -m 0644 "$so" "$pdir/"
strip --strip-unneeded "$pdir/libpvrdma-rdmav34.so"
# Installed under the stock provider's name too (that file is diverted by
# preinst): see packaging/provider/README.Debian.
ln -s libpvrdma-rdmav34.so "$pdir/libvmw_pvrdma-rdmav34.so"
echo "driver pvrdma" > "$d/etc/libibverbs.d/pvrdma.driver"
install -m 0644 "$PKG/provider/README.Debian" "$d/usr/share/doc/$PROVIDER_PKG/"
copyright "$d/usr/share/doc/$PROVIDER_PKG/copyright"
install -m 0755 "$PKG/provider/preinst" "$d/DEBIAN/preinst"
install -m 0755 "$PKG/provider/postrm" "$d/DEBIAN/postrm"
echo /etc/libibverbs.d/pvrdma.driver > "$d/DEBIAN/conffiles"
# Only symbols libibverbs 44 (Debian 12) has: public IBVERBS_1.x and the
# provider ABI IBVERBS_PRIVATE_34. A newer private ABI would not load.
objdump -T "$pdir/libpvrdma-rdmav34.so" | grep -o 'IBVERBS_PRIVATE_[0-9]*' |
    sort -u | grep -qvx IBVERBS_PRIVATE_34 &&
    die "the provider needs a private libibverbs ABI other than 34"
glibc=$(objdump -T "$pdir/libpvrdma-rdmav34.so" |
        grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
cat > "$d/DEBIAN/control" <<EOF
Package: $PROVIDER_PKG
Version: $ver
Architecture: amd64
Maintainer: $MAINTAINER
Section: net
Priority: optional
Depends: libibverbs1 (>= 44), libc6 (>= $glibc)
Recommends: pvrdma-dkms
Suggests: ibverbs-utils
Installed-Size: $(installed_size "$d")
Description: libibverbs provider for QEMU's paravirtual RDMA device
 $HOMEPAGE_NOTE
 .
 The user-space driver (provider ABI 34, libibverbs 44 and later) of the
 pvrdma device: kernel-bypass verbs for processes in the guest. It is
 used instead of ibverbs-providers' vmw_pvrdma for this device (a dpkg
 diversion, undone on removal).
EOF
build_deb "$d" "$out/${PROVIDER_PKG}_${ver}_amd64.deb"

log "packages in $out (version $ver)"
echo "$out/pvrdma-dkms_${ver}_all.deb"
echo "$out/${PROVIDER_PKG}_${ver}_amd64.deb"
