#!/usr/bin/env bash
# Cross-VM against in-VM, in one run (a benchmark, not a test: it asserts
# nothing), for every way an application waits for what a peer sent:
#   in-VM:    two processes of one guest, one device;
#   cross-VM: guest B against guest A on one fabric (fabric-path, shared
#             memory between the two QEMU processes; 1 vCPU each);
#   TCP:      the same two guests with their fabrics linked by TCP over
#             the loopback (fabric-listen / fabric-peer).
# Measures (2 bytes typical usec unless said):
#   lat    ib_send_lat, polling the CQ (CQ_POLL as the device asks);
#   lat0   the same with CQ_POLL never (every hop wakes the event loop);
#   wlat   ib_write_lat: the receiver spins on memory, not on its CQ;
#   ppe    ibv_rc_pingpong -e 64 B (usec/iter): both asleep on a
#          completion channel;
#   sbwe   ib_send_bw -e 64 KiB (MB/s): streaming, completions by event;
#   sbw    the same polling;
#   wr64 / sd64 / rd64  ib_write_bw / ib_send_bw / ib_read_bw 64 B
#          (million messages/s): requests in flight per QP;
#   wb4    ib_write_bw 64 B -t 4 -Q 4: bursts of 4 WRITEs, each waited
#          for (the send doorbell hint must not hold a burst back);
#   bw1m   ib_write_bw 1 MiB (MB/s).
# (ib_write_bw -e is refused by Debian 12's perftest: "Events feature not
# available on WRITE verb".) Rounds alternate the setups so all see the
# same machine load; the medians are printed with the cross/in-VM ratios,
# and beside them the host's own round trip between two processes over a
# unix socket (tests/bench/ipc_rtt.c): the floor under any hop that wakes
# a process.
#
#   tests/bench/xvm.sh [-r ROUNDS]
# XVM_ONLY="wr64 sd64" runs only those measurements, XVM_SETUPS="xvm"
# only those setups (invm, xvm, tcp), to look at one figure quickly;
# XVM_N sets the message count of wr64 and sd64 (200000).
set -euo pipefail
. "$(dirname "$0")/../guest/lib.sh"
. "$TESTS_TOP/tests/guest/vmpair.sh"
rounds=3
if [ "${1:-}" = -r ]; then rounds=$2; shift 2; fi
work=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The measurements, one guest script per role; each prints KEY value.
# KEY:ENV:TOOL:ARGS:FIELD, with _ for spaces in ARGS; ENV is - or
# VAR=VALUE; FIELD says what to read: lat (typical usec of the 2-byte
# row), pp (usec/iter), mbs (average MB/s), mps (million messages/s).
tests="lat:-:ib_send_lat:-n_5000:lat lat0:PVRDMA_CQ_POLL_EVERY=0:ib_send_lat:-n_5000:lat wlat:-:ib_write_lat:-n_5000:lat ppe:-:ibv_rc_pingpong:-e_-s_64_-n_500:pp sbwe:-:ib_send_bw:-e_-s_65536_-n_2000:mbs sbw:-:ib_send_bw:-s_65536_-n_2000:mbs wr64:-:ib_write_bw:-s_64_-n_${XVM_N:-200000}:mps sd64:-:ib_send_bw:-s_64_-n_${XVM_N:-200000}:mps rd64:-:ib_read_bw:-s_64_-n_200000:mps wb4:-:ib_write_bw:-s_64_-n_100000_-t_4_-Q_4:mps bw1m:-:ib_write_bw:-s_1048576_-n_500:mbs"
keys="lat lat0 wlat ppe sbwe sbw wr64 sd64 rd64 wb4 bw1m"
setups=${XVM_SETUPS:-invm xvm tcp}
if [ -n "${XVM_ONLY:-}" ]; then
    keys=$XVM_ONLY
    tests=$(for t in $tests; do
        case " $keys " in *" ${t%%:*} "*) echo "$t" ;; esac
    done | xargs)
fi
# Sets k, e (env assignment or empty), tool, args, field and the device
# options o from one entry $t.
split='k=${t%%:*}; r=${t#*:}; e=${r%%:*}; r=${r#*:}; [ "$e" = - ] && e=
    tool=${r%%:*}; r=${r#*:}; args=$(echo "${r%%:*}" | tr _ " "); f=${r#*:}
    case $tool in ibv_*) o="-d pvrdma0 -g 1" ;; *) o="-d pvrdma0 -x 1 -F" ;; esac'
