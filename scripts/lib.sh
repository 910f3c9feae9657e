# Common settings for the build and VM scripts. Sourced, not run.
# All expensive artefacts live under $PVRDMA_CACHE (outside the clone), in
# directories whose names carry a hash of their inputs.

set -euo pipefail

PVRDMA_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PVRDMA_CACHE=${PVRDMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pvrdma}
PVRDMA_OUT=${PVRDMA_OUT:-$PVRDMA_TOP/build}
mkdir -p "$PVRDMA_CACHE" "$PVRDMA_OUT"

QEMU_SRC_VERSION=10.0.13+ds
QEMU_DEB_VERSION=1:10.0.13+ds-0+deb13u1
RDMA_CORE_VERSION=56.1

log() { printf '[%s] %s\n' "$(basename "$0")" "$*" >&2; }
die() { printf '[%s] error: %s\n' "$(basename "$0")" "$*" >&2; exit 1; }

# relink TARGET LINK: LINK becomes a symbolic link to TARGET in one step
# (a rename over it), so that a process opening LINK meanwhile never
# finds it missing (scripts/prebuild.sh builds while tests run).
relink() { ln -sfn "$1" "$2.tmp$$" && mv -Tf "$2.tmp$$" "$2"; }

# hash_inputs FILE|DIR... : short hash of the contents of files and
# directories (with names relative to each argument, so that the same
# inputs in another clone give the same key)
hash_inputs() {
    local f
    for f in "$@"; do
        if [ -d "$f" ]; then
            (cd "$f" && find . -type f -print0 |
                LC_ALL=C sort -z | xargs -0 -r sha256sum)
        else
            printf '%s  %s\n' "$(sha256sum < "$f" | cut -d' ' -f1)" \
                "$(basename "$f")"
        fi
    done | sha256sum | cut -c1-12
}

# Private apt configuration for Debian 13 (trixie) sources and packages.
# Derived from the system's own sources file (same mirror URIs), so that no
# archive host name is written anywhere and the system apt setup is untouched.
TRIXIE_APT_DIR=$PVRDMA_CACHE/apt-trixie
# private_apt_opts DIR: apt options for a private configuration in DIR
# (sources.list.d, lists, archives), the system's apt setup left alone.
private_apt_opts() {
    echo "-o Dir::Etc::SourceList=/dev/null" \
         "-o Dir::Etc::SourceParts=$1/sources.list.d" \
         "-o Dir::State::Lists=$1/lists" \
         "-o Dir::Cache::Archives=$1/archives" \
         "-o Dir::State::Status=/dev/null" \
         "-o Debug::NoLocking=1"
}

# debian_mirror: the URI of the system's main archive stanza.
debian_mirror() {
    local sys=/etc/apt/sources.list.d/debian.sources
    [ -r "$sys" ] || die "$sys not found: cannot derive the Debian mirror"
    awk 'BEGIN { RS = "" } NR == 1' "$sys" |
        sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' | head -n 1
}

# umount_below DIR: unmount whatever an interrupted run left mounted in DIR
# (debootstrap mounts proc and sys in its target), deepest first.
umount_below() {
    local m
    awk -v d="$1" '$2 == d || index($2, d "/") == 1 { print $2 }' \
        /proc/mounts | sort -r | while read -r m; do
        umount -l "$m" || true
    done
}

trixie_apt_opts() {
    private_apt_opts "$TRIXIE_APT_DIR"
}

trixie_apt_setup() {
    local sys=/etc/apt/sources.list.d/debian.sources
    [ -r "$sys" ] || die "$sys not found: cannot derive the Debian mirror"
    mkdir -p "$TRIXIE_APT_DIR"/{sources.list.d,lists/partial,archives/partial}
    # Keep only the first stanza (the main archive), switch suite and types.
    awk 'BEGIN { RS = ""; ORS = "\n\n" } NR == 1' "$sys" |
        sed -e 's/^Types:.*/Types: deb deb-src/' \
            -e 's/^Suites:.*/Suites: trixie/' \
        > "$TRIXIE_APT_DIR/sources.list.d/trixie.sources"
    if [ ! -e "$TRIXIE_APT_DIR/lists/.updated" ] ||
       [ -n "$(find "$TRIXIE_APT_DIR/lists/.updated" -mtime +7)" ]; then
        # shellcheck disable=SC2046
        apt-get $(trixie_apt_opts) -q update >&2
        touch "$TRIXIE_APT_DIR/lists/.updated"
    fi
}

