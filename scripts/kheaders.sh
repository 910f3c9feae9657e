# shellcheck shell=bash
# Debian's kernel headers for out-of-tree module builds. Sourced after
# scripts/lib.sh, by scripts/build-driver-kernels.sh (our module against
# each series) and tests/guest/stockdrv.sh (the upstream vmw_pvrdma
# driver for the 6.12 guest).
#
# Debian 12's 6.1 headers are the host's own (/usr/src/linux-headers-REL,
# scripts/install-deps.sh). Newer series' (6.12 in Debian 13, 7.x) need
# gcc-14 and glibc >= 2.38, so their .debs are unpacked into the Debian 13
# root of scripts/build-root13.sh and builds against them run there under
# chroot. Versions are resolved at run time from the private kernel lists
# (lib.sh, kapt_*; old ABIs disappear); the .debs are cached under
# $PVRDMA_CACHE/kernel-headers, keyed by release and package version, and
# unpacked into the root once.
#
#   kheaders_root               $KH_ROOT: the Debian 13 root (made once);
#                               the private kernel lists refreshed
#   kheaders_prepare SERIES     the newest headers of SERIES (6.12, or 7
#                               for any 7.x) whose compiler the root has,
#                               only release $KERNEL_RELEASE if that is
#                               set, fetched and unpacked into the root:
#                               $KH_REL and $KH_VER (release, package
#                               version) set; status 1 if there are none
#   kheaders_make WHERE REL DIR [ARG...]
#                               make modules in DIR against REL's headers,
#                               on the host (WHERE=host) or in the root
#                               (WHERE=root, DIR inside $KH_ROOT); ARGs
#                               go on make's command line
#                               (CONFIG_FOO=m); output on stdout/stderr

KH_CACHE=$PVRDMA_CACHE/kernel-headers
KH_JOBS=${KH_JOBS:-2}
KH_ROOT=

kheaders_root() {
    KH_ROOT=$("$PVRDMA_TOP/scripts/build-root13.sh") ||
        die "cannot make the Debian 13 root"
    kapt_update
}

# _kheaders_resolve SERIES: "<release> <version> <compiler>" of the newest
# linux-headers-amd64 of SERIES whose compiler the root has (and whose
# release is $KERNEL_RELEASE, if set), or nothing.
_kheaders_resolve() {
    local series=$1 v rel cc
    kapt_releases "$series" linux-headers-amd64 | while read -r rel v; do
        [ -z "${KERNEL_RELEASE:-}" ] || [ "$rel" = "$KERNEL_RELEASE" ] ||
            continue
        cc=$(kapt_depends "linux-headers-$rel" "$v" |
             sed -n 's/^\(gcc-[0-9]*\)\(-for-host\)\{0,1\}$/\1/p' | head -n 1)
        cc=${cc:-gcc}
        if ! chroot "$KH_ROOT" sh -c "command -v $cc" >/dev/null 2>&1; then
            log "skipping $rel ($v): it needs $cc, which the Debian 13 root lacks"
            continue
        fi
        echo "$rel $v $cc"
        break
    done
}

# _kheaders_fetch RELEASE VERSION: directory of the cached .debs of the
# headers (arch and common) and kbuild packages of RELEASE.
_kheaders_fetch() {
    local rel=$1 v=$2 dir pkgs
    dir=$KH_CACHE/$rel-$v
    if [ ! -e "$dir/.done" ]; then
        mapfile -t pkgs < <(kapt_depends "linux-headers-$rel" "$v" |
            grep -E '^linux-(headers-.*-common|kbuild-.*)$')
        pkgs=("linux-headers-$rel" "${pkgs[@]}")
        [ "${#pkgs[@]}" -ge 2 ] ||
            die "linux-headers-$rel $v: no -common/kbuild dependency found"
        log "downloading ${pkgs[*]} ($v)"
        rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
        # _apt cannot write into the cache: let it, quietly.
        chmod 0777 "$dir.tmp"
        # shellcheck disable=SC2046
        (cd "$dir.tmp" && apt-get $(kapt_opts) -q download \
            $(printf '%s\n' "${pkgs[@]}" | sed "s/\$/=$v/") >&2) ||
            die "cannot download the $rel headers (apt lists out of date? rm $KAPT_DIR/lists/.updated)"
        chmod 0755 "$dir.tmp"
        touch "$dir.tmp/.done"
        rm -rf "$dir" && mv "$dir.tmp" "$dir"
    fi
    echo "$dir"
}

