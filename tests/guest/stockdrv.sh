# shellcheck shell=bash
# Host-side helper (sourced after lib.sh) for the tests of the upstream
# Linux vmw_pvrdma driver, which no Debian kernel builds: its source comes
# from Debian's linux-source-SERIES package, unmodified, and is built like
# any out-of-tree module. Nothing of it is kept in this repository.
#
#   stockdrv_build SERIES   builds the driver for the guest kernel of SERIES
#                           and prints the path of its vmw_pvrdma.ko
#                           ($TEST_OUT/vmw_pvrdma/); fails the test if it
#                           cannot:
#     6.1    build/kernel's release, from Debian 12's linux-source-6.1 (the
#            system's apt, its candidate version), built on the host
#            against /usr/src/linux-headers-<release>
#     6.12   build/kernel-6.12's release (make image-6.12), from Debian 13's
#            linux-source-6.12 of the very version of that kernel's package
#            (the private kernel lists of scripts/lib.sh, kapt_*), built
#            under chroot in the Debian 13 root against that release's
#            headers (scripts/kheaders.sh, as scripts/build-driver-kernels.sh
#            builds our module for it)
# The source package is fetched once per version; only its
# drivers/infiniband/hw/vmw_pvrdma is kept, in
# $PVRDMA_CACHE/stock-driver/<version>, with each build of it (ko-<key>:
# the release, its headers' version, where it was built).
# shellcheck source=scripts/kheaders.sh
. "$TESTS_TOP/scripts/kheaders.sh"

# _stockdrv_src SERIES VERSION: the driver's source directory in
# linux-source-SERIES=VERSION, fetched and extracted once.
_stockdrv_src() {
    local series=$1 v=$2 src pkg=linux-source-$1
    src=$PVRDMA_CACHE/stock-driver/$v
    if [ ! -e "$src/.done" ]; then
        log "fetching $pkg $v (once) for its drivers/infiniband/hw/vmw_pvrdma"
        rm -rf "$src" && mkdir -p "$src/deb"
        if [ "$series" = 6.1 ]; then
            fetch_deb "$src/deb" "$pkg=$v"
        else
            # (the cache may be out of the _apt user's reach: as the caller)
            # shellcheck disable=SC2046
            (cd "$src/deb" && apt-get $(kapt_opts) -o APT::Sandbox::User=root \
                -q download "$pkg=$v" >&2)
        fi || fail "cannot download $pkg $v"
        dpkg-deb --fsys-tarfile "$src/deb/${pkg}_"*.deb |
            tar -x -C "$src" --wildcards "./usr/src/$pkg.tar.*" &&
            tar -xf "$src/usr/src/$pkg".tar.* -C "$src" \
                "$pkg/drivers/infiniband/hw/vmw_pvrdma" ||
            fail "cannot extract vmw_pvrdma from $pkg $v"
        rm -rf "${src:?}/deb" "${src:?}/usr"
        touch "$src/.done"
    fi
    echo "$src/$pkg/drivers/infiniband/hw/vmw_pvrdma"
}

stockdrv_build() {
    local series=$1 rel v hv src kept work where=host vm
    case $series in
    6.1)
        rel=$(basename "$(readlink -f "$PVRDMA_OUT/kernel")")
        v=$(apt-cache policy linux-source-6.1 | sed -n 's/^ *Candidate: //p')
        [ -n "$v" ] && [ "$v" != "(none)" ] ||
            fail "linux-source-6.1 is not available from apt"
        [ -d "/usr/src/linux-headers-$rel" ] ||
            fail "no /usr/src/linux-headers-$rel (scripts/install-deps.sh)"
        hv=$(dpkg-query -W -f '${Version}' "linux-headers-$rel" 2>/dev/null) ||
            hv=unknown
        ;;
    6.12)
        rel=$(basename "$(readlink -f "$PVRDMA_OUT/kernel-6.12")")
        v=$(cat "$PVRDMA_OUT/kernel-6.12/.done" 2>/dev/null) || true
        case $rel in 6.12.*) ;; *) fail "no 6.12 kernel in build/kernel-6.12: run 'make image-6.12'" ;; esac
        [ -n "$v" ] || fail "build/kernel-6.12 names no package version: run 'make image-6.12'"
        kheaders_root
        KERNEL_RELEASE=$rel kheaders_prepare 6.12 ||
            fail "no headers for $rel in the archive"
        hv=$KH_VER where=root
        ;;
    *) fail "stockdrv_build: no guest kernel of series '$series'" ;;
    esac
    src=$(_stockdrv_src "$series" "$v") || exit 1
    # A build is kept beside the source, keyed by the release, its
    # headers' version and where it was built.
    kept=$PVRDMA_CACHE/stock-driver/$v/ko-$(echo "$rel $hv $where ${KH_ROOT##*/}" |
                                            sha256sum | cut -c1-12)
    if [ ! -e "$kept/.done" ]; then
        if [ $where = host ]; then
            work=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-stockdrv.XXXXXX")
        else
            work=$(mktemp -d "$KH_ROOT/tmp/pvrdma-stockdrv.XXXXXX")
        fi
        cp -r "$src/." "$work/"
        kheaders_make $where "$rel" "$work" CONFIG_INFINIBAND_VMWARE_PVRDMA=m >&2 ||
            { rm -rf "$work"; fail "cannot build the upstream vmw_pvrdma driver for $rel"; }
        rm -rf "$kept" && mkdir -p "$kept" && cp "$work/vmw_pvrdma.ko" "$kept/" &&
            touch "$kept/.done"
        rm -rf "$work"
    fi
    vm=$(modinfo -F vermagic "$kept/vmw_pvrdma.ko")
    [ "${vm%% *}" = "$rel" ] ||
        fail "vmw_pvrdma.ko is built for '${vm%% *}', the guest kernel is $rel"
    rm -rf "$TEST_OUT/vmw_pvrdma" && mkdir -p "$TEST_OUT/vmw_pvrdma"
    cp "$kept/vmw_pvrdma.ko" "$TEST_OUT/vmw_pvrdma/"
    log "upstream vmw_pvrdma from linux-source-$series $v, built for $rel ($kept)"
    echo "$TEST_OUT/vmw_pvrdma/vmw_pvrdma.ko"
}