# Private apt configuration for Debian's newer kernels (6.12 in trixie and
# trixie-security, 7.x in trixie-backports and sid): headers for
# scripts/build-driver-kernels.sh, images for scripts/fetch-kernel.sh.
# Derived from the system's sources file like the one above; suites by
# stanza of the system file.
KAPT_MAIN_SUITES="trixie trixie-updates trixie-backports sid"
KAPT_SECURITY_SUITES="trixie-security"
KAPT_DIR=$PVRDMA_CACHE/apt-kernels

kapt_opts() {
    private_apt_opts "$KAPT_DIR"
}

# kapt_update [force]: write the private sources (the system's first main
# and first security stanza, with our suites) and refresh the lists when
# older than a day (kernels are replaced often and old ones vanish).
kapt_update() {
    mkdir -p "$KAPT_DIR"/{sources.list.d,lists/partial,archives/partial}
    debian_sources "$KAPT_MAIN_SUITES" "$KAPT_SECURITY_SUITES" \
        > "$KAPT_DIR/sources.list.d/kernels.sources"
    # One refresh at a time (two would share the lists directory).
    (
        flock 8
        if [ "${1:-}" = force ] || [ ! -e "$KAPT_DIR/lists/.updated" ] ||
           [ -n "$(find "$KAPT_DIR/lists/.updated" -mmin +1440)" ]; then
            # shellcheck disable=SC2046
            apt-get $(kapt_opts) -q update >&2 || die "apt-get update failed"
            touch "$KAPT_DIR/lists/.updated"
        fi
    ) 8> "$KAPT_DIR/.lock"
}

# kapt_depends PKG VERSION: the package names in PKG=VERSION's Depends.
kapt_depends() {
    # shellcheck disable=SC2046
    apt-cache $(kapt_opts) show "$1=$2" 2>/dev/null |
        sed -n 's/^Depends: //p' | head -n 1 | sed 's/[,|]/\n/g' |
        sed 's/^ *//; s/[ (].*//' | sed '/^$/d'
}

# kapt_releases SERIES META: "<release> <version>" for each version of
# META (linux-image-amd64 or linux-headers-amd64) in the private lists
# whose kernel release is of SERIES (6.12, or 7 for any 7.x), newest
# first. The release is the one META depends on (6.12.118+deb13-amd64).
kapt_releases() {
    local series=$1 meta=$2 v pkg rel
    # shellcheck disable=SC2046
    apt-cache $(kapt_opts) madison "$meta" |
        awk -F'|' '{ gsub(/ /, "", $2); print $2 }' | sort -u |
        sort -rV | while read -r v; do
        pkg=$(kapt_depends "$meta" "$v" |
              grep -m1 "^${meta%-amd64}-.*-amd64\$") || continue
        rel=${pkg#"${meta%-amd64}"-}
        case $rel in "$series".*) echo "$rel $v" ;; esac
    done
}

# Same trick for Debian 12 binary packages we only unpack (guest image):
# the system configuration is used read-only, with private caches.
BOOKWORM_APT_DIR=$PVRDMA_CACHE/apt-bookworm
bookworm_apt_opts() {
    echo "-o Dir::Cache::Archives=$BOOKWORM_APT_DIR/archives" \
         "-o Debug::NoLocking=1"
}

# fetch_deb DIR PKG... : download .debs (current versions) into DIR
fetch_deb() {
    local dir=$1; shift
    mkdir -p "$dir" "$BOOKWORM_APT_DIR/archives/partial"
    (cd "$dir" && apt-get $(bookworm_apt_opts) -q download "$@" >&2)
}

# Latest Debian 12 kernel ABI name, e.g. 6.1.0-41-amd64.
kernel_abi() {
    apt-cache depends linux-image-amd64 2>/dev/null |
        sed -n 's/.*Depends: linux-image-\(6\.1\.0-[0-9]*-amd64\).*/\1/p' |
        head -n 1
}

