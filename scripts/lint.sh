#!/usr/bin/env bash
# make lint: style check of the device model and the guest module with the
# checkpatch.pl of the project each one belongs to.
#   hw/pvrdma/*.[ch]     QEMU's scripts/checkpatch.pl (the QEMU release we
#                        build against, lib.sh's QEMU_SRC_VERSION)
#   guest-driver/*.[ch]  Linux's scripts/checkpatch.pl (Debian 12's
#                        linux-source-6.1, the kernel the module targets)
# Fails if either reports an ERROR or a WARNING (CHECKs are only shown).
# Neither script is kept in this repository: both are taken from Debian's
# source packages and cached under $PVRDMA_CACHE/checkpatch, keyed by the
# package version, so a later run needs neither apt nor the network.
. "$(dirname "$0")/lib.sh"

cp_cache=$PVRDMA_CACHE/checkpatch

# Print how to get out of a missing-script situation, then fail.
missing() {
    printf '[%s] error: %s\n' "$(basename "$0")" "$1" >&2
    shift
    printf '  fix: %s\n' "$@" >&2
    exit 1
}

# qemu_checkpatch: path of QEMU's checkpatch.pl, copied (once) from the
# tree that build-qemu.sh unpacked, or else from the orig tarball that
# build-qemu.sh downloads (downloaded here the same way if it is missing).
# The unpacked tree and the download directory are only read: a QEMU build
# may be running there.
qemu_checkpatch() {
    local dir=$cp_cache/qemu-$QEMU_SRC_VERSION src dl orig
    if [ ! -e "$dir/.done" ]; then
        rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
        dl=$PVRDMA_CACHE/dl
        orig=$dl/qemu_${QEMU_SRC_VERSION}.orig.tar.xz
        src=$(ls -d "$PVRDMA_CACHE"/qemu/src-"$QEMU_SRC_VERSION"-*/ 2>/dev/null |
              while read -r d; do
                  [ -e "$d/.done" ] && [ -e "$d/scripts/checkpatch.pl" ] &&
                      echo "$d"
              done | tail -n 1)
        if [ -n "$src" ]; then
            log "taking QEMU's checkpatch.pl from $src"
            cp "$src/scripts/checkpatch.pl" "$dir.tmp/checkpatch.pl"
        else
            if [ ! -e "$orig" ]; then
                log "downloading the QEMU $QEMU_DEB_VERSION source (for checkpatch.pl)"
                mkdir -p "$dl"
                # Same download as build-qemu.sh, which then reuses it.
                # shellcheck disable=SC2046
                { trixie_apt_setup &&
                  (cd "$dl" && apt-get $(trixie_apt_opts) -q source \
                      --download-only "qemu=$QEMU_DEB_VERSION" >&2); } ||
                    true
            fi
            [ -e "$orig" ] ||
                missing "QEMU's scripts/checkpatch.pl is not available: no unpacked QEMU $QEMU_SRC_VERSION tree under $PVRDMA_CACHE/qemu and no $orig" \
                    "run scripts/build-qemu.sh (make qemu): it downloads QEMU $QEMU_DEB_VERSION's source from Debian's archive and unpacks it there;" \
                    "if that download fails, check that apt can reach Debian's archive (apt-get update) and that deb-src for trixie is available."
            log "extracting scripts/checkpatch.pl from $orig"
            tar -xJf "$orig" -C "$dir.tmp" --strip-components=2 \
                "qemu-${QEMU_SRC_VERSION%+ds}/scripts/checkpatch.pl" ||
                missing "cannot extract scripts/checkpatch.pl from $orig" \
                    "remove the (probably truncated) $orig and run scripts/build-qemu.sh again."
        fi
        touch "$dir.tmp/.done"
        rm -rf "$dir" && mv "$dir.tmp" "$dir"
    fi
    echo "$dir/checkpatch.pl"
}

