#!/usr/bin/env bash
# What the last guest tests of `make check` need and the first do not,
# built ahead: tests/guest/run-all.sh starts this in the background, at
# the lowest CPU and I/O priority, when the suite starts, and waits for it
# at the "wait-prebuild" line of tests/guest/TESTS (after which those
# tests come). On a fresh machine these builds take many minutes of CPU;
# the first tests leave a core idle much of the time (one guest's early
# boot, the host side of a test, a wait for a timeout), and this takes
# that time instead of adding its own. With warm caches each step finds
# its artefact and returns at once.
#
# Steps, each as the test that needs it calls it, so that the test finds
# the same cached artefact:
#   - the newest QEMU (make qemu-newest)             test-qemu-newest
#   - Debian 13's 6.12 guest image (make image-6.12) test-kernel-6.12,
#                                                    test-stock-driver-6.12
#   - the upstream vmw_pvrdma for 6.12               test-stock-driver-6.12
#   - the stock Debian 12 and 13 guests              test-deb-install
#     (scripts/build-deb-guest.sh)
#   - the Debian 13 host package's QEMU, built in    test-host-deb
#     a Debian 13 root (scripts/build-host-deb.sh;
#     the packages go to build/prebuild/, not to
#     build/host-deb/, which test-libvirt writes
#     meanwhile)
# No step may replace what an early test uses while it runs: the links it
# makes are new names (build/*-6.12, build/qemu-system-x86_64-newest), or
# replaced atomically (scripts/lib.sh relink), and scripts/build-qemu.sh
# locks its build directory.
#
# Run by hand it is just those builds, at normal priority. Exits non-zero
# at the first step that fails (run-all.sh then runs it again in the
# foreground, so that the error shows where it matters).
. "$(dirname "$0")/lib.sh"

step() {
    local t0=$SECONDS
    log "$1"
    shift
    "$@" > /dev/null || die "step failed: $*"
    log "  done in $((SECONDS - t0)) s"
}

cd "$PVRDMA_TOP" || die "no $PVRDMA_TOP"
step "the newest QEMU" make -s qemu-newest
step "the Debian 13 6.12 guest image" make -s image-6.12
step "the upstream vmw_pvrdma for 6.12" \
    bash tests/guest/build-stock-driver.sh 6.12
step "the stock Debian 12 guest" \
    scripts/build-deb-guest.sh "$PVRDMA_OUT/kernel" bookworm
step "the stock Debian 13 guest" \
    scripts/build-deb-guest.sh "$PVRDMA_OUT/kernel-6.12" trixie
step "the Debian 13 host package" \
    env HOST_DEB_DISTS=trixie PVRDMA_OUT="$PVRDMA_OUT/prebuild" \
    scripts/build-host-deb.sh
