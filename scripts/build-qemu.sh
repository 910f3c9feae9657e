#!/usr/bin/env bash
# Build qemu-system-x86_64 10.0 (Debian 13's source package, with Debian's
# own patches) with hw/pvrdma compiled in. Our patches, scripts/qemu/*.patch
# in name order, go on top: the hooks that add hw/pvrdma to the build, and
# fixes of QEMU bugs our tests meet (each file says which). The unpacked
# tree and the build directory are cached under $PVRDMA_CACHE/qemu, keyed
# by the source version, those patches and the configure options;
# hw/pvrdma and include/ are synced in by content, so ninja recompiles
# only what changed.
#
# QEMU_SERIES=newest builds the newest QEMU of Debian's archive instead
# (trixie-backports or sid), resolved at run time: the newest source
# version listed there whose source actually downloads (newer ones may
# answer 404), else the next older one. The choice is kept in
# $PVRDMA_CACHE/qemu/newest-version until the lists are refreshed (daily).
# Its own source and build directories, keyed the same way; linked as
# build/qemu-system-x86_64-newest. A patch with a variant in
# scripts/qemu/MAJOR.MINOR/ (same name) is replaced by it for that series.
# QEMU-facing API differences: hw/pvrdma/pvrdma_qemu_compat.h.
# Prints the binary's path; $bld/pvrdma-qemu.env beside it names the
# Debian source version and the source tree (for packaging).
. "$(dirname "$0")/lib.sh"

QEMU_CONFIGURE_OPTS=(
    --target-list=x86_64-softmmu
    --disable-install-blobs --disable-docs --disable-werror
    --disable-gtk --disable-sdl --disable-vnc --disable-opengl
    --disable-xen --disable-spice --enable-slirp
)

dl=$PVRDMA_CACHE/dl
mkdir -p "$dl"

# Private deb-src configuration for the newest QEMU (lib.sh's
# suite_apt_setup, in $PVRDMA_CACHE/apt-qemu-newest).
NEWEST_APT_DIR=$PVRDMA_CACHE/apt-qemu-newest
NEWEST_SUITES="trixie-backports sid"
# qemu_newest: set QEMU_DEB_VERSION and QEMU_SRC_VERSION to the newest
# qemu source of $NEWEST_SUITES whose files download into $dl.
qemu_newest() {
    local d=$NEWEST_APT_DIR choice=$PVRDMA_CACHE/qemu/newest-version v
    mkdir -p "$(dirname "$choice")"
    suite_apt_setup "$NEWEST_SUITES" qemu-newest
    # Fresh lists may name a newer QEMU: choose again.
    [ "$choice" -nt "$d/lists/.updated" ] || rm -f "$choice"
    if [ -s "$choice" ]; then
        QEMU_DEB_VERSION=$(cat "$choice")
        QEMU_SRC_VERSION=${QEMU_DEB_VERSION#*:}
        QEMU_SRC_VERSION=${QEMU_SRC_VERSION%-*}
        [ -e "$dl/qemu_${QEMU_SRC_VERSION}.orig.tar.xz" ] &&
            [ -e "$dl/qemu_${QEMU_DEB_VERSION#*:}.debian.tar.xz" ] && return
    fi
    # shellcheck disable=SC2046
    for v in $(apt-cache $(private_apt_opts "$d") showsrc qemu 2>/dev/null |
               sed -n 's/^Version: //p' | sort -u -rV); do
        QEMU_DEB_VERSION=$v
        QEMU_SRC_VERSION=${v#*:}
        QEMU_SRC_VERSION=${QEMU_SRC_VERSION%-*}
        if [ ! -e "$dl/qemu_${QEMU_SRC_VERSION}.orig.tar.xz" ] ||
           [ ! -e "$dl/qemu_${v#*:}.debian.tar.xz" ]; then
            log "downloading QEMU $v source ($NEWEST_SUITES)"
            # shellcheck disable=SC2046
            (cd "$dl" && apt-get $(private_apt_opts "$d") -q source \
                --download-only "qemu=$v" >&2) ||
                log "QEMU $v: its source does not download, trying older"
        fi
        if [ -e "$dl/qemu_${QEMU_SRC_VERSION}.orig.tar.xz" ] &&
           [ -e "$dl/qemu_${v#*:}.debian.tar.xz" ]; then
            echo "$v" > "$choice"
            log "newest QEMU that downloads: $v"
            return
        fi
    done
    die "no qemu source of $NEWEST_SUITES downloads"
}

link=$PVRDMA_OUT/qemu-system-x86_64
case ${QEMU_SERIES:-base} in
base) ;;
newest) qemu_newest; link=$link-newest ;;
*) die "QEMU_SERIES=$QEMU_SERIES: want base or newest" ;;
esac

orig=$dl/qemu_${QEMU_SRC_VERSION}.orig.tar.xz
debtar=$dl/qemu_${QEMU_DEB_VERSION#*:}.debian.tar.xz
if [ ! -e "$orig" ] || [ ! -e "$debtar" ] ||
   ! ls "$dl"/meson_*_all.deb >/dev/null 2>&1; then
    trixie_apt_setup
    log "downloading what is missing of QEMU $QEMU_DEB_VERSION's source and meson (trixie)"
    # shellcheck disable=SC2046
    (cd "$dl" && { [ -e "$orig" ] && [ -e "$debtar" ] ||
        apt-get $(trixie_apt_opts) -q source --download-only \
        "qemu=$QEMU_DEB_VERSION" >&2; } &&
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

# One run at a time per QEMU version (tests/guest/run-all.sh's background
# builds, scripts/prebuild.sh, run this while tests do): held until exit.
mkdir -p "$PVRDMA_CACHE/qemu"
exec {lock_fd}> "$PVRDMA_CACHE/qemu/lock-$QEMU_SRC_VERSION"
flock "$lock_fd"

patches=()
for p in "$PVRDMA_TOP"/scripts/qemu/*.patch; do
    v=$PVRDMA_TOP/scripts/qemu/${QEMU_SRC_VERSION%.*}/$(basename "$p")
    [ -e "$v" ] && p=$v
    patches+=("$p")
done
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
        patch -s -p1 -d "$src.tmp" < "$p" ||
            die "$p does not apply to QEMU $QEMU_SRC_VERSION"
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
# fabric-tls-creds needs QEMU's TLS (GnuTLS): a build made without it is
# made again once it is installed.
pkg-config --exists gnutls ||
    die "QEMU needs GnuTLS for fabric-tls-creds: install libgnutls28-dev" \
        "(bash scripts/install-deps.sh)"
if [ -e "$bld/config-host.h" ] &&
   ! grep -q '^#define CONFIG_GNUTLS$' "$bld/config-host.h"; then
    rm -f "$bld/build.ninja"
fi
if [ ! -e "$bld/build.ninja" ]; then
    log "configuring QEMU in $bld"
    rm -rf "$bld" && mkdir -p "$bld"
    (cd "$bld" && "$src/configure" --python=/usr/bin/python3 \
        "${QEMU_CONFIGURE_OPTS[@]}" >&2) ||
        die "QEMU configure failed (see output above)"
fi
log "building qemu-system-x86_64"
ninja -C "$bld" qemu-system-x86_64 >&2 || die "QEMU build failed"
printf 'QEMU_DEB_VERSION=%s\nQEMU_SRC_VERSION=%s\nQEMU_SRC_DIR=%s\n' \
    "$QEMU_DEB_VERSION" "$QEMU_SRC_VERSION" "$src" > "$bld/pvrdma-qemu.env"
relink "$bld/qemu-system-x86_64" "$link"
echo "$link"
