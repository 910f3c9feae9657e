#!/usr/bin/env bash
# make bench, setup "mig": what a migration costs the peers (docs/
# migration.md, "Blackout"). Two VMs on one fabric directory (1 vCPU
# each, as make bench's two-VM setup): M (the one that moves) serves
# tests/guest/progs/mig_gap.c, P runs its client with N connected RC QPs,
# each keeping one 8-byte WRITE into M outstanding; about 3 s after the
# WRITEs start the host moves M to a new QEMU. For N = 1, 64 and 1024
# (MIGBENCH_QPS; 64 alone with BENCH_QUICK=1), one move each:
#   - the blackout P's QPs saw: per QP the longest time between two of
#     its completions (last before the switch to first after), median and
#     max over the QPs, and the steady interval between completions;
#   - QEMU's own downtime and total migration time (query-migrate);
# and one move with no RDMA traffic (QEMU's figures only). Every WRITE is
# checked at the end (each slot of M's buffer holds its QP's last value).
# Output: $out/migration.txt (a table), also printed: QEMU's downtime and
# total time, the device's quiesce (its part of the downtime, from the
# pvrdma_move_out trace event), the peer's gaps. What RDMA adds reads off
# it: the quiesce inside the downtime, and the blackout's max beyond it
# (the destination's claim reaching the peer).
. "$(dirname "$0")/../guest/lib.sh"
. "$TESTS_TOP/tests/guest/migrate.sh"

out=${BENCH_OUT:-$PVRDMA_OUT/bench}
cases=${MIGBENCH_QPS:-1 64 1024} secs=14
if [ "${BENCH_QUICK:-0}" = 1 ]; then
    cases=${MIGBENCH_QPS:-64} secs=10        # (test-bench-quick)
fi
mkdir -p "$out"
d=$TEST_OUT
rm -f "$d"/*.sock
gap=$(build_prog mig_gap)

cat > "$d/guest.sh" <<GUEST
cases="$cases" secs=$secs
GUEST
cat >> "$d/guest.sh" <<'GUEST'
. ./sync.sh
if [ "$ROLE" = m ]; then
    ip addr add 10.0.2.15/24 dev eth1 && ip link set eth1 up ||
        fail "eth1 (the host's channel)"
fi
for n in $cases; do
    p=$((18541 + n % 1000))
    if [ "$ROLE" = m ]; then
        xpair_server "gap$n" 900 "./mig_gap -d pvrdma0 -q $n -p $p"
    else
        xpair_client "gap$n" 900 \
            "./mig_gap -d pvrdma0 -q $n -p $p -s $secs -c /dev/console $PEER_IP"
    fi
done
# Then nothing runs while the host moves M once more; it says when.
if [ "$ROLE" = m ]; then
    echo BENCH-IDLE
    nc -l -p 7000 > /dev/null 2>&1
    sync_signal end 900
else
    sync_wait "$PEER_IP" end 900
fi
echo BENCH-DONE
GUEST

# 1024 QPs and their CQ on each device, beside what the guest has.
devargs=(-q -global -q pvrdma.max-qp=2048 -q -global -q pvrdma.max-cqe=65536)
# M's QEMUs say how long the device's quiesce took (its part of the
# downtime: peers asked to hold, what was in flight finished).
mtrace=(-q -trace -q pvrdma_move_out)
xmig_setup shm "$gap" "$d/guest.sh" "$TESTS_TOP/tests/guest/sync.sh" \
    "$TESTS_TOP/tests/guest/pair.sh"
xmig_start_p --smp 1 "${devargs[@]}"
ppid=$pid
xmig_start_m m0 "$(free_port)" --smp 1 "${devargs[@]}" "${mtrace[@]}"
mpid=$pid
cur=m0 k=0
plog=$PVRDMA_OUT/vm/xmig-p.log
results=$out/migration.txt
{
    echo "# A VM moved while RDMA runs with a peer VM (tests/bench/migrate-bench.sh)"
    printf '%-8s %12s %12s %12s %12s %12s %12s\n' QPs "downtime ms" \
        "quiesce ms" "total ms" "gap med ms" "gap max ms" "steady ms"
} > "$results"

# move: M to a new QEMU; sets down and total (QEMU's figures, ms).
move() {
    local next=m$((k + 1)) st npid
    k=$((k + 1))
    hport=$(free_port)
    xmig_start_m "$next" "$hport" --smp 1 "${devargs[@]}" "${mtrace[@]}" \
        -q -incoming -q "unix:$d/mig-$next.sock"
    npid=$pid
    qmp "$d/qmp-$cur.sock" migrate "{\"uri\": \"unix:$d/mig-$next.sock\"}" > /dev/null
    st=$(migrate_wait "$cur")
    [ "$st" = completed ] || fail "move $k: $st (logs: $d/$cur.err, $d/$next.err)"
    read -r down total < <(qmp "$d/qmp-$cur.sock" query-migrate |
        python3 -c 'import json, sys; r = json.load(sys.stdin); print(r.get("downtime"), r.get("total-time"))')
    quiesce=$(sed -n 's/.*pvrdma_move_out.*ok 1 in \([0-9]*\) us.*/\1/p' "$d/$cur.err" |
              tail -n 1 | awk '{ printf "%.1f", $1 / 1000 }')
    [ -n "$quiesce" ] || fail "no pvrdma_move_out trace in $d/$cur.err"
    qmp "$d/qmp-$cur.sock" quit > /dev/null || true
    wait "$mpid" || true
    mpid=$npid cur=$next
}

i=0
for n in $cases; do
    i=$((i + 1))
    xmig_seen p "^mig_gap: running $n qps" 1
    sleep 3
    move
    until grep -q "mig_gap: $n qps" "$plog" 2> /dev/null; do
        kill -0 "$ppid" 2> /dev/null || fail "guest P stopped (log: $plog)"
        sleep 0.5
    done
    line=$(grep "mig_gap: $n qps" "$plog" | tail -n 1)
    med=$(sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' <<< "$line")
    max=$(sed -n 's/.*max \([0-9.]*\) ms.*/\1/p' <<< "$line")
    steady=$(sed -n 's/.*steady \([0-9.]*\) ms.*/\1/p' <<< "$line")
    printf '%-8s %12s %12s %12s %12s %12s %12s\n' "$n" "$down" "$quiesce" \
        "$total" "$med" "$max" "$steady" >> "$results"
done
xmig_seen "$cur" '^BENCH-IDLE' 1
move
printf '%-8s %12s %12s %12s %12s %12s %12s\n' "idle" "$down" "$quiesce" \
    "$total" - - - >> "$results"
send_go() { { echo go >&3; } 3<> "/dev/tcp/127.0.0.1/$hport"; }
until send_go 2> /dev/null; do
    kill -0 "$mpid" 2> /dev/null || fail "QEMU $cur stopped ($d/$cur.err)"
    sleep 0.1
done
rc=0
wait "$ppid" || rc=$?
[ $rc = 0 ] || fail "guest P failed (status $rc; log: $plog)"
grep -q '^BENCH-DONE' "$plog" || fail "no BENCH-DONE in $plog"
trap - EXIT
xmig_cleanup
cat "$results"
