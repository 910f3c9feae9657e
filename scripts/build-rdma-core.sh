#!/usr/bin/env bash
# Build rdma-core 56.1 (Debian 13's orig tarball) with our provider
# (guest-provider/ -> providers/pvrdma, libpvrdma-rdmav34.so) and install it
# into a staging tree laid out like Debian's packages (/usr/bin,
# /usr/lib/x86_64-linux-gnu, .../libibverbs, /etc/libibverbs.d), ready to be
# copied into a guest image. Prints the staging path on stdout.
#
# Cached under $PVRDMA_CACHE/rdma-core: the unpacked tree is keyed by the
# hook patch, the build directory also by the cmake options. The provider
# is synced in by content, so ninja recompiles only the files that changed.
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

RDMA_CORE_DEB_VERSION=$RDMA_CORE_VERSION-1
RDMA_CORE_MULTIARCH=x86_64-linux-gnu

# Debian's layout (debian/rules of rdma-core 56.1-1 plus debhelper's
# defaults); libibverbs compiles in the provider dir
# /usr/lib/x86_64-linux-gnu/libibverbs and the config dir /etc/libibverbs.d.
RDMA_CORE_CMAKE_OPTS=(
    -GNinja
    -DNO_MAN_PAGES=1
    -DNO_PYVERBS=1
    -DENABLE_WERROR=1
    -DCMAKE_INSTALL_PREFIX=/usr
    -DCMAKE_INSTALL_SYSCONFDIR=/etc
    "-DCMAKE_INSTALL_LIBDIR=lib/$RDMA_CORE_MULTIARCH"
    -DCMAKE_INSTALL_LIBEXECDIR=/usr/lib
    -DCMAKE_INSTALL_RUNDIR=/run
    -DCMAKE_INSTALL_SHAREDSTATEDIR=/var/lib
    -DCMAKE_INSTALL_UDEV_RULESDIR=/usr/lib/udev/rules.d
    -DCMAKE_INSTALL_SYSTEMD_SERVICEDIR=/usr/lib/systemd/system
    -DDISTRO_FLAVOUR=Debian
)

for tool in cmake ninja rsync patch; do
    command -v "$tool" >/dev/null || die "$tool not installed"
done

dl=$PVRDMA_CACHE/dl
mkdir -p "$dl"
orig=$dl/rdma-core_${RDMA_CORE_VERSION}.orig.tar.gz
if [ ! -e "$orig" ]; then
    trixie_apt_setup
    log "downloading rdma-core $RDMA_CORE_DEB_VERSION source from trixie"
    # The .dsc answers 404, so apt-get fails after fetching the tarballs:
    # judge by the file, not by the exit status.
    # shellcheck disable=SC2046
    (cd "$dl" && apt-get $(trixie_apt_opts) -q source --download-only \
        "rdma-core=$RDMA_CORE_DEB_VERSION" >&2) ||
        log "apt-get source exited non-zero (expected: the .dsc is missing)"
fi
[ -e "$orig" ] || die "rdma-core source $orig missing after download"

# The unpacked tree (keyed by the hook patch) with our provider synced in.
src=$(rdma_core_tree "$RDMA_CORE_VERSION" "$orig")
key=${src##*-}
top=$PVRDMA_CACHE/rdma-core

cfgkey=$(printf '%s\n' "${RDMA_CORE_CMAKE_OPTS[@]}" | sha256sum | cut -c1-8)
bld=$top/build-$RDMA_CORE_VERSION-$key-$cfgkey
stage=$top/stage-$RDMA_CORE_VERSION-$key-$cfgkey
if [ ! -e "$bld/build.ninja" ]; then
    log "configuring rdma-core in $bld"
    rm -rf "$bld" && mkdir -p "$bld"
    (cd "$bld" && cmake "${RDMA_CORE_CMAKE_OPTS[@]}" "$src" >&2) ||
        die "rdma-core cmake failed (see output above)"
fi

log "building rdma-core"
SECONDS=0
ninja -C "$bld" >&2 || die "rdma-core build failed"
log "build took ${SECONDS}s"

# A fresh install each time, mirrored into the stable staging path so that
# files dropped from the build do not linger there.
log "staging into $stage"
rm -rf "$stage.new"
DESTDIR=$stage.new ninja -C "$bld" install >/dev/null ||
    die "rdma-core install failed"
mkdir -p "$stage"
rsync -a --delete "$stage.new/" "$stage/"
rm -rf "$stage.new"

libdir=usr/lib/$RDMA_CORE_MULTIARCH
for f in usr/bin/ibv_devinfo usr/bin/ibv_rc_pingpong usr/bin/rping \
         "$libdir/libibverbs.so.1" "$libdir/librdmacm.so.1" \
         "$libdir/libibumad.so.3" \
         "$libdir/libibverbs/libpvrdma-rdmav34.so" \
         "$libdir/libibverbs/libvmw_pvrdma-rdmav34.so" \
         etc/libibverbs.d/pvrdma.driver; do
    [ -e "$stage/$f" ] || die "staging tree lacks $f"
done
# libibverbs looks for providers in the directory compiled into it.
grep -qaF "/$libdir/libibverbs" "$stage/$libdir/libibverbs.so.1" ||
    die "libibverbs.so.1 does not search /$libdir/libibverbs"

echo "$stage"
