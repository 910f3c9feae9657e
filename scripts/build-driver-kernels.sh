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
# keyed by package version; they are unpacked into the root once.
#
# Prints one line per kernel on stdout: "<release> OK" or "<release> FAIL";
# build logs go to stderr. Exits non-zero if any build fails.
#   KERNEL_SERIES="6.1 6.12 7"   which series to build (default: all)
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

KERNEL_SERIES=${KERNEL_SERIES:-"6.1 6.12 7"}
MAKE_JOBS=2

# Suites searched for linux-headers-amd64, by stanza of the system file.
KAPT_MAIN_SUITES="trixie trixie-updates trixie-backports sid"
KAPT_SECURITY_SUITES="trixie-security"
KAPT_DIR=$PVRDMA_CACHE/apt-kernels
HDR_CACHE=$PVRDMA_CACHE/kernel-headers

kapt_opts() {
    echo "-o Dir::Etc::SourceList=/dev/null" \
         "-o Dir::Etc::SourceParts=$KAPT_DIR/sources.list.d" \
         "-o Dir::State::Lists=$KAPT_DIR/lists" \
         "-o Dir::Cache::Archives=$KAPT_DIR/archives" \
         "-o Dir::State::Status=/dev/null" \
         "-o Debug::NoLocking=1"
}

# kapt_update [force]: write the private sources (the system's first main
# and first security stanza, with our suites) and refresh the lists when
# older than a day (kernels are replaced often and old ones vanish).
kapt_update() {
    local sys=/etc/apt/sources.list.d/debian.sources
    [ -r "$sys" ] || die "$sys not found: cannot derive the Debian mirror"
    mkdir -p "$KAPT_DIR"/{sources.list.d,lists/partial,archives/partial}
    awk -v main="$KAPT_MAIN_SUITES" -v sec="$KAPT_SECURITY_SUITES" '
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
        }' "$sys" > "$KAPT_DIR/sources.list.d/kernels.sources"
    if [ "${1:-}" = force ] || [ ! -e "$KAPT_DIR/lists/.updated" ] ||
       [ -n "$(find "$KAPT_DIR/lists/.updated" -mmin +1440)" ]; then
        # shellcheck disable=SC2046
        apt-get $(kapt_opts) -q update >&2 || die "apt-get update failed"
        touch "$KAPT_DIR/lists/.updated"
    fi
}

# kapt_depends PKG VERSION: the package names in PKG=VERSION's Depends.
kapt_depends() {
    # shellcheck disable=SC2046
    apt-cache $(kapt_opts) show "$1=$2" 2>/dev/null |
        sed -n 's/^Depends: //p' | head -n 1 | sed 's/[,|]/\n/g' |
        sed 's/^ *//; s/[ (].*//' | sed '/^$/d'
}

# resolve SERIES: "<release> <version> <compiler>" of the newest
# linux-headers-amd64 of SERIES (e.g. 6.12, or 7 for any 7.x) whose
# compiler the root has, or nothing.
resolve() {
    local series=$1 v hdr rel cc
    # shellcheck disable=SC2046
    apt-cache $(kapt_opts) madison linux-headers-amd64 |
        awk -F'|' '{ gsub(/ /, "", $2); print $2 }' | sort -u |
        sort -rV | while read -r v; do
        hdr=$(kapt_depends linux-headers-amd64 "$v" |
              grep -m1 '^linux-headers-.*-amd64$') || continue
        rel=${hdr#linux-headers-}
        case $rel in "$series".*) ;; *) continue ;; esac
        cc=$(kapt_depends "$hdr" "$v" |
             sed -n 's/^\(gcc-[0-9]*\)\(-for-host\)\{0,1\}$/\1/p' | head -n 1)
        cc=${cc:-gcc}
        if ! chroot "$root" sh -c "command -v $cc" >/dev/null 2>&1; then
            log "skipping $rel ($v): it needs $cc, which the Debian 13 root lacks"
            continue
        fi
        echo "$rel $v $cc"
        break
    done
}