# _kheaders_remove RELEASE: the unpacked trees of RELEASE out of the root.
_kheaders_remove() {
    local base=${1%-amd64}
    rm -rf "$KH_ROOT/usr/src/linux-headers-$1" \
           "$KH_ROOT/usr/src/linux-headers-$base-common" \
           "$KH_ROOT/usr/lib/linux-kbuild-$base" "$KH_ROOT/usr/lib/modules/$1"
    rm -f "$KH_ROOT/var/lib/pvrdma-headers/$1"
}

# _kheaders_unpack SERIES RELEASE VERSION DIR: the .debs of DIR unpacked
# into the root (dpkg -x: files only, no maintainer scripts), once per
# version; other releases of SERIES are removed from the root first.
_kheaders_unpack() {
    local series=$1 rel=$2 v=$3 dir=$4 mark deb old
    mark=$KH_ROOT/var/lib/pvrdma-headers/$rel
    [ "$(cat "$mark" 2>/dev/null)" = "$v" ] && return 0
    for old in "$KH_ROOT"/var/lib/pvrdma-headers/*; do
        old=$(basename "$old")
        case $old in
        "$rel"|"*") ;;
        "$series".*)
            log "removing the superseded $old headers from the root"
            _kheaders_remove "$old" ;;
        esac
    done
    log "unpacking the $rel headers into the root"
    _kheaders_remove "$rel"
    for deb in "$dir"/*.deb; do
        dpkg -x "$deb" "$KH_ROOT" || die "cannot unpack $deb"
    done
    mkdir -p "$(dirname "$mark")"
    echo "$v" > "$mark"
}

kheaders_prepare() {
    local series=$1 rel='' v='' dir
    # shellcheck disable=SC2034 # (for the caller)
    KH_REL='' KH_VER=''
    [ -n "$KH_ROOT" ] || kheaders_root
    read -r rel v _ < <(_kheaders_resolve "$series") || true
    if [ -z "$rel" ]; then
        # The lists may predate the current kernels: once more, fresh.
        kapt_update force
        read -r rel v _ < <(_kheaders_resolve "$series") || true
    fi
    if [ -z "$rel" ]; then
        log "no buildable linux-headers-amd64 of series $series${KERNEL_RELEASE:+ (release $KERNEL_RELEASE)} in the archive"
        return 1
    fi
    log "series $series: $rel ($v)"
    dir=$(_kheaders_fetch "$rel" "$v") || exit 1
    _kheaders_unpack "$series" "$rel" "$v" "$dir"
    # shellcheck disable=SC2034 # (for the caller)
    KH_REL=$rel KH_VER=$v
}

kheaders_make() {
    local where=$1 rel=$2 dir=$3
    shift 3
    if [ "$where" = host ]; then
        LC_ALL=C make -C "/usr/src/linux-headers-$rel" M="$dir" \
            -j"$KH_JOBS" "$@" modules
        return
    fi
    # objtool reads /proc (7.x): a proc mounted in a private mount
    # namespace, gone with it, so an interrupted build leaves no mount.
    # shellcheck disable=SC2016
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C \
        unshare --mount --propagation private sh -c \
        'mount -t proc proc "$1/proc" && shift && exec chroot "$@"' sh \
        "$KH_ROOT" "$KH_ROOT" make -C "/usr/src/linux-headers-$rel" \
        M="${dir#"$KH_ROOT"}" -j"$KH_JOBS" "$@" modules
}