# Faster boots under TCG (scripts/vm.sh): a Debian bzImage decompresses
# itself (XZ) and a .cpio.gz image is gunzipped by the guest, both slowly
# in emulation (about 5 s of each boot's 9 on these machines). The same
# kernel as an ELF file with a PVH entry point (QEMU loads it directly)
# and the image uncompressed boot in about 3.5 s. Both are made once per
# input file (keyed by its path, size and time) in $PVRDMA_CACHE/boot,
# and dropped when no boot used them for three days.
#   boot_kernel FILE: FILE's vmlinux (ELF, PVH) if it is a bzImage
#     (xz, zstd or gzip) of a kernel built with CONFIG_PVH (the config
#     file beside it says so); else FILE itself
#   boot_initrd FILE: FILE uncompressed if it is gzip; else FILE itself
_boot_cached() { # FILE SUFFIX: the cache path for FILE's variant
    local key
    key=$(stat -L -c '%s %Y' "$1" | { cat; readlink -f "$1"; } |
          sha256sum | cut -c1-16)
    mkdir -p "$PVRDMA_CACHE/boot"
    # (what no boot used for three days goes: images are rebuilt often)
    find "$PVRDMA_CACHE/boot" -type f -mtime +3 -delete 2> /dev/null || true
    echo "$PVRDMA_CACHE/boot/$(basename "$1")-$key$2"
}
boot_kernel() {
    local f=$1 out rel cfg setup start len magic unz
    out=$(_boot_cached "$f" .elf)
    [ -s "$out" ] && touch "$out" && { echo "$out"; return; }
    rel=$(basename "$(readlink -f "$f")")
    cfg=$(dirname "$(readlink -f "$f")")/config-${rel#vmlinuz-}
    # The bzImage's setup header says where its compressed vmlinux is:
    # setup_sects at 0x1f1, payload_offset and payload_length at 0x248
    # (the payload ends with the vmlinux's size in 4 bytes).
    setup=$(od -An -tu1 -j $((0x1f1)) -N 1 "$f" 2> /dev/null | tr -d ' ') || true
    read -r start len < <(od -An -tu4 -j $((0x248)) -N 8 "$f" 2> /dev/null) || true
    [ "${setup:-0}" != 0 ] || setup=4
    start=$(((setup + 1) * 512 + ${start:-0}))
    magic=$(od -An -tx1 -j "$start" -N 4 "$f" 2> /dev/null | tr -d ' ') || true
    case $magic in
    fd377a58) unz="xz -dc" ;;
    28b52ffd) unz="zstd -dcq" ;;
    1f8b*) unz="gzip -dc" ;;
    *) unz= ;;
    esac
    if [ -n "$unz" ] && [ "${len:-0}" -gt 4 ] && grep -qs '^CONFIG_PVH=y' "$cfg" &&
       dd if="$f" iflag=skip_bytes,count_bytes skip="$start" count=$((len - 4)) \
          bs=1M status=none | $unz > "$out.$$" 2> /dev/null &&
       [ "$(od -An -tx1 -N 4 "$out.$$" | tr -d ' ')" = 7f454c46 ]; then
        mv -f "$out.$$" "$out"
        echo "$out"
    else
        rm -f "$out.$$"
        echo "$f"
    fi
}
boot_initrd() {
    local f=$1 out
    [ "$(head -c 2 "$f" | od -An -tx1 | tr -d ' ')" = 1f8b ] || { echo "$f"; return; }
    out=$(_boot_cached "$f" .cpio)
    if [ -s "$out" ]; then
        touch "$out"
    else
        gzip -dc "$f" > "$out.$$" && mv -f "$out.$$" "$out" ||
            { rm -f "$out.$$"; echo "$f"; return; }
    fi
    echo "$out"
}

