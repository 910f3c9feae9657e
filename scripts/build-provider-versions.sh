#!/usr/bin/env bash
# Check that our provider (guest-provider/) builds, warning-free, in the
# rdma-core releases we support; one line per version, "<version> OK" or
# "<version> FAIL <log>", and a non-zero exit status on any failure.
#
# - 56.1 (Debian 13) through scripts/build-rdma-core.sh: its staged build,
#   which is incremental (nothing recompiles when the provider is
#   unchanged) and uses -DENABLE_WERROR=1. It stands for 44.0 (Debian 12)
#   too: 44.0 and 56.1 share provider ABI 34 and identical provider
#   structs, and 44.0's source cannot be fetched here (its orig tarball
#   answers 404), so 44.0 itself is not built.
# - the newest rdma-core in Debian sid (65.0 at the time of writing),
#   resolved at run time through a private apt configuration derived from
#   the system's sources (lib.sh suite_apt_setup). Its source is unpacked
#   once into $PVRDMA_CACHE/rdma-core/src-<version>-<key> (key: the hook
#   patch), our provider synced in (lib.sh rdma_core_tree, shared with
#   build-rdma-core.sh), and only
#   the provider's ninja target and its dependencies are built
#   (-DENABLE_WERROR=1, and any "warning:" in providers/pvrdma fails too).
#   The host's gcc 12 and glibc 2.36 (Debian 12) suffice for 65.0.
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

JOBS=${JOBS:-2}
NEW_SUITE=sid
NEW_CMAKE_OPTS=(-GNinja -DNO_MAN_PAGES=1 -DNO_PYVERBS=1 -DENABLE_WERROR=1)

for tool in cmake ninja rsync patch apt-get; do
    command -v "$tool" >/dev/null || die "$tool not installed"
done

status=0
logdir=$PVRDMA_OUT/provider-versions
mkdir -p "$logdir"

# provider_warnings LOG: our provider's compiler warnings in LOG.
provider_warnings() {
    grep -E 'providers/pvrdma/[^ ]*: *(warning|error):' "$1"
}

# --- 56.1 (stands for 44.0) -------------------------------------------
log="$logdir/$RDMA_CORE_VERSION.log"
SECONDS=0
if "$PVRDMA_TOP/scripts/build-rdma-core.sh" > "$log.out" 2> "$log" &&
   ! provider_warnings "$log" >&2; then
    log "$RDMA_CORE_VERSION: built in ${SECONDS}s (staged build)"
    echo "$RDMA_CORE_VERSION OK"
else
    echo "$RDMA_CORE_VERSION FAIL $log"
    status=1
fi
rm -f "$log.out"

# --- the newest in sid --------------------------------------------------
suite_apt_setup "$NEW_SUITE"
debver=$(suite_source_version "$NEW_SUITE" rdma-core)
[ -n "$debver" ] || die "no rdma-core source in $NEW_SUITE's lists"
ver=${debver#*:}
ver=${ver%-*}
dl=$PVRDMA_CACHE/dl
# orig_tarball: the orig tarball of $ver in $dl (any compression), if any.
orig_tarball() {
    local f
    for f in "$dl/rdma-core_$ver.orig.tar."*; do
        [ -e "$f" ] && { echo "$f"; return 0; }
    done
    return 1
}
if ! orig=$(orig_tarball); then
    log "downloading rdma-core $debver source from $NEW_SUITE"
    fetch_orig_source "$NEW_SUITE" rdma-core "$debver" "$dl"
    orig=$(orig_tarball) ||
        die "rdma-core $ver orig tarball missing in $dl after download"
fi

src=$(rdma_core_tree "$ver" "$orig")
key=${src##*-}
top=$PVRDMA_CACHE/rdma-core

cfgkey=$(printf '%s\n' "${NEW_CMAKE_OPTS[@]}" | sha256sum | cut -c1-8)
bld=$top/build-$ver-$key-$cfgkey
log="$logdir/$ver.log"
SECONDS=0
: > "$log"
if [ ! -e "$bld/build.ninja" ]; then
    log "configuring rdma-core $ver in $bld"
    rm -rf "$bld" && mkdir -p "$bld"
    (cd "$bld" && cmake "${NEW_CMAKE_OPTS[@]}" "$src" >> "$log" 2>&1) ||
        { rm -rf "$bld"; echo "$ver FAIL $log"; exit 1; }
fi
# The provider's target is pvrdma-rdmav<ABI> (the tree's provider ABI).
pabi=$(sed -n 's/^set(IBVERBS_PABI_VERSION "\([0-9]*\)")/\1/p' \
    "$src/CMakeLists.txt")
[ -n "$pabi" ] || die "no IBVERBS_PABI_VERSION in $src/CMakeLists.txt"
if ninja -C "$bld" -j"$JOBS" "pvrdma-rdmav$pabi" >> "$log" 2>&1 &&
   [ -e "$bld/lib/libpvrdma-rdmav$pabi.so" ] &&
   ! provider_warnings "$log" >&2; then
    log "$ver: provider built in ${SECONDS}s ($bld)"
    echo "$ver OK"
else
    provider_warnings "$log" >&2 || tail -n 20 "$log" >&2
    echo "$ver FAIL $log"
    status=1
fi
exit "$status"