# linux_checkpatch: path of the kernel's checkpatch.pl with the data files
# it reads from its own directory (spelling.txt, const_structs.checkpatch),
# extracted (once) from linux-source-6.1: /usr/src/linux-source-6.1.tar.xz
# if the package is installed, else its .deb fetched into a temporary
# directory without installing it, as tests/guest/test-stock-driver.sh does.
linux_checkpatch() {
    local pkgver installed='' dir tmp top=linux-source-6.1
    local files=("$top/scripts/checkpatch.pl" "$top/scripts/spelling.txt"
                 "$top/scripts/const_structs.checkpatch")
    if [ -e /usr/src/linux-source-6.1.tar.xz ] &&
       installed=$(dpkg-query -W -f '${Version}' linux-source-6.1 2>/dev/null) &&
       [ -n "$installed" ]; then
        pkgver=$installed
    else
        installed=
        pkgver=$(apt-cache policy linux-source-6.1 2>/dev/null |
                 sed -n 's/^ *Candidate: //p')
    fi
    if [ -z "$pkgver" ] || [ "$pkgver" = "(none)" ]; then
        # Any version extracted before will do when apt knows none.
        dir=$(ls -d "$cp_cache"/linux-*/.done 2>/dev/null | sort -V | tail -n 1)
        [ -n "$dir" ] && { echo "$(dirname "$dir")/checkpatch.pl"; return; }
        missing "the kernel's scripts/checkpatch.pl is not available: apt knows no linux-source-6.1 package" \
            "run scripts/install-deps.sh (it runs apt-get update), or apt-get install linux-source-6.1;" \
            "then run make lint again."
    fi
    dir=$cp_cache/linux-$pkgver
    if [ ! -e "$dir/.done" ]; then
        rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
        if [ -n "$installed" ]; then
            log "extracting checkpatch.pl from /usr/src/linux-source-6.1.tar.xz ($pkgver)"
            tar -xJf /usr/src/linux-source-6.1.tar.xz -C "$dir.tmp" \
                --strip-components=2 "${files[@]}" ||
                missing "cannot extract ${files[*]} from /usr/src/linux-source-6.1.tar.xz" \
                    "reinstall it: apt-get install --reinstall linux-source-6.1"
        else
            log "downloading linux-source-6.1 $pkgver (for checkpatch.pl; about 140 MB, once)"
            tmp=$(mktemp -d "$cp_cache/deb.XXXXXX")
            # shellcheck disable=SC2064
            trap "rm -rf '$tmp'" EXIT
            fetch_deb "$tmp" "linux-source-6.1=$pkgver" ||
                missing "cannot download linux-source-6.1 $pkgver" \
                    "check that apt can reach Debian's archive (apt-get update), or install the package: apt-get install linux-source-6.1"
            dpkg-deb --fsys-tarfile "$tmp"/linux-source-6.1_*.deb |
                tar -xO ./usr/src/linux-source-6.1.tar.xz |
                tar -xJ -C "$dir.tmp" --strip-components=2 "${files[@]}" ||
                missing "cannot extract ${files[*]} from the linux-source-6.1 package" \
                    "remove $cp_cache and run make lint again."
            rm -rf "$tmp"
            trap - EXIT
        fi
        touch "$dir.tmp/.done"
        rm -rf "$dir" && mv "$dir.tmp" "$dir"
    fi
    echo "$dir/checkpatch.pl"
}

command -v perl >/dev/null ||
    missing "perl is not installed (both checkpatch.pl scripts are Perl)" \
        "run scripts/install-deps.sh, or apt-get install perl"

qemu_cp=$(qemu_checkpatch)
linux_cp=$(linux_checkpatch)

# --ignore TYPE options for the kernel's checkpatch, for checks that cannot
# apply to a module kept and built outside the kernel tree; each needs its
# reason here. None is needed with 6.1's checkpatch: --no-tree already turns
# off what needs a tree (e.g. INCLUDE_LINUX, which looks under include/),
# FILE_PATH_CHANGES and the MAINTAINERS checks only run on patches, not
# with -f, and our files carry the SPDX tag on line 1 as SPDX_LICENSE_TAG
# wants (// in .c, /* */ in .h), so nothing is hidden from the check.
LINUX_IGNORES=()

status=0
cd "$PVRDMA_TOP" || exit 1

