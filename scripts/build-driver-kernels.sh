#!/usr/bin/env bash
# Build the guest module (guest-driver/) against each Debian kernel series
# the archive carries, and fail on any error or warning:
#   6.1    Debian 12: the newest linux-headers-6.1.0-*-amd64 installed on
#          this host (scripts/install-deps.sh), built on the host
#   6.12   Debian 13 (trixie, trixie-security, trixie-updates)
#   7.x    the newest 7.x in trixie-backports or sid whose compiler the
#          Debian 13 root has (sid's may want a gcc trixie lacks)
# 6.12 and 7.x headers need gcc-14 and glibc >= 2.38, so they are built
# under chroot in the Debian 13 root of scripts/build-root13.sh.
#
# Versions are resolved at run time from the archive (old ABIs disappear).
# The header .debs are downloaded with a private apt configuration derived
# from the system's /etc/apt/sources.list.d/debian.sources (the system's
# apt setup is only read) and cached under $PVRDMA_CACHE/kernel-headers,
# keyed by package version; they are unpacked into the root once
# (scripts/kheaders.sh).
#
# Prints one line per kernel on stdout: "<release> OK" or "<release> FAIL";
# build logs go to stderr. Exits non-zero if any build fails.
#   KERNEL_SERIES="6.1 6.12 7"   which series to build (default: all)
#   KERNEL_RELEASE=<release>     only that release (e.g. the one
#                                scripts/fetch-kernel.sh fetched for a
#                                guest), not the newest of the series
#   --keep                       also build the kernel-verbs test module
#                                (tests/guest/kmod, same rules) and keep
#                                both .ko files in $PVRDMA_CACHE/modules/
#                                <release>-<key>, key = hash of the sources,
#                                the headers' version, the root and this
#                                script; the line reads "<release> OK DIR".
#                                A kept build is not repeated.
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=scripts/kheaders.sh
. "$(dirname "$0")/kheaders.sh"
# The verdict reads kbuild's "LD [M]" lines: a -s of the make that ran
# this (make -s driver-kernels) must not reach kbuild and silence them.
unset MAKEFLAGS MFLAGS MAKELEVEL

KERNEL_SERIES=${KERNEL_SERIES:-"6.1 6.12 7"}
keep=
case "${1:-}" in
--keep) keep=1 ;;
'') ;;
*) die "usage: [KERNEL_SERIES=...] [KERNEL_RELEASE=...] $0 [--keep]" ;;
esac
# copy_sources DIR: the module's sources and the device ABI headers, laid
# out as in the repository (Kbuild takes -I$(src)/../include), and with
# --keep the test module's sources in DIR/kmod.
copy_sources() {
    mkdir -p "$1/guest-driver" "$1/include"
    cp "$PVRDMA_TOP"/guest-driver/{Kbuild,Makefile,*.c,*.h} "$1/guest-driver/"
    cp -r "$PVRDMA_TOP"/include/. "$1/include/"
    if [ -n "$keep" ]; then
        mkdir -p "$1/kmod"
        cp "$PVRDMA_TOP"/tests/guest/kmod/{Kbuild,Makefile,*.c} "$1/kmod/"
    fi
}

# judge RELEASE LOG STATUS MODULE: 0 when the build made MODULE.ko
# without any warning; else the warnings and errors on stderr.
judge() {
    local rel=$1 out=$2 rc=$3 ko=$4 nwarn
    nwarn=$(grep -ci 'warning:' "$out" || true)
    if [ "$rc" -eq 0 ] && [ "$nwarn" -eq 0 ] &&
       grep -qE "[[:space:]/]$ko\.ko\$" "$out"; then
        return 0
    fi
    log "$rel, $ko.ko: make exited with $rc, $nwarn warning(s):"
    grep -iE 'warning:|error' "$out" | head -n 40 >&2 || true
    return 1
}

status=0

# build WHERE RELEASE VERSION: build (and with --keep keep) the module(s)
# against RELEASE (headers package VERSION); print the verdict line.
build() {
    local where=$1 rel=$2 v=$3 work rc=0 key='' kept='' what
    if [ "$where" = host ]; then
        work=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-kbuild.XXXXXX")
        what="on the host"
    else
        work=$(mktemp -d "$KH_ROOT/tmp/pvrdma-kbuild.XXXXXX")
        what="in the Debian 13 root"
    fi
    copy_sources "$work"
    if [ -n "$keep" ]; then
        key=$( { echo "$rel $v $where ${KH_ROOT:+$(basename "$KH_ROOT")}";
                 hash_inputs "$work/guest-driver" "$work/include" \
                     "$work/kmod" "$0" "$PVRDMA_TOP/scripts/kheaders.sh"; } |
               sha256sum | cut -c1-12)
        kept=$PVRDMA_CACHE/modules/$rel-$key
        if [ -e "$kept/.done" ]; then
            log "$rel: modules already built ($kept)"
            echo "$rel OK $kept"
            rm -rf "$work"
            return 0
        fi
    fi
    SECONDS=0
    kheaders_make "$where" "$rel" "$work/guest-driver" > "$work/build.log" 2>&1 ||
        rc=$?
    log "$rel: pvrdma.ko built $what in ${SECONDS}s"
    cat "$work/build.log" >&2
    if ! judge "$rel" "$work/build.log" "$rc" pvrdma; then
        echo "$rel FAIL"
        status=1
        rm -rf "$work"
        return 0
    fi
    if [ -z "$keep" ]; then
        echo "$rel OK"
        rm -rf "$work"
        return 0
    fi
    SECONDS=0
    kheaders_make "$where" "$rel" "$work/kmod" > "$work/kmod.log" 2>&1 || rc=$?
    log "$rel: pvrdma_ktest.ko built $what in ${SECONDS}s"
    cat "$work/kmod.log" >&2
    if ! judge "$rel" "$work/kmod.log" "$rc" pvrdma_ktest; then
        echo "$rel FAIL"
        status=1
        rm -rf "$work"
        return 0
    fi
    rm -rf "$kept.tmp" && mkdir -p "$kept.tmp"
    cp "$work/guest-driver/pvrdma.ko" "$work/kmod/pvrdma_ktest.ko" \
        "$kept.tmp/"
    echo "$rel $v" > "$kept.tmp/.done"
    rm -rf "$kept" && mv "$kept.tmp" "$kept"
    rm -rf "$work"
    echo "$rel OK $kept"
}

need_root=0
for s in $KERNEL_SERIES; do [ "$s" = 6.1 ] || need_root=1; done
[ "$need_root" -eq 0 ] || kheaders_root

for s in $KERNEL_SERIES; do
    if [ "$s" = 6.1 ]; then
        rel=${KERNEL_RELEASE:-$(ls -1d /usr/src/linux-headers-6.1.0-*-amd64 2>/dev/null |
              sed 's|^/usr/src/linux-headers-||' | sort -V | tail -n 1)}
        if [ -z "$rel" ] || [ ! -d "/usr/src/linux-headers-$rel" ]; then
            log "no linux-headers-${rel:-6.1.0-*-amd64} on the host (run scripts/install-deps.sh)"
            echo "6.1 FAIL"
            status=1
            continue
        fi
        v=$(dpkg-query -W -f '${Version}' "linux-headers-$rel" 2>/dev/null) ||
            v=unknown
        build host "$rel" "$v"
        continue
    fi
    if ! kheaders_prepare "$s"; then
        echo "$s FAIL"
        status=1
        continue
    fi
    build root "$KH_REL" "$KH_VER"
done
exit "$status"
