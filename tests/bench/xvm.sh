#!/usr/bin/env bash
# Cross-VM against in-VM, in one run (a benchmark, not a test: it asserts
# nothing). Measures ib_send_lat (2 bytes, typical usec) and ib_write_bw
# (64 KiB and 1 MiB, average MB/s):
#   in-VM:    two processes of one guest, one device;
#   cross-VM: guest B against guest A on one fabric (fabric-path, shared
#             memory between the two QEMU processes);
#   TCP:      the same two guests with their fabrics linked by TCP over
#             the loopback (fabric-listen / fabric-peer).
# Rounds alternate the setups so all see the same machine load; the
# medians are printed with the cross/in-VM ratios (issue 7's targets:
# latency within 2x, 1 MiB bandwidth at least 1/4 of in-VM), and beside
# them the host's own round trip between two processes over a unix
# socket (tests/bench/ipc_rtt.c): the floor under any cross-process hop.
#
#   tests/bench/xvm.sh [-r ROUNDS]
set -euo pipefail
. "$(dirname "$0")/../guest/lib.sh"
. "$TESTS_TOP/tests/guest/vmpair.sh"
rounds=3
if [ "${1:-}" = -r ]; then rounds=$2; shift 2; fi
work=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The measurements, one guest script per role; each prints KEY value.
# KEY:ENV:TOOL:ARGS, with _ for spaces in ARGS; ENV is - or VAR=VALUE.
# lat: as the device asks (CQ_POLL on empty polls with a fabric-* property,
# so the device takes in what a peer sent without its event loop; never
# within one VM); lat0 and lat1 force never and always (docs/abi.md §14).
tests='lat:-:ib_send_lat:-n_5000 lat0:PVRDMA_CQ_POLL_EVERY=0:ib_send_lat:-n_5000 lat1:PVRDMA_CQ_POLL_EVERY=1:ib_send_lat:-n_5000 bw64k:-:ib_write_bw:-s_65536_-n_2000 bw1m:-:ib_write_bw:-s_1048576_-n_500'
# Sets k, e (env assignment or empty), tool and args from one entry $t.
split='k=${t%%:*}; r=${t#*:}; e=${r%%:*}; r=${r#*:}; [ "$e" = - ] && e=
    tool=${r%%:*}; args=$(echo "${r#*:}" | tr _ " ")'
cat > "$work/one.sh" <<GUEST
o="-d pvrdma0 -x 1 -F"
for t in $tests; do
    $split
    env \$e \$tool \$o \$args > /tmp/\$k.s 2>&1 & sleep 1
    env \$e \$tool \$o \$args 127.0.0.1 > /tmp/\$k.c 2>&1; wait
done
echo "RES lat \$(awk '\$1 == 2 && \$2 == 5000 { print \$5 }' /tmp/lat.c)"
echo "RES lat0 \$(awk '\$1 == 2 && \$2 == 5000 { print \$5 }' /tmp/lat0.c)"
echo "RES lat1 \$(awk '\$1 == 2 && \$2 == 5000 { print \$5 }' /tmp/lat1.c)"
echo "RES bw64k \$(awk '\$1 == 65536 && \$2 == 2000 { print \$4 }' /tmp/bw64k.c)"
echo "RES bw1m \$(awk '\$1 == 1048576 && \$2 == 500 { print \$4 }' /tmp/bw1m.c)"
GUEST
cat > "$work/a.sh" <<GUEST
. ./sync.sh
o="-d pvrdma0 -x 1 -F"
for t in $tests; do
    $split
    xpair_server \$k 600 "env \$e \$tool \$o \$args" > /dev/null
done
GUEST
cat > "$work/b.sh" <<GUEST
. ./sync.sh
o="-d pvrdma0 -x 1 -F"
for t in $tests; do
    $split
    xpair_client \$k 600 "env \$e \$tool \$o \$args \$PEER_IP" > /dev/null
