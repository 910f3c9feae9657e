#!/usr/bin/env bash
# Fetch Debian 12's current 6.1 kernel for the guest and unpack it into the
# cache, keyed by its ABI name. Prints the tree's path.
# The matching headers come from the host's apt (scripts/install-deps.sh).
. "$(dirname "$0")/lib.sh"

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
