#!/usr/bin/env bash
# A/B comparison of two QEMU binaries, or of one without and with
# iothread=, on the in-VM figures: ib_send_lat (2 bytes, typical usec),
# ib_write_bw (1 MiB, average MB/s; 64 B, million messages/s), ib_send_bw
# (64 B, million messages/s), ib_read_bw (1 MiB, average MB/s) and
# ibv_rc_pingpong (4 KiB, usec/iter, polling and with events -e), between
# two processes of one guest on one pvrdma device.  Rounds alternate A and
# B in one run, so both see the same machine load; the medians of each
# are printed side by side, and ib_write_bw 1 MiB as a share of the
# host's single-core memcpy of 1 MiB measured in the same rounds.
#
#   tests/bench/ab.sh [-r ROUNDS] QEMU_A QEMU_B
#   tests/bench/ab.sh [-r ROUNDS] --b-iothread [QEMU]
#   tests/bench/ab.sh [-r ROUNDS] --a-dev PROPS --b-dev PROPS [QEMU]
#
# Build the A binary from another checkout (git worktree) with `make qemu`
# and copy it away before rebuilding B; the guest image is shared.
# --b-iothread: B is the same QEMU (default: the built one) with the
# device's doorbells in an IOThread (scripts/vm.sh --iothread).
# --a-dev/--b-dev: the same QEMU with PROPS appended to -device pvrdma
# (",x-ram-cache=off").
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
rounds=3 a_opts=() b_opts=() same=
if [ "${1:-}" = -r ]; then rounds=$2; shift 2; fi
while [ $# -gt 0 ]; do
    case $1 in
    --b-iothread) b_opts+=(--iothread); same=1; shift ;;
    --a-dev) a_opts+=(-d "$2"); same=1; shift 2 ;;
    --b-dev) b_opts+=(-d "$2"); same=1; shift 2 ;;
    *) break ;;
    esac
done
if [ -n "$same" ]; then
    [ $# -le 1 ] || { echo "usage: $0 [-r ROUNDS] --b-iothread|--a-dev P --b-dev P [QEMU]" >&2; exit 2; }
    set -- "${1:-$top/build/qemu-system-x86_64}"
    set -- "$1" "$1"
fi
[ $# -eq 2 ] || { echo "usage: $0 [-r ROUNDS] QEMU_A QEMU_B" >&2; exit 2; }
a=$1 b=$2
for q in "$a" "$b"; do
    [ -x "$q" ] || { echo "$q: not an executable QEMU binary" >&2; exit 2; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# The host's single-core memcpy of 1 MiB, the limit of ib_write_bw 1 MiB,
# measured every round too.
gcc -O2 -Wall -Wextra -Werror -o "$out/memcpy_bw" "$top/tests/bench/memcpy_bw.c"

cat > "$out/guest.sh" <<'GUEST'
o="-d pvrdma0 -x 1 -F"
# pp KEY CMD...: CMD as server, then as client of 127.0.0.1 (/tmp/KEY.c)
pp() {
    k=$1
    shift
    "$@" > /tmp/$k.s 2>&1 & sleep 1
    "$@" 127.0.0.1 > /tmp/$k.c 2>&1; wait
}
usec() { sed -n 's/.*= \([0-9.]*\) usec\/iter.*/\1/p' /tmp/$1.c; }
pp l ib_send_lat $o -n 5000
echo "LAT $(awk '$1 == 2 && $2 == 5000 { print $5 }' /tmp/l.c)"
pp b ib_write_bw $o -s 1048576 -n 1000
echo "BW $(awk '$1 == 1048576 && $2 == 1000 { print $4 }' /tmp/b.c)"
# Message rates over 10^6 messages (about a second): 20000 gave 10-25%
# less, start-up (new guest code for TCG to translate) weighing in.
pp m ib_write_bw $o -s 64 -n 1000000
echo "MR $(awk '$1 == 64 && $2 == 1000000 { print $5 }' /tmp/m.c)"
pp n ib_send_bw $o -s 64 -n 1000000
echo "SR $(awk '$1 == 64 && $2 == 1000000 { print $5 }' /tmp/n.c)"
pp r ib_read_bw $o -s 1048576 -n 1000
echo "RB $(awk '$1 == 1048576 && $2 == 1000 { print $4 }' /tmp/r.c)"
pp p ibv_rc_pingpong -d pvrdma0 -g 1 -n 20000
echo "PP $(usec p)"
pp e ibv_rc_pingpong -d pvrdma0 -g 1 -n 5000 -e
echo "PE $(usec e)"
GUEST

for r in $(seq "$rounds"); do
    for v in a b; do
        q=$a opts=("${a_opts[@]}")
        [ $v = b ] && q=$b opts=("${b_opts[@]}")
        PVRDMA_QEMU=$q PVRDMA_IOTHREAD= "$top/scripts/vm.sh" \
            --name "bench-ab-$v" --smp 2 "${opts[@]}" \
            --timeout 900 --add "$out/guest.sh" -- sh ./guest.sh |
            grep -E '^(LAT|BW|MR|SR|RB|PP|PE) [0-9.]+$' | sed "s/^/$v /" >> "$out/all"
        echo "round $r $v: $(grep "^$v " "$out/all" | tail -7 | tr '\n' ' ')"
    done
    "$out/memcpy_bw" 1048576 | awk '{ print "m MEMCPY", $7 }' >> "$out/all"
done
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf '%-28s %12s %12s %8s\n' figure A B B/A
for k in LAT:"ib_send_lat 2 B (usec)" BW:"ib_write_bw 1 MiB (MB/s)" \
         MR:"ib_write_bw 64 B (Mmsg/s)" SR:"ib_send_bw 64 B (Mmsg/s)" \
         RB:"ib_read_bw 1 MiB (MB/s)" PP:"ibv_rc_pingpong (usec/iter)" \
         PE:"ibv_rc_pingpong -e (usec/iter)"; do
    key=${k%%:*} name=${k#*:}
    ma=$(awk -v k="$key" '$1 == "a" && $2 == k { print $3 }' "$out/all" | median)
    mb=$(awk -v k="$key" '$1 == "b" && $2 == k { print $3 }' "$out/all" | median)
    printf '%-28s %12s %12s %8.2f\n' "$name" "$ma" "$mb" \
        "$(awk -v a="$ma" -v b="$mb" 'BEGIN { print a ? b / a : 0 }')"
done
mm=$(awk '$1 == "m" { print $3 }' "$out/all" | median)
for k in BW:ib_write_bw RB:ib_read_bw; do
    for v in a b; do
        mv=$(awk -v v=$v -v k=${k%%:*} '$1 == v && $2 == k { print $3 }' "$out/all" | median)
        printf '%s 1 MiB %s: %.0f%% of the host memcpy of 1 MiB (%s MB/s)\n' \
            "${k#*:}" "${v^^}" \
            "$(awk -v x="$mv" -v m="$mm" 'BEGIN { print m ? 100 * x / m : 0 }')" "$mm"
    done
done
