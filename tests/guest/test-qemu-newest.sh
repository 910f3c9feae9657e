#!/usr/bin/env bash
# The device on the newest QEMU of Debian's archive instead of 10.0 (make
# qemu-newest: scripts/build-qemu.sh with QEMU_SERIES=newest resolves it
# at build time, build/qemu-system-x86_64-newest). First the binary must
# report the version it was built from (pvrdma-qemu.env beside it) and
# differ from the base QEMU's; then bring-up, rc_verify, the two-VM
# suite (without UCX, Open MPI and perftest -R, which do not depend on
# QEMU: PVRDMA_XVM_QUICK) and the TLS links (its TLS session API differs
# from 10.0's) run
# again on it (PVRDMA_QEMU, honoured by scripts/vm.sh and so by
# vmpair.sh), under the names NAME-qemu-newest (logs apart). Fails if any
# of them fails. Last, make host-deb packages this QEMU for Debian 12
# (QEMU_SERIES=newest) and the package's binary is it, with the device.
. "$(dirname "$0")/lib.sh"

link=$PVRDMA_OUT/qemu-system-x86_64-newest
[ -x "$link" ] || fail "$link is missing: run 'make qemu-newest'"
qemu=$(readlink -f "$link")
env=$(dirname "$qemu")/pvrdma-qemu.env
[ -r "$env" ] || fail "$env is missing: run 'make qemu-newest'"
want=$(sed -n 's/^QEMU_SRC_VERSION=//p' "$env")
want=${want%+ds}
[ -n "$want" ] || fail "$env names no QEMU_SRC_VERSION"
got=$("$qemu" --version | sed -n 's/^QEMU emulator version \([^ ]*\).*/\1/p')
[ "$got" = "$want" ] ||
    fail "$qemu reports version '$got', it was built from $want"
base=$("$PVRDMA_OUT/qemu-system-x86_64" --version |
       sed -n 's/^QEMU emulator version \([^ ]*\).*/\1/p') || base=
[ "$got" != "$base" ] || fail "the newest QEMU is the base one ($base)"
pass "$link is QEMU $got ($(sed -n 's/^QEMU_DEB_VERSION=//p' "$env"); base: ${base:-none})"

export PVRDMA_QEMU=$qemu
tests="test-bringup test-rc-verify test-xvm test-fabric-tls"
failed=()
for t in $tests; do
    start=$SECONDS
    # (the two-VM suite without the stacks above the verbs: xvm.sh)
    if PVRDMA_XVM_QUICK=1 PVRDMA_TEST_SUFFIX=-qemu-newest \
       bash "$TESTS_TOP/tests/guest/$t.sh"; then
        echo "[$TEST_NAME] $t on QEMU $got: passed ($((SECONDS - start))s)"
    else
        echo "[$TEST_NAME] $t on QEMU $got: FAILED ($((SECONDS - start))s)"
        failed+=("$t")
    fi
done
[ ${#failed[@]} -eq 0 ] || fail "on QEMU $got: ${failed[*]} failed"
pass "on QEMU $got: $tests"

# make host-deb packages it too (QEMU_SERIES=newest; Debian 12's package
# is this very build): the package's binary is QEMU $got with the device.
debs=$TEST_OUT/host-deb
rm -rf "$debs"
mapfile -t pkg < <(QEMU_SERIES=newest HOST_DEB_DISTS=bookworm \
    PVRDMA_OUT=$debs "$PVRDMA_TOP/scripts/build-host-deb.sh") ||
    fail "QEMU_SERIES=newest make host-deb failed"
[ ${#pkg[@]} -eq 1 ] && [ -e "${pkg[0]}" ] ||
    fail "build-host-deb.sh printed ${#pkg[@]} packages, want 1"
case $(basename "${pkg[0]}") in
*+qemu$got~deb12_amd64.deb) ;;
*) fail "$(basename "${pkg[0]}") is not a package of QEMU $got" ;;
esac
dpkg-deb -x "${pkg[0]}" "$debs/root"
bin=$debs/root/usr/lib/pvrdma/qemu-system-x86_64
"$bin" --version | grep -q "^QEMU emulator version $got" ||
    fail "the packaged binary is not QEMU $got"
"$bin" -device help 2>&1 | grep -q '^name "pvrdma"' ||
    fail "the packaged QEMU $got has no pvrdma device"
pass "QEMU_SERIES=newest make host-deb: $(basename "${pkg[0]}")"
