#!/usr/bin/env bash
# make bench in its quick mode (tests/bench/bench.sh, BENCH_QUICK=1: one
# size of each series, one round, every setup; Soft-RoCE in one VM and
# pvrdma over TCP links in a few series, and over a TLS link in two):
# every series of pvrdma in one
# and between two VMs gives a figure, so do the few of the others, the
# report and the plots are made, and the migration benchmark measures a
# move at 64 QPs.
# Figures are not judged here (these machines are noisy; docs/benchmarks.md).
. "$(dirname "$0")/lib.sh"

out=$TEST_OUT/bench
rm -rf "$out"
BENCH_QUICK=1 BENCH_OUT=$out "$TESTS_TOP/tests/bench/bench.sh" ||
    fail "make bench (quick) failed"
for f in results.txt results.json results.md latency.png bandwidth.png; do
    [ -s "$out/$f" ] || fail "make bench made no $f"
done
# pvrdma measured every series once in one VM; between two VMs (2vm),
# Soft-RoCE (in one VM only) and over TCP links (2tcp) the quick run's few.
all="send_lat write_lat read_lat write_bw send_bw read_bw write_rate \
     send_rate read_rate pingpong pingpong_event send_bw_event \
     write_bw_event write_bw_evpoll"
few="send_lat write_lat write_bw write_rate pingpong_event"
for st in "vm pvrdma $all" "2vm pvrdma $few" "vm rxe $few" "2tcp pvrdma $few" \
          "2tls pvrdma send_lat write_bw"; do
    set -- $st
    s=$1 t=$2
    shift 2
    for x in "$@"; do
        grep -q "^R $s $t $x " "$out/results.txt" ||
            fail "no $t $x figure in the $s setup"
    done
done
for s in vm 2vm; do
    for x in tcp_lat tcp_bw; do
        grep -q "^R $s tcp $x " "$out/results.txt" ||
            fail "no TCP $x figure in the $s setup"
    done
done
# A VM moved while RDMA runs with its peer: QEMU's figures, the quiesce
# and the peer's gaps for 64 QPs, and an idle move.
grep -qE '^64 +[0-9]+ +[0-9.]+ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$' \
    "$out/migration.txt" || fail "no migration figures for 64 QPs"
grep -qE '^idle +[0-9]+ ' "$out/migration.txt" ||
    fail "no figures for the idle migration"
grep -q "^R host memcpy memcpy " "$out/results.txt" || fail "no memcpy figure"
grep -q "completion events against polling" "$out/results.md" ||
    fail "results.md has no table of event-mode streams"
grep -q "The TCP link in TLS against the plain TCP link" "$out/results.md" ||
    fail "results.md has no table of the TLS link's cost"
pass "make bench (quick): pvrdma, Soft-RoCE and TCP in one VM, pvrdma and TCP across two, pvrdma across a TCP link, plain and in TLS, report and plots"