# Prints "RES KEY VALUE" from the client's output file $1 for field $f.
pick='case $f in
    lat) v=$(awk '"'"'$1 == 2 && $2 ~ /^[0-9]+$/ { print $5 }'"'"' "$1") ;;
    pp) v=$(sed -n '"'"'s/.*= \([0-9.]*\) usec\/iter$/\1/p'"'"' "$1") ;;
    mbs) v=$(awk '"'"'$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ { print $4 }'"'"' "$1") ;;
    mps) v=$(awk '"'"'$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ { print $5 }'"'"' "$1") ;;
    esac
    echo "RES $k $v"'
cat > "$work/one.sh" <<GUEST
. ./pair.sh
for t in $tests; do
    $split
    start_server \$k 600 "env \$e \$tool \$o \$args"
    env \$e \$tool \$o \$args 127.0.0.1 > /tmp/\$k.c 2>&1; wait \$spid
    set -- /tmp/\$k.c
    $pick
done
GUEST
cat > "$work/a.sh" <<GUEST
. ./sync.sh
for t in $tests; do
    $split
    xpair_server \$k 600 "env \$e \$tool \$o \$args" > /dev/null
done
GUEST
cat > "$work/b.sh" <<GUEST
. ./sync.sh
for t in $tests; do
    $split
    xpair_client \$k 600 "env \$e \$tool \$o \$args \$PEER_IP" > /dev/null
    set -- /tmp/\$k.cli
    $pick
done
GUEST

res() { # LOG SETUP: append "SETUP KEY VALUE" lines to $work/all
    sed -n 's/^RES \([a-z0-9]*\) \([0-9.][0-9.]*\)$/\1 \2/p' "$1" |
        while read -r k v; do echo "$2 $k $v"; done >> "$work/all"
}
for ((r = 1; r <= rounds; r++)); do
    case " $setups " in *" invm "*)
    log "round $r/$rounds: in-VM"
    "$PVRDMA_TOP/scripts/vm.sh" --name bench-one --timeout 1800 --smp 2 \
        --add "$TESTS_TOP/tests/guest/pair.sh" --add "$work/one.sh" \
        -- sh ./one.sh > /dev/null || die "in-VM run failed"
    res "$PVRDMA_OUT/vm/bench-one.log" invm ;; esac
    case " $setups " in *" xvm "*)
    log "round $r/$rounds: cross-VM (shared memory)"
    mkdir -p "$work/fab"
    vmpair_run bench-xvm 1800 "$work/a.sh" "$work/b.sh" --arg --smp --arg 1 \
        --arg -d --arg ",fabric-path=$work/fab" > /dev/null
    res "$PVRDMA_OUT/vm/bench-xvm-b.log" xvm ;; esac
    case " $setups " in *" tcp "*)
    log "round $r/$rounds: cross-VM (TCP over loopback)"
    port=$((7500 + r))
    vmpair_run bench-tcp 1800 "$work/a.sh" "$work/b.sh" --arg --smp --arg 1 \
        --a-arg -d --a-arg ",fabric-listen=127.0.0.1:$port" \
        --b-arg -d --b-arg ",fabric-peer=127.0.0.1:$port" > /dev/null
    res "$PVRDMA_OUT/vm/bench-tcp-b.log" tcp ;; esac
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
for k in $keys; do
    i=$(med invm $k) x=$(med xvm $k) t=$(med tcp $k)
    case $k in
    lat) label="ib_send_lat 2 B (usec)" ;;
    lat0) label="  same, CQ_POLL never" ;;
    wlat) label="ib_write_lat 2 B (usec)" ;;
    ppe) label="rc_pingpong -e 64 B (us)" ;;
    sbwe) label="ib_send_bw -e 64 KiB (MB/s)" ;;
    sbw) label="ib_send_bw 64 KiB (MB/s)" ;;
    wr64) label="ib_write_bw 64 B (M msg/s)" ;;
    sd64) label="ib_send_bw 64 B (M msg/s)" ;;
    rd64) label="ib_read_bw 64 B (M msg/s)" ;;
    wb4) label="ib_write_bw 64 B bursts 4" ;;
    bw1m) label="ib_write_bw 1 MiB (MB/s)" ;;
    esac
    printf '%-26s %12s %12s %12s %10s %10s\n' "$label" "$i" "$x" "$t" \
        "$(awk -v a="$x" -v b="$i" 'BEGIN { printf "%.2f", a / b }')" \
        "$(awk -v a="$t" -v b="$i" 'BEGIN { printf "%.2f", a / b }')"
done
echo "every round (in-VM / cross-VM / cross-TCP):"
for k in $keys; do
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
