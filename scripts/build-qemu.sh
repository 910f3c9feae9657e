#!/usr/bin/env bash
# Build qemu-system-x86_64 10.0 (Debian 13's source package, with Debian's
# own patches) with hw/pvrdma compiled in. Our patches, scripts/qemu/*.patch
# in name order, go on top: the hooks that add hw/pvrdma to the build, and
# fixes of QEMU bugs our tests meet (each file says which). The unpacked
# tree and the build directory are cached under $PVRDMA_CACHE/qemu, keyed
# by the source version, those patches and the configure options;
# hw/pvrdma and include/ are synced in by content, so ninja recompiles
# only what changed.
. "$(dirname "$0")/lib.sh"

QEMU_CONFIGURE_OPTS=(
    --target-list=x86_64-softmmu
    --disable-install-blobs --disable-docs --disable-werror
    --disable-gtk --disable-sdl --disable-vnc --disable-opengl
    --disable-xen --disable-spice --enable-slirp
)

dl=$PVRDMA_CACHE/dl
mkdir -p "$dl"
orig=$dl/qemu_${QEMU_SRC_VERSION}.orig.tar.xz
debtar=$dl/qemu_${QEMU_DEB_VERSION#*:}.debian.tar.xz
if [ ! -e "$orig" ] || [ ! -e "$debtar" ] ||
   ! ls "$dl"/meson_*_all.deb >/dev/null 2>&1; then
    trixie_apt_setup
    log "downloading QEMU $QEMU_DEB_VERSION source and meson from trixie"
    # shellcheck disable=SC2046
    (cd "$dl" && apt-get $(trixie_apt_opts) -q source --download-only \
        "qemu=$QEMU_DEB_VERSION" >&2 &&
        apt-get $(trixie_apt_opts) -q download meson >&2)
fi
[ -e "$orig" ] || die "QEMU source $orig missing after download"

# meson >= 1.5 (Debian 12 has 1.0): Debian 13's arch-independent package.
tools=$PVRDMA_CACHE/tools/$(basename "$(ls "$dl"/meson_*_all.deb | tail -n 1)" .deb)
if [ ! -d "$tools" ]; then
    mkdir -p "$(dirname "$tools")"
    dpkg -x "$(ls "$dl"/meson_*_all.deb | tail -n 1)" "$tools.tmp"
    mv "$tools.tmp" "$tools"
fi

patches=("$PVRDMA_TOP"/scripts/qemu/*.patch)
key=$(hash_inputs "${patches[@]}" "$debtar")
src=$PVRDMA_CACHE/qemu/src-$QEMU_SRC_VERSION-$key
if [ ! -e "$src/.done" ]; then
    log "unpacking QEMU into $src"
    rm -rf "$src" "$src.tmp" && mkdir -p "$src.tmp"
    tar -xJf "$orig" -C "$src.tmp" --strip-components=1
    tar -xJf "$debtar" -C "$src.tmp"
    while read -r p; do
        case "$p" in ''|'#'*) continue ;; esac
        patch -s -p1 -d "$src.tmp" < "$src.tmp/debian/patches/$p"
    done < "$src.tmp/debian/patches/series"
    for p in "${patches[@]}"; do
        patch -s -p1 -d "$src.tmp" < "$p" || die "$p does not apply"
    done
    mkdir -p "$src.tmp/hw/pvrdma"
    touch "$src.tmp/.done"
    mv "$src.tmp" "$src"
fi

# Sync by checksum: unchanged files keep their mtime, so ninja skips them.
rsync -rc --delete --exclude=/include/ "$PVRDMA_TOP/hw/pvrdma/" "$src/hw/pvrdma/"
rsync -rc --delete "$PVRDMA_TOP/include/" "$src/hw/pvrdma/include/"

cfgkey=$(printf '%s\n' "${QEMU_CONFIGURE_OPTS[@]}" | sha256sum | cut -c1-8)
bld=$PVRDMA_CACHE/qemu/build-$QEMU_SRC_VERSION-$key-$cfgkey
export PYTHONPATH=$tools/usr/lib/python3/dist-packages
export CCACHE_DIR=$PVRDMA_CACHE/ccache
if [ ! -e "$bld/build.ninja" ]; then
    log "configuring QEMU in $bld"
    rm -rf "$bld" && mkdir -p "$bld"
    (cd "$bld" && "$src/configure" --python=/usr/bin/python3 \
        "${QEMU_CONFIGURE_OPTS[@]}" >&2) ||
        die "QEMU configure failed (see output above)"
fi
log "building qemu-system-x86_64"
ninja -C "$bld" qemu-system-x86_64 >&2 || die "QEMU build failed"
ln -sfn "$bld/qemu-system-x86_64" "$PVRDMA_OUT/qemu-system-x86_64"
echo "$PVRDMA_OUT/qemu-system-x86_64"
