#!/usr/bin/env bash
# The host packages of `make host-deb` (qemu-system-pvrdma, our QEMU) in
# clean Debian 12 and Debian 13 roots: each a debootstrap'd minbase root
# (cached per distribution and package list, copied afresh for every run),
# `apt-get install ./qemu-system-pvrdma_*.deb` in it by chroot (the
# dependencies from Debian's archive: firmware packages and libraries);
# then, still in the chroot, the INSTALLED command qemu-system-x86_64-pvrdma
# (no -L: it must find Debian's firmware itself) boots our test guest
# (build/vmlinuz, build/initrd.cpio.gz) with -device pvrdma through
# scripts/vm.sh, and ibv_rc_pingpong -c runs between two processes in it.
# Also: the package holds no file that Debian's qemu-system-x86,
# qemu-system-common or qemu-system-data ship, and apt would install
# Debian's qemu-system-x86 beside it (simulated; PVRDMA_HOST_DEB_ALONGSIDE=1
# installs it for real and runs both binaries' --version).
#
#   test-host-deb.sh [bookworm] [trixie]   (default: both)
. "$(dirname "$0")/lib.sh"

dists=("$@")
[ ${#dists[@]} -gt 0 ] || dists=(bookworm trixie)
for d in "${dists[@]}"; do
    case $d in bookworm|trixie) ;; *) fail "unknown distribution '$d' (bookworm or trixie)" ;; esac
done
[ "$(id -u)" -eq 0 ] || fail "debootstrap and chroot need root"
for f in vmlinuz initrd.cpio.gz; do
    [ -e "$PVRDMA_OUT/$f" ] || fail "$PVRDMA_OUT/$f missing: run make"
done

SECONDS=0
mapfile -t debs < <(HOST_DEB_DISTS="${dists[*]}" "$PVRDMA_TOP/scripts/build-host-deb.sh") ||
    fail "make host-deb failed"