# fetch_headers RELEASE VERSION: directory of the cached .debs of the
# headers (arch and common) and kbuild packages of RELEASE.
fetch_headers() {
    local rel=$1 v=$2 dir pkgs
    dir=$HDR_CACHE/$rel-$v
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

# remove_headers RELEASE: the unpacked trees of RELEASE out of the root.
remove_headers() {
    local base=${1%-amd64}
    rm -rf "$root/usr/src/linux-headers-$1" \
           "$root/usr/src/linux-headers-$base-common" \
           "$root/usr/lib/linux-kbuild-$base" "$root/usr/lib/modules/$1"
    rm -f "$root/var/lib/pvrdma-headers/$1"
}

# unpack_headers SERIES RELEASE VERSION DIR: the .debs of DIR unpacked
# into the root (dpkg -x: files only, no maintainer scripts), once per
# version; other releases of SERIES are removed from the root first.
unpack_headers() {
    local series=$1 rel=$2 v=$3 dir=$4 mark deb old
    mark=$root/var/lib/pvrdma-headers/$rel
    [ "$(cat "$mark" 2>/dev/null)" = "$v" ] && return 0
    for old in "$root"/var/lib/pvrdma-headers/*; do
        old=$(basename "$old")
        case $old in
        "$rel"|"*") ;;
        "$series".*)
            log "removing the superseded $old headers from the root"
            remove_headers "$old" ;;
        esac
    done
    log "unpacking the $rel headers into the root"
    remove_headers "$rel"
    for deb in "$dir"/*.deb; do
        dpkg -x "$deb" "$root" || die "cannot unpack $deb"
    done
    mkdir -p "$(dirname "$mark")"
    echo "$v" > "$mark"
}

# copy_sources DIR: the module's sources and the device ABI headers, laid
# out as in the repository (Kbuild takes -I$(src)/../include).
copy_sources() {
    mkdir -p "$1/guest-driver" "$1/include"
    cp "$PVRDMA_TOP"/guest-driver/{Kbuild,Makefile,*.c,*.h} "$1/guest-driver/"
    cp -r "$PVRDMA_TOP"/include/. "$1/include/"
}

# judge RELEASE LOG STATUS: print the verdict line; 0 when clean.
judge() {
    local rel=$1 out=$2 rc=$3 nwarn
    nwarn=$(grep -ci 'warning:' "$out" || true)
    if [ "$rc" -eq 0 ] && [ "$nwarn" -eq 0 ] &&
       grep -q 'pvrdma\.ko' "$out"; then
        echo "$rel OK"
        return 0
    fi
    log "$rel: make exited with $rc, $nwarn warning(s):"
    grep -iE 'warning:|error' "$out" | head -n 40 >&2 || true
    echo "$rel FAIL"
    return 1
}

status=0

# build_host RELEASE: build on the host against /usr/src/linux-headers-RELEASE.
build_host() {
    local rel=$1 work rc=0
    work=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-kbuild.XXXXXX")
    copy_sources "$work"
    SECONDS=0
    LC_ALL=C make -C "/usr/src/linux-headers-$rel" \
        M="$work/guest-driver" -j"$MAKE_JOBS" modules \
        > "$work/build.log" 2>&1 || rc=$?
    log "$rel: built on the host in ${SECONDS}s"
    cat "$work/build.log" >&2
    judge "$rel" "$work/build.log" "$rc" || status=1
    rm -rf "$work"
}

# build_root RELEASE: build under chroot in the root.
build_root() {
    local rel=$1 work rc=0
    work=$(mktemp -d "$root/tmp/pvrdma-kbuild.XXXXXX")
    copy_sources "$work"
    SECONDS=0
    # objtool reads /proc (7.x): a proc mounted in a private mount
    # namespace, gone with it, so an interrupted build leaves no mount.
    # shellcheck disable=SC2016
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C \
        unshare --mount --propagation private sh -c \
        'mount -t proc proc "$1/proc" && shift && exec chroot "$@"' sh \
        "$root" "$root" make -C "/usr/src/linux-headers-$rel" \
        M="${work#"$root"}/guest-driver" -j"$MAKE_JOBS" modules \
        > "$work/build.log" 2>&1 || rc=$?
    log "$rel: built in the Debian 13 root in ${SECONDS}s"
    cat "$work/build.log" >&2
    judge "$rel" "$work/build.log" "$rc" || status=1
    rm -rf "$work"
}

need_root=0
for s in $KERNEL_SERIES; do [ "$s" = 6.1 ] || need_root=1; done
if [ "$need_root" -eq 1 ]; then
    root=$("$PVRDMA_TOP/scripts/build-root13.sh") ||
        die "cannot make the Debian 13 root"
    kapt_update
fi

for s in $KERNEL_SERIES; do
    if [ "$s" = 6.1 ]; then
        rel=$(ls -1d /usr/src/linux-headers-6.1.0-*-amd64 2>/dev/null |
              sed 's|^/usr/src/linux-headers-||' | sort -V | tail -n 1)
        if [ -z "$rel" ]; then
            log "no linux-headers-6.1.0-*-amd64 on the host (run scripts/install-deps.sh)"
            echo "6.1 FAIL"
            status=1
            continue
        fi
        build_host "$rel"
        continue
    fi
    read -r rel v _ < <(resolve "$s") || true
    if [ -z "${rel:-}" ]; then
        # The lists may predate the current kernels: once more, fresh.
        kapt_update force
        read -r rel v _ < <(resolve "$s") || true
    fi
    if [ -z "${rel:-}" ]; then
        log "no buildable linux-headers-amd64 of series $s in the archive"
        echo "$s FAIL"
        status=1
        continue
    fi
    log "series $s: $rel ($v)"
    dir=$(fetch_headers "$rel" "$v")
    unpack_headers "$s" "$rel" "$v" "$dir"
    build_root "$rel"
    rel=
done
exit "$status"
