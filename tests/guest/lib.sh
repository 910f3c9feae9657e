# Helpers for host-side guest tests. Sourced.
set -euo pipefail
TESTS_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$TESTS_TOP/scripts/lib.sh"
TEST_NAME=$(basename "$0" .sh)
TEST_OUT=$PVRDMA_OUT/tests/$TEST_NAME
mkdir -p "$TEST_OUT"

fail() { printf '[%s] FAIL: %s\n' "$TEST_NAME" "$*" >&2; exit 1; }
pass() { printf '[%s] PASS: %s\n' "$TEST_NAME" "$*"; }

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