[ ${#debs[@]} -eq ${#dists[@]} ] || fail "build-host-deb.sh printed ${#debs[@]} packages"
prep_debs=$SECONDS

# A clean root per distribution, made once by debootstrap (with apt's
# lists, refreshed daily), kept under $PVRDMA_CACHE; every run works on a
# fresh copy. Downloaded packages are kept apart in
# $PVRDMA_CACHE/host-deb-archives-DIST (bind-mounted as apt's archives).
ROOT_PACKAGES=(ca-certificates)
clean_root() {
    local dist=$1 key root tmp mirror
    key=$(printf '%s\n' "$dist" "${ROOT_PACKAGES[@]}" | sha256sum | cut -c1-12)
    root=$PVRDMA_CACHE/host-deb-root-$dist-$key
    exec 7> "$root.lock"
    flock 7
    if [ ! -e "$root/.done" ]; then
        command -v debootstrap >/dev/null || fail "debootstrap missing (apt-get install debootstrap)"
        mirror=$(debian_mirror)
        tmp=$root.tmp
        umount_below "$tmp"
        rm -rf --one-file-system "$tmp"
        log "debootstrap $dist into $tmp (once)"
        debootstrap --variant=minbase --components=main \
            --include="$(IFS=,; echo "${ROOT_PACKAGES[*]}")" \
            "$dist" "$tmp" "$mirror" >&2 || { umount_below "$tmp"; fail "debootstrap $dist failed"; }
        umount_below "$tmp"
        chroot "$tmp" apt-get -q update >&2 || fail "apt-get update in the $dist root failed"
        rm -f "$tmp"/var/cache/apt/archives/*.deb
        touch "$tmp/.done"
        rm -rf --one-file-system "$root"
        mv "$tmp" "$root"
    fi
    # Lists a day old may name versions the archive no longer has.
    if [ -n "$(find "$root/.done" -mmin +1440)" ]; then
        chroot "$root" apt-get -q update >&2 || fail "apt-get update in the $dist root failed"
        touch "$root/.done"
    fi
    exec 7>&-
    echo "$root"
}

work=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-host-deb.XXXXXX")
root=
cleanup() {
    [ -z "$root" ] || umount_below "$root"
    if [ -n "$root" ] && awk -v d="$root" 'index($2, d) == 1 { f = 1 } END { exit !f }' /proc/mounts; then
        log "still mounted below $root: not removing $work"
        return
    fi
    rm -rf --one-file-system "$work"
}
trap cleanup EXIT

cat > "$TEST_OUT/guest.sh" <<'GUEST'
. ./pair.sh
pair rc_pingpong 120 "ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c" \
    "ibv_rc_pingpong -d pvrdma0 -g 1 -n 200 -c 127.0.0.1"
echo GUEST-OK
GUEST

results=()
for i in "${!dists[@]}"; do
    dist=${dists[$i]} deb=${debs[$i]} t0=$SECONDS
    case $deb in
    *~deb12_amd64.deb) [ "$dist" = bookworm ] ;;
    *~deb13_amd64.deb) [ "$dist" = trixie ] ;;
    *) false ;;
    esac || fail "$deb is not the $dist package"
    clean=$(clean_root "$dist") || fail "no clean $dist root"
    root=$work/root-$dist
    cp -a "$clean" "$root"
    prep_root=$((SECONDS - t0))
    # Downloaded dependencies kept between runs (the root stays clean).
    arch=$PVRDMA_CACHE/host-deb-archives-$dist
    mkdir -p "$arch/partial" "$root/var/cache/apt/archives"
    mount --bind "$arch" "$root/var/cache/apt/archives"
    mount -t proc proc "$root/proc"
    mount -t sysfs sysfs "$root/sys"
    mount --bind /dev "$root/dev"
    mount --make-slave "$root/dev"
    cp "$deb" "$root/tmp/"
    echo "=== $dist: apt-get install ./$(basename "$deb")"
    chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        -o Dpkg::Progress-Fancy=0 "./tmp/$(basename "$deb")" ||
        fail "$dist: apt-get install of $(basename "$deb") failed"
    chroot "$root" dpkg-query -W qemu-system-pvrdma qemu-system-data seabios ipxe-qemu
    ver=$(chroot "$root" qemu-system-x86_64-pvrdma --version | head -n 1)
    echo "installed: $ver"
    case $ver in *"version 10."*) ;; *) fail "$dist: unexpected --version '$ver'" ;; esac
    chroot "$root" qemu-system-x86_64-pvrdma -device help 2>&1 | grep -q '"pvrdma"' ||
        fail "$dist: the installed QEMU lists no pvrdma device"
    chroot "$root" qemu-system-x86_64-pvrdma -device pvrdma,help > "$TEST_OUT/props-$dist.txt" 2>&1 ||
        fail "$dist: -device pvrdma,help failed"
    chroot "$root" dpkg -L qemu-system-pvrdma > "$TEST_OUT/files-$dist.txt"
    [ -e "$root/usr/share/doc/qemu-system-pvrdma/README.Debian" ] || fail "$dist: no README.Debian"

    # No file of Debian's own QEMU packages (file lists of their .debs).
    chroot "$root" sh -c 'cd /var/cache/apt/archives &&
        apt-get -q -o APT::Sandbox::User=root download qemu-system-x86 qemu-system-common' >&2 ||
        fail "$dist: cannot download qemu-system-x86 to compare file lists"
    for p in qemu-system-x86 qemu-system-common; do
        f=$(find "$root/var/cache/apt/archives" -name "${p}_*.deb" | sort -V | tail -n 1)
        dpkg-deb --fsys-tarfile "$f" | tar -t | sed 's|^\./|/|; s|/$||'
    done > "$TEST_OUT/debian-files-$dist.txt"
    chroot "$root" dpkg -L qemu-system-data >> "$TEST_OUT/debian-files-$dist.txt"
    while read -r f; do
        [ -d "$root$f" ] && continue
        grep -qxF "$f" "$TEST_OUT/debian-files-$dist.txt" &&
            fail "$dist: $f is also in Debian's QEMU packages"
    done < "$TEST_OUT/files-$dist.txt"
    chroot "$root" apt-get install -s -q qemu-system-x86 > "$TEST_OUT/alongside-$dist.txt" ||
        fail "$dist: apt would not install qemu-system-x86 beside ours"
    grep -q '^Remv' "$TEST_OUT/alongside-$dist.txt" &&
        fail "$dist: installing qemu-system-x86 would remove packages (see $TEST_OUT/alongside-$dist.txt)"
    if [ "${PVRDMA_HOST_DEB_ALONGSIDE:-}" = 1 ]; then
        chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
            --no-install-recommends qemu-system-x86 || fail "$dist: installing qemu-system-x86 failed"
        chroot "$root" qemu-system-x86_64 --version | head -n 1
        chroot "$root" qemu-system-x86_64-pvrdma --version | head -n 1
    fi

    # The guest, booted by the installed command in the chroot: vm.sh's
    # QEMU is a wrapper that drops vm.sh's -L options (the package must do
    # without) and maps its files (all under the root) to chroot paths.
    mkdir -p "$root/guest" "$root/tmp/vm"
    cp "$PVRDMA_OUT/vmlinuz" "$PVRDMA_OUT/initrd.cpio.gz" "$root/guest/"
    used=$work/used-$dist
    cat > "$work/qemu-$dist" <<EOF
#!/bin/bash
r='$root'
args=()
while [ \$# -gt 0 ]; do
    case \$1 in -L) shift 2; continue ;; esac
    args+=("\${1//"\$r"/}")
    shift
done
echo "chroot $root /usr/bin/qemu-system-x86_64-pvrdma \${args[*]}" > $used
exec chroot $root /usr/bin/qemu-system-x86_64-pvrdma "\${args[@]}"
EOF
    chmod +x "$work/qemu-$dist"
    t1=$SECONDS
    name=$TEST_NAME-$dist
    TMPDIR=$root/tmp/vm PVRDMA_FAST_BOOT=0 PVRDMA_QEMU=$work/qemu-$dist \
    PVRDMA_KERNEL=$root/guest/vmlinuz PVRDMA_INITRD=$root/guest/initrd.cpio.gz \
    "$PVRDMA_TOP/scripts/vm.sh" --name "$name" --timeout 300 --smp 2 \
        --add "$TESTS_TOP/tests/guest/pair.sh" --add "$TEST_OUT/guest.sh" \
        -- sh ./guest.sh < /dev/null ||
        fail "$dist: guest failed (see $PVRDMA_OUT/vm/$name.log)"
    log=$PVRDMA_OUT/vm/$name.log
    grep -q '^GUEST-OK' "$log" || fail "$dist: guest script did not finish (see $log)"
    grep -E '^\[rc_pingpong .*bytes in .* seconds' "$log" || fail "$dist: no ping-pong result in $log"
    [ "$(grep -cE '^\[rc_pingpong .*200 iters' "$log")" -ge 2 ] || fail "$dist: the ping-pong did not complete both ways"
    grep -q -- '-device pvrdma' "$used" || fail "$dist: the wrapper did not run the installed QEMU"
    grep -q -- ' -L ' "$used" && fail "$dist: -L reached the installed QEMU"
    echo "=== $dist: ran $(cut -c1-200 "$used")..."
    boot=$((SECONDS - t1))

    umount_below "$root"
    rm -rf --one-file-system "$root"
    root=
    results+=("$dist ${ver#QEMU emulator version }: root ${prep_root}s, install+checks $((t1 - t0 - prep_root))s, guest ${boot}s")
done
summary=$(printf '%s; ' "${results[@]}")
pass "make host-deb packages installed with apt in clean roots, no file of Debian's QEMU, no -L, the installed binary runs ibv_rc_pingpong -c in a pvrdma guest (debs ${prep_debs}s; ${summary%; }; total ${SECONDS}s)"
