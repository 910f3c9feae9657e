# Helpers for host-side guest tests. Sourced.
set -euo pipefail
TESTS_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$TESTS_TOP/scripts/lib.sh"
# PVRDMA_TEST_SUFFIX names a variant run of a test (its logs apart).
TEST_NAME=$(basename "$0" .sh)${PVRDMA_TEST_SUFFIX:-}
TEST_OUT=$PVRDMA_OUT/tests/$TEST_NAME
mkdir -p "$TEST_OUT"

fail() { printf '[%s] FAIL: %s\n' "$TEST_NAME" "$*" >&2; exit 1; }
pass() { printf '[%s] PASS: %s\n' "$TEST_NAME" "$*"; }

# vm_workdir TAG: $work, a temporary directory with fab/ for a fabric
# directory, removed at exit after the sessions whose ids the test adds to
# the array pids (VMs started with setsid) are killed.
vm_workdir() {
    work=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-$1.XXXXXX")
    mkdir "$work/fab"
    pids=()
    trap _vm_workdir_cleanup EXIT
}
_vm_workdir_cleanup() {
    local p
    for p in "${pids[@]}"; do
        pkill -KILL -s "$p" 2> /dev/null || true
    done
    rm -rf "$work"
}

# build_prog NAME: compile tests/guest/progs/NAME.c against the rdma-core
# staging tree the guest image was made from; prints the binary's path.
build_prog() {
    local stage src bin
    stage=$(readlink -f "$PVRDMA_OUT/rdma-core")
    src=$TESTS_TOP/tests/guest/progs/$1.c
    bin=$TEST_OUT/$1
    gcc -O2 -g -Wall -Wextra -Werror -o "$bin" "$src" \
        -I"$stage/usr/include" -L"$stage/usr/lib/x86_64-linux-gnu" \
        -Wl,--allow-shlib-undefined -libverbs >&2 ||
        fail "cannot compile $src"
    echo "$bin"
}

# build_mpi_prog NAME: compile tests/guest/progs/NAME.c against Debian 12's
# Open MPI (mpi.h from libopenmpi-dev, libmpi from libopenmpi3, unpacked
# into the cache, not installed; the guest image carries the runtime);
# prints the binary's path.
build_mpi_prog() {
    local dev src bin
    dev=$PVRDMA_CACHE/image/mpi-dev
    if [ ! -e "$dev/.done" ]; then
        rm -rf "$dev" && mkdir -p "$dev/debs"
        fetch_deb "$dev/debs" libopenmpi-dev libopenmpi3 >&2 &&
            for d in "$dev"/debs/*.deb; do dpkg-deb -x "$d" "$dev/root"; done &&
            touch "$dev/.done" || fail "cannot fetch Open MPI's headers"
    fi
    src=$TESTS_TOP/tests/guest/progs/$1.c
    bin=$TEST_OUT/$1
    gcc -O2 -g -Wall -Wextra -Werror -o "$bin" "$src" \
        -I"$dev/root/usr/lib/x86_64-linux-gnu/openmpi/include" \
        -L"$dev/root/usr/lib/x86_64-linux-gnu/openmpi/lib" \
        -Wl,--allow-shlib-undefined -lmpi >&2 || fail "cannot compile $src"
    echo "$bin"
}