# run_checkpatch LABEL SCRIPT [OPTION...] -- FILE...: run SCRIPT on each
# file; a file fails on any ERROR or WARNING line (CHECK lines only print).
# Files that git ignores are build products (pvrdma.mod.c from modpost), not
# sources, and are skipped.
run_checkpatch() {
    local label=$1 script=$2; shift 2
    local opts=() files=() f out rc errors=0 warnings=0 checks=0 bad=0
    while [ "$1" != -- ]; do opts+=("$1"); shift; done
    shift
    for f in "$@"; do
        git check-ignore -q "$f" 2>/dev/null || files+=("$f")
    done
    echo "== $label: $script"
    for f in "${files[@]}"; do
        # Both scripts exit non-zero on an ERROR or WARNING (a CHECK alone
        # does not, without --strict), and also when they cannot run: that
        # fails the file too, so a broken checkpatch never passes silently.
        rc=0
        out=$(perl "$script" --no-tree -f --terse --no-summary \
              --color=never "${opts[@]}" "$f" 2>&1) || rc=$?
        [ -n "$out" ] && printf '%s\n' "$out"
        errors=$((errors + $(grep -c ': ERROR:' <<<"$out" || true)))
        warnings=$((warnings + $(grep -c ': WARNING:' <<<"$out" || true)))
        checks=$((checks + $(grep -c ': CHECK:' <<<"$out" || true)))
        if [ "$rc" -ne 0 ] || grep -qE ': (ERROR|WARNING):' <<<"$out"; then
            bad=$((bad + 1))
            [ "$rc" -ne 0 ] && ! grep -qE ': (ERROR|WARNING):' <<<"$out" &&
                echo "$f: checkpatch exited with status $rc"
        fi
    done
    echo "== $label: ${#files[@]} files, $errors errors, $warnings warnings, $checks checks"
    if [ "$bad" -ne 0 ]; then
        echo "== $label: FAILED ($bad files with errors or warnings)"
        status=1
    fi
}

shopt -s nullglob
run_checkpatch "QEMU checkpatch (hw/pvrdma)" "$qemu_cp" -- \
    hw/pvrdma/*.c hw/pvrdma/*.h
run_checkpatch "Linux checkpatch (guest-driver)" "$linux_cp" \
    --show-types "${LINUX_IGNORES[@]}" -- guest-driver/*.c guest-driver/*.h

# Guest-error kinds (hw/pvrdma/pvrdma_gerr.h): each is reported somewhere
# (GERR), has its trace event (trace-events) and its case in the glue's
# switch (pvrdma_gerr_trace.c), so no guest error goes untraced.
gerr_list() {
    case $1 in
    enum)  sed -n 's/^ *PVRDMA_GERR_\([A-Z0-9_]*\),$/\1/p' hw/pvrdma/pvrdma_gerr.h ;;
    used)  cat hw/pvrdma/*.c | tr -s ' \n' ' ' |
               grep -o 'GERR(core, [A-Z0-9_]*,' | sed 's/GERR(core, //; s/,$//' ;;
    event) sed -n 's/^pvrdma_err_\([a-z0-9_]*\)(.*/\1/p' hw/pvrdma/trace-events |
               tr a-z A-Z ;;
    case)  sed -n 's/^ *case PVRDMA_GERR_\([A-Z0-9_]*\):$/\1/p' \
               hw/pvrdma/pvrdma_gerr_trace.c ;;
    esac | sort
}
gerr_enum=$(gerr_list enum)
for what in used event case; do
    if ! diff <(echo "$gerr_enum") <(gerr_list $what | sort -u) > /dev/null; then
        echo "== guest-error kinds: pvrdma_gerr.h and the $what list differ:"
        diff <(echo "$gerr_enum") <(gerr_list $what | sort -u) | sed 's/^/   /'
        echo "   fix: every PVRDMA_GERR_* needs a GERR() use, a pvrdma_err_*"
        echo "   event in hw/pvrdma/trace-events and a case in pvrdma_gerr_trace.c"
        status=1
    fi
done
echo "== guest-error kinds: $(echo "$gerr_enum" | wc -l) kinds, each reported, traced and switched"

[ "$status" -eq 0 ] && echo "lint: OK" || echo "lint: FAILED"
exit "$status"
