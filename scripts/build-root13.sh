#!/usr/bin/env bash
# Make a Debian 13 (trixie) root with debootstrap, holding what building an
# out-of-tree module against Debian's newer kernel headers needs: gcc-14
# (their Makefiles pass options gcc-12 rejects) and a glibc new enough for
# their prebuilt tools (objtool, modpost, resolve_btfids want glibc 2.38;
# Debian 12 has 2.36). Prints the root's path on stdout, logs on stderr.
#
# Cached under $PVRDMA_CACHE/root13-<key>, key = hash of this script, so a
# changed package list makes a new root. The root is built under a
# temporary name and renamed into place only when complete: an interrupted
# run leaves nothing that looks finished (the next run removes the rest).
#
# The mirror is taken from the system's own apt sources (the first stanza
# of /etc/apt/sources.list.d/debian.sources), as lib.sh does; the system's
# apt setup is only read.
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

ROOT13_SUITE=trixie
# Kernel header builds: compiler, make, the tools Kbuild calls (bc, bison,
# flex, pahole for BTF, depmod/modinfo), libelf for objtool and zstd/xz
# for module compression.
ROOT13_PACKAGES=(
    gcc-14 gcc libc6-dev make bc bison flex libelf-dev libssl-dev
    dwarves kmod xz-utils zstd ca-certificates
)

[ "$(id -u)" -eq 0 ] || die "debootstrap and chroot need root"

if ! command -v debootstrap >/dev/null; then
    log "installing debootstrap on the host"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        --no-install-recommends debootstrap >&2 ||
        die "cannot install debootstrap (apt-get install debootstrap)"
fi

key=$(hash_inputs "$0")
root=$PVRDMA_CACHE/root13-$key
# One maker at a time (two would share $root.tmp); the others wait and
# then find the root done.
exec 9> "$root.lock"
flock 9
if [ ! -e "$root/.done" ]; then
    mirror=$(debian_mirror)
    [ -n "$mirror" ] || die "no URIs: line in the system's debian.sources"
    tmp=$root.tmp
    umount_below "$tmp"
    rm -rf "$tmp"
    log "debootstrap $ROOT13_SUITE into $tmp (about a minute, once)"
    SECONDS=0
    incl=$(IFS=,; echo "${ROOT13_PACKAGES[*]}")
    trap 'umount_below "$tmp"' EXIT
    debootstrap --variant=minbase --components=main \
        --include="$incl" "$ROOT13_SUITE" "$tmp" "$mirror" >&2 ||
        die "debootstrap failed (log: $tmp/debootstrap/debootstrap.log)"
    umount_below "$tmp"
    trap - EXIT
    # No downloaded packages kept in the root; a tidy marker for the user.
    rm -f "$tmp"/var/cache/apt/archives/*.deb
    for t in gcc-14 make bc bison flex pahole depmod; do
        chroot "$tmp" sh -c "command -v $t" >/dev/null ||
            die "the new root lacks $t"
    done
    [ -e "$tmp/dev/null" ] || die "the new root has no /dev/null"
    log "root built in ${SECONDS}s"
    touch "$tmp/.done"
    rm -rf "$root"
    mv "$tmp" "$root"
fi
echo "$root"
