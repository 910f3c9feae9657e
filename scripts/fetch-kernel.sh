#!/usr/bin/env bash
# Fetch a Debian kernel for the guest and unpack it into the cache, keyed
# by its release name. Prints the tree's path (TREE/root holds the
# package's files, with TREE/root/boot/vmlinuz-<release>).
#
#   fetch-kernel.sh          Debian 12's current 6.1 (the default guest
#                            kernel); its headers come from the host's apt
#                            (scripts/install-deps.sh)
#   fetch-kernel.sh SERIES   the newest Debian kernel of SERIES, e.g. 6.12
#                            (Debian 13: trixie, trixie-security), resolved
#                            at run time through the private apt
#                            configuration of lib.sh (kapt_*), never from
#                            the system's apt setup. Modules for it come
#                            from scripts/build-driver-kernels.sh --keep
#                            (KERNEL_RELEASE=<the tree's name>).
# The package ships no modules.dep: depmod makes it in the tree.
. "$(dirname "$0")/lib.sh"

series=${1:-6.1}
if [ "$series" = 6.1 ]; then
    abi=${KERNEL_ABI:-$(kernel_abi)}
    [ -n "$abi" ] || die "cannot resolve the Debian 12 kernel ABI (apt-cache depends linux-image-amd64); run apt-get update"
    tree=$PVRDMA_CACHE/kernel/$abi
    if [ ! -e "$tree/.done" ]; then
        log "fetching linux-image-$abi"
        rm -rf "$tree" && mkdir -p "$tree/deb"
        fetch_deb "$tree/deb" "linux-image-$abi"
        dpkg -x "$tree"/deb/linux-image-*.deb "$tree/root"
        depmod -b "$tree/root" "$abi"
        touch "$tree/.done"
    fi
    echo "$tree"
    exit 0
fi

# A newer series: the newest linux-image-amd64 of it in the private lists
# (refreshed once more if they know none, as they may predate it).
kapt_update
read -r rel v < <(kapt_releases "$series" linux-image-amd64) || true
if [ -z "${rel:-}" ]; then
    kapt_update force
    read -r rel v < <(kapt_releases "$series" linux-image-amd64) || true
fi
[ -n "${rel:-}" ] ||
    die "no linux-image-amd64 of series $series in the archive (suites: $KAPT_MAIN_SUITES $KAPT_SECURITY_SUITES)"

# Keyed by release and package version (.done holds the version): a
# rebuilt package of the same release replaces the tree.
tree=$PVRDMA_CACHE/kernel/$rel
mkdir -p "$PVRDMA_CACHE/kernel"
exec 9> "$PVRDMA_CACHE/kernel/.$rel.lock"
flock 9
if [ "$(cat "$tree/.done" 2>/dev/null)" != "$v" ]; then
    log "fetching linux-image-$rel ($v)"
    rm -rf "$tree" "$tree.tmp" && mkdir -p "$tree.tmp/deb"
    # The cache may be out of the _apt user's reach (under /root): the
    # download runs as the caller, as apt would do anyway, without a
    # warning.
    # shellcheck disable=SC2046
    (cd "$tree.tmp/deb" &&
        apt-get $(kapt_opts) -o APT::Sandbox::User=root -q \
            download "linux-image-$rel=$v" >&2) ||
        die "cannot download linux-image-$rel $v (apt lists out of date? rm $KAPT_DIR/lists/.updated)"
    dpkg -x "$tree.tmp"/deb/linux-image-*.deb "$tree.tmp/root"
    # Debian 13 ships /usr/lib/modules (merged /usr); the host's depmod
    # and modprobe -d look under lib/modules: the link that merged /usr
    # systems have.
    if [ -d "$tree.tmp/root/usr/lib/modules" ] &&
       [ ! -e "$tree.tmp/root/lib" ]; then
        ln -s usr/lib "$tree.tmp/root/lib"
    fi
    [ -e "$tree.tmp/root/boot/vmlinuz-$rel" ] ||
        die "linux-image-$rel has no boot/vmlinuz-$rel"
    depmod -b "$tree.tmp/root" "$rel"
    echo "$v" > "$tree.tmp/.done"
    mv "$tree.tmp" "$tree"
fi
echo "$tree"