done
echo "RES lat \$(awk '\$1 == 2 && \$2 == 5000 { print \$5 }' /tmp/lat.cli)"
echo "RES lat0 \$(awk '\$1 == 2 && \$2 == 5000 { print \$5 }' /tmp/lat0.cli)"
echo "RES lat1 \$(awk '\$1 == 2 && \$2 == 5000 { print \$5 }' /tmp/lat1.cli)"
echo "RES bw64k \$(awk '\$1 == 65536 && \$2 == 2000 { print \$4 }' /tmp/bw64k.cli)"
echo "RES bw1m \$(awk '\$1 == 1048576 && \$2 == 500 { print \$4 }' /tmp/bw1m.cli)"
GUEST

res() { # LOG SETUP: append "SETUP KEY VALUE" lines to $work/all
    sed -n 's/^RES \([a-z0-9]*\) \([0-9.]*\)$/\1 \2/p' "$1" |
        while read -r k v; do echo "$2 $k $v"; done >> "$work/all"
}
for ((r = 1; r <= rounds; r++)); do
    log "round $r/$rounds: in-VM"
    "$PVRDMA_TOP/scripts/vm.sh" --name bench-one --timeout 900 \
        --add "$work/one.sh" -- sh ./one.sh > /dev/null || die "in-VM run failed"
    res "$PVRDMA_OUT/vm/bench-one.log" invm
    log "round $r/$rounds: cross-VM (shared memory)"
    mkdir -p "$work/fab"
    vmpair_run bench-xvm 900 "$work/a.sh" "$work/b.sh" \
        --arg -d --arg ",fabric-path=$work/fab" > /dev/null
    res "$PVRDMA_OUT/vm/bench-xvm-b.log" xvm
    log "round $r/$rounds: cross-VM (TCP over loopback)"
    port=$((7500 + r))
    vmpair_run bench-tcp 900 "$work/a.sh" "$work/b.sh" \
        --a-arg -d --a-arg ",fabric-listen=127.0.0.1:$port" \
        --b-arg -d --b-arg ",fabric-peer=127.0.0.1:$port" > /dev/null
    res "$PVRDMA_OUT/vm/bench-tcp-b.log" tcp
done

# The host's own floor for a hop between processes (no guest at all).
gcc -O2 -o "$work/ipc_rtt" "$TESTS_TOP/tests/bench/ipc_rtt.c"
ipc_idle=$("$work/ipc_rtt" 20000 0)
ipc_busy=$("$work/ipc_rtt" 20000 2)

med() { # SETUP KEY
    awk -v s="$1" -v k="$2" '$1 == s && $2 == k { print $3 }' "$work/all" |
        sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "nan" }'
}
printf '\n%-26s %12s %12s %12s %10s %10s\n' "median of $rounds" in-VM \
    cross-VM cross-TCP xVM/in TCP/in
for k in lat lat0 lat1 bw64k bw1m; do
    i=$(med invm $k) x=$(med xvm $k) t=$(med tcp $k)
    case $k in
    lat) label="ib_send_lat 2 B (usec)" ;;
    lat0) label="  same, CQ_POLL never" ;;
    lat1) label="  same, CQ_POLL always" ;;
    bw64k) label="ib_write_bw 64 KiB (MB/s)" ;;
    bw1m) label="ib_write_bw 1 MiB (MB/s)" ;;
    esac
    printf '%-26s %12s %12s %12s %10s %10s\n' "$label" "$i" "$x" "$t" \
        "$(awk -v a="$x" -v b="$i" 'BEGIN { printf "%.2f", a / b }')" \
        "$(awk -v a="$t" -v b="$i" 'BEGIN { printf "%.2f", a / b }')"
done
echo "every round (in-VM / cross-VM / cross-TCP):"
for k in lat lat0 lat1 bw64k bw1m; do
    printf '  %-6s' "$k"
    for st in invm xvm tcp; do
        printf ' %s' "$(awk -v s="$st" -v k="$k" '$1 == s && $2 == k { printf "%s%s", sep, $3; sep = "," }' "$work/all")"
        [ "$st" = tcp ] || printf ' /'
    done
    echo
done
printf '%-26s %12s (idle host), %s (two CPUs spinning, as polling guests do)\n' \
    "host unix-socket RTT (usec)" "$ipc_idle" "$ipc_busy"
echo "(ib_send_lat prints half a round trip; every cross-VM one-way crosses"
echo " at least one such process wakeup, so half that RTT is a floor)"