# guest_files_cpio OUT CMD [SRC[:DST]...]: an uncompressed cpio archive at
# OUT holding each host file or directory SRC at DST in the guest (default
# /run/files/<name of SRC>) and, unless CMD is empty, CMD as /run/cmd (what
# the guest's /init runs); put before an image, the kernel unpacks both.
guest_files_cpio() {
    local out=$1 cmd=$2 dir a src dst
    shift 2
    dir=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-cpio.XXXXXX")
    mkdir -p "$dir/run/files"
    for a in "$@"; do
        src=${a%%:*} dst=
        [ "$src" != "$a" ] && dst=${a#*:}
        [ -e "$src" ] || { rm -rf "$dir"; die "--add $src: no such file or directory"; }
        dst=${dst:-/run/files/$(basename "$src")}
        mkdir -p "$dir$(dirname "$dst")"
        cp -a "$src" "$dir$dst"
    done
    [ -z "$cmd" ] || printf '%s\n' "$cmd" > "$dir/run/cmd"
    (cd "$dir" && find . | cpio -o -H newc --quiet) > "$out"
    rm -rf "$dir"
}

# Private apt configuration for the sources of any Debian suite (sid for
# scripts/build-provider-versions.sh), derived from the system's sources
# file exactly like the trixie one above: suite_apt_opts NAME,
# suite_apt_setup SUITES [NAME] (one suite, or several under NAME, in
# $PVRDMA_CACHE/apt-NAME; lists refreshed when older than a day, their
# lists/.updated touched then).
suite_apt_opts() {
    private_apt_opts "$PVRDMA_CACHE/apt-$1"
}

suite_apt_setup() {
    local suites=$1 name=${2:-$1}
    local d=$PVRDMA_CACHE/apt-$name
    local sys=/etc/apt/sources.list.d/debian.sources
    [ -r "$sys" ] || die "$sys not found: cannot derive the Debian mirror"
    mkdir -p "$d"/{sources.list.d,lists/partial,archives/partial}
    awk 'BEGIN { RS = ""; ORS = "\n\n" } NR == 1' "$sys" |
        sed -e 's/^Types:.*/Types: deb-src/' \
            -e "s/^Suites:.*/Suites: $suites/" \
        > "$d/sources.list.d/$name.sources"
    if [ ! -e "$d/lists/.updated" ] ||
       [ -n "$(find "$d/lists/.updated" -mmin +1440)" ]; then
        # shellcheck disable=SC2046
        apt-get $(suite_apt_opts "$name") -q update >&2 ||
            die "apt-get update ($suites) failed"
        touch "$d/lists/.updated"
    fi
}

# suite_source_version SUITE PKG: the version of source package PKG in
# SUITE's lists (newest if several).
suite_source_version() {
    # shellcheck disable=SC2046
    apt-cache $(suite_apt_opts "$1") showsrc "$2" 2>/dev/null |
        sed -n 's/^Version: //p' | sort -rV | head -n 1
}

# fetch_orig_source SUITE PKG DEBVERSION DIR: download PKG=DEBVERSION's
# source files into DIR. A missing .dsc (404) makes apt-get fail after
# the tarballs arrived, so callers judge by the orig tarball, not by the
# exit status.
fetch_orig_source() {
    mkdir -p "$4"
    # shellcheck disable=SC2046
    (cd "$4" && apt-get $(suite_apt_opts "$1") -q source --download-only \
        "$2=$3" >&2) ||
        log "apt-get source $2=$3 exited non-zero (a missing .dsc does that)"
}

# rdma_core_tree VERSION ORIG: unpack rdma-core's ORIG tarball once into
# $PVRDMA_CACHE/rdma-core/src-VERSION-<key> (key: hash of our hook patch,
# scripts/rdma-core/pvrdma-provider.patch, applied to it), sync our
# provider into its providers/pvrdma and print the tree's path. The sync
# goes by checksum: unchanged files keep their mtime, so ninja skips them.
# The device ABI header sits beside the provider sources (excluded from
# the --delete of the first rsync, refreshed by the second).
rdma_core_tree() {
    local ver=$1 orig=$2 hook key src
    hook=$PVRDMA_TOP/scripts/rdma-core/pvrdma-provider.patch
    [ -d "$PVRDMA_TOP/guest-provider" ] || die "guest-provider/ missing"
    [ -e "$hook" ] || die "$hook missing"
    key=$(hash_inputs "$hook")
    src=$PVRDMA_CACHE/rdma-core/src-$ver-$key
    if [ ! -e "$src/.done" ]; then
        log "unpacking rdma-core $ver into $src"
        rm -rf "$src" "$src.tmp" && mkdir -p "$src.tmp"
        tar -xf "$orig" -C "$src.tmp" --strip-components=1
        patch -s -p1 -d "$src.tmp" < "$hook" ||
            die "hook patch does not apply to rdma-core $ver"
        mkdir -p "$src.tmp/providers/pvrdma"
        touch "$src.tmp/.done"
        mv "$src.tmp" "$src"
    fi
    rsync -rc --delete --exclude=pvrdma_dev_abi.h --exclude='*~' \
        "$PVRDMA_TOP/guest-provider/" "$src/providers/pvrdma/"
    rsync -c "$PVRDMA_TOP/include/pvrdma_dev_abi.h" "$src/providers/pvrdma/"
    echo "$src"
}

# debian_sources MAIN SECURITY: the system's first main and first security
# stanza (same URIs), Types: deb, with their suites replaced by MAIN and
# SECURITY ("trixie trixie-updates", "trixie-security"): an apt sources
# file (deb822) for another release, no host name written by us.
debian_sources() {
    local sys=/etc/apt/sources.list.d/debian.sources
    [ -r "$sys" ] || die "$sys not found: cannot derive the Debian mirror"
    awk -v main="$1" -v sec="$2" '
        BEGIN { RS = ""; FS = "\n" }
        {
            issec = ($0 ~ /(^|\n)Suites:[^\n]*-security/)
            if (issec ? seen_sec++ : seen_main++)
                next
            for (i = 1; i <= NF; i++) {
                if ($i ~ /^Types:/)
                    $i = "Types: deb"
                else if ($i ~ /^Suites:/)
                    $i = "Suites: " (issec ? sec : main)
                print $i
            }
            print ""
        }' "$sys"
}
