#!/usr/bin/env bash
# make bench: this device next to Soft-RoCE and TCP, in guests booted for
# it, with the host's single-core memcpy as the limit (docs/benchmarks.md).
#
#   one VM (2 vCPUs): two processes on pvrdma0; two on Soft-RoCE (rxe0 on
#     the guest's eth0, looped back); TCP over the guest's loopback (qperf)
#   two VMs (1 vCPU each: one process runs in each; on a 2-core machine
#     more would spin against each other and the QEMU threads that carry
#     the traffic) on one host, joined by one software fabric
#     (fabric-path=) and by a virtio-net link: pvrdma0 to pvrdma0;
#     Soft-RoCE over the link; TCP over the link
#   two VMs as on two hosts (1 vCPU each): each QEMU in its own network
#     namespace, the two joined by a veth pair, their fabrics linked by
#     TCP over it (fabric-listen= / fabric-peer=; needs root): pvrdma0 to
#     pvrdma0 only (the guests' own link is the harness's, not the veth);
#     then the same pair with the link in TLS (fabric-tls-creds: x509
#     certificates, with fabric-tls-authz): ib_send_lat 2 B and
#     ib_write_bw 1 MiB, the cost of TLS ("2tls")
#   series: ib_{send,write,read}_lat 2 B - 64 KiB (typical usec),
#     ib_{write,send,read}_bw 64 B - 4 MiB (MB/s and million messages/s),
#     ibv_rc_pingpong 64 B polling and with completion events, 64 KiB
#     streams waiting for completion events (ib_send_bw -e, and WRITE with
#     tests/guest/progs/ev_bw.c, events and polling), qperf
#     tcp_lat / tcp_bw at the same sizes; between two VMs also
#     ib_write_bw 64 B on 4096 QPs at once against one QP (the device's
#     host memory per QP from tests/bench/qp_mem.c beside it);
#     BENCH_REPS rounds (3): median, min and max
#
# Output in $PVRDMA_OUT/bench (or BENCH_OUT): results.txt (every
# measurement), results.json, results.md (tables with ratios), latency.png
# and bandwidth.png (gnuplot).  BENCH_QUICK=1: one size per series, one
# round, Soft-RoCE in one VM only and in a few series (as pvrdma over
# TCP links), a few minutes.  BENCH_SETUPS="vm 2vm 2tcp mig" chooses the
# setups; mig: the blackout a migration causes the peers
# (tests/bench/migrate-bench.sh, results in migration.txt).
. "$(dirname "$0")/../guest/lib.sh"
. "$TESTS_TOP/tests/guest/vmpair.sh"

out=${BENCH_OUT:-$PVRDMA_OUT/bench}
setups=${BENCH_SETUPS:-vm 2vm 2tcp mig}
mkdir -p "$out"
command -v gnuplot > /dev/null ||
    fail "gnuplot is missing: run scripts/install-deps.sh (apt-get install gnuplot-nox)"
command -v python3 > /dev/null ||
    fail "python3 is missing: run scripts/install-deps.sh"
env="BENCH_REPS=${BENCH_REPS:-3} BENCH_QUICK=${BENCH_QUICK:-0}"
# BENCH_SERIES="send_lat write_bw ...": only these series (an A/B run)
[ -z "${BENCH_SERIES:-}" ] || env="$env BENCH_SERIES=\"$BENCH_SERIES\""
start=$SECONDS

evbw=$(build_prog ev_bw)
gcc -O2 -Wall -Wextra -Werror -o "$TEST_OUT/memcpy_bw" \
    "$TESTS_TOP/tests/bench/memcpy_bw.c" || fail "cannot build memcpy_bw"
# Host memcpy at the guests' bandwidth sizes (tests/bench/guest-bench.sh).
sizes="64 4096 65536 1048576 4194304"
[ "${BENCH_QUICK:-0}" != 1 ] || sizes=65536
"$TEST_OUT/memcpy_bw" $sizes > "$TEST_OUT/host.txt"
# The two-copy limit of the fabric between two VMs: two threads moving
# 1 MiB and 4 MiB messages through a 4 MiB ring in 1 MiB steps, as the
# shm link does (tests/bench/pipe_bw.c).
gcc -O2 -Wall -Wextra -Werror -pthread -o "$TEST_OUT/pipe_bw" \
    "$TESTS_TOP/tests/bench/pipe_bw.c" || fail "cannot build pipe_bw"
if [ "${BENCH_QUICK:-0}" != 1 ]; then
    for n in 1048576 4194304; do
        "$TEST_OUT/pipe_bw" $n 4194304 1048576 >> "$TEST_OUT/host.txt"
    done
fi
# Devices on one fabric directory as their number grows: N processes
# running the device core against fake guest memory
# (tests/bench/fabric_scale.c): time until all are linked to all,
# descriptors and ring memory per process.
make -s -C "$TESTS_TOP/tests/bench" build/fabric_scale ||
    fail "cannot build tests/bench/fabric_scale"
scale_n="2 4 8 16 32 64"
[ "${BENCH_QUICK:-0}" != 1 ] || scale_n="2 8"
"$TESTS_TOP/tests/bench/build/fabric_scale" $scale_n | grep '^R ' \
    >> "$TEST_OUT/host.txt" || fail "tests/bench/fabric_scale failed"
# Host memory the device holds per connected QP (tests/bench/qp_mem.c).
make -s -C "$TESTS_TOP/tests/bench" build/qp_mem ||
    fail "cannot build tests/bench/qp_mem"
"$TESTS_TOP/tests/bench/build/qp_mem" -n 4096 | grep '^R ' \
    >> "$TEST_OUT/host.txt" || fail "tests/bench/qp_mem failed"
# and on request, right after each of the device's bandwidth runs in one
# VM and between two VMs, while the guests wait (guest-bench.sh,
# _bench_memcpy; the guest reaches the host's loopback through the
# user-mode network's gateway): the host's memory bandwidth is shared
# with other machines' and moves by half within minutes, so each round is
# compared with the memcpy of its own moment.
rm -f "$TEST_OUT/memcpy.port"
"$TEST_OUT/memcpy_bw" --serve "$TEST_OUT/memcpy.port" &
memcpy_pid=$!
fdir=
nsa=pvrdma-ba-$$ nsb=pvrdma-bb-$$
cleanup() {
    kill "$memcpy_pid" 2> /dev/null || true
    [ -z "$fdir" ] || rm -rf "$fdir"
    ip netns del "$nsa" 2> /dev/null || true
    ip netns del "$nsb" 2> /dev/null || true
}
trap cleanup EXIT
for _ in $(seq 50); do
    [ -s "$TEST_OUT/memcpy.port" ] && break
    sleep 0.1
done
[ -s "$TEST_OUT/memcpy.port" ] || fail "the host's memcpy server did not start"

# What the guests run: the series in order, quick or full. The quick run
# measures Soft-RoCE in one VM and pvrdma over TCP links in these only.
quick_series="send_lat write_lat write_bw pingpong_event"
# What the guests run: the series in order, quick or full.
cat > "$TEST_OUT/bench-vm.sh" <<GUEST
$env BENCH_MEMCPY_PORT=$(cat "$TEST_OUT/memcpy.port")
. ./pair.sh
. ./rxe.sh
. ./guest-bench.sh
bench_rdma vm pvrdma pvrdma0 1
rxe_up
# (quick: Soft-RoCE in a few series, enough to show its scripts work)
[ "\$BENCH_QUICK" != 1 ] || BENCH_SERIES="$quick_series"
bench_rdma vm rxe rxe0 \$(rxe_gid_index)
BENCH_SERIES=
bench_tcp vm
echo BENCH-OK
GUEST
# Guest B of two VMs also reaches the host's memcpy server, through a
# second NIC on QEMU's user-mode network (bench_host_nic).
hostnic_mac=52:54:00:0a:09:fe
cat > "$TEST_OUT/bench-2vm.sh" <<GUEST
$env BENCH_MEMCPY_PORT=$(cat "$TEST_OUT/memcpy.port")
. ./sync.sh
. ./rxe.sh
. ./guest-bench.sh
[ "\$VMPAIR_ROLE" != b ] || bench_host_nic $hostnic_mac
# (quick: the few series too; every series runs in one VM above, on the
# same scripts, and the full run measures them all here)
[ "\$BENCH_QUICK" != 1 ] || BENCH_SERIES="$quick_series"
bench_rdma 2vm pvrdma pvrdma0 1
BENCH_SERIES=
bench_many_qps 2vm 4096
# (the quick run measures Soft-RoCE in one VM only: the same scripts)
if [ "\$BENCH_QUICK" != 1 ]; then
    rxe_up
    bench_rdma 2vm rxe rxe0 \$(rxe_gid_index)
fi
bench_tcp 2vm
# Neither guest goes while the other still needs it.
if [ "\$VMPAIR_ROLE" = a ]; then sync_signal end 600; else sync_wait "\$PEER_IP" end 600; fi
echo BENCH-OK
GUEST
cat > "$TEST_OUT/bench-2tcp.sh" <<GUEST
$env
. ./sync.sh
. ./guest-bench.sh
# (quick: a few series, enough to show the setup works; every series
# runs between two VMs above, on the same scripts)
[ "\$BENCH_QUICK" != 1 ] || BENCH_SERIES="$quick_series"
bench_rdma 2tcp pvrdma pvrdma0 1
if [ "\$VMPAIR_ROLE" = a ]; then sync_signal end 600; else sync_wait "\$PEER_IP" end 600; fi
echo BENCH-OK
GUEST
cat > "$TEST_OUT/bench-2tls.sh" <<GUEST
$env BENCH_SERIES="send_lat write_bw"
# (quick: the plain link's quick sizes, to compare with)
[ "\$BENCH_QUICK" = 1 ] || { BENCH_LAT_SIZES=2; BENCH_BW_SIZES=1048576; }
. ./sync.sh
. ./guest-bench.sh
bench_rdma 2tls pvrdma pvrdma0 1
if [ "\$VMPAIR_ROLE" = a ]; then sync_signal end 600; else sync_wait "\$PEER_IP" end 600; fi
echo BENCH-OK
GUEST

# Plain TCP between two host processes over the 2tcp setup's veth pair,
# the path the two QEMUs' link takes: a stream of 1 MiB writes and a
# 2-byte round trip, both sides asleep in read() and both spinning
# (tests/bench/tcp_host.c), BENCH_REPS rounds, as the yardstick of the
# fabric's TCP link in the report.
host_tcp() {
    local r reps=${BENCH_REPS:-3} bytes=$((8 << 30)) spid v
    [ "${BENCH_QUICK:-0}" != 1 ] || { reps=1; bytes=$((1 << 30)); }
    gcc -O2 -Wall -Wextra -Werror -o "$TEST_OUT/tcp_host" \
        "$TESTS_TOP/tests/bench/tcp_host.c" || fail "cannot build tcp_host"
    ip netns exec "$nsa" "$TEST_OUT/tcp_host" serve 192.168.78.1 7482 &
    spid=$!
    for ((r = 1; r <= reps; r++)); do
        v=$(ip netns exec "$nsb" "$TEST_OUT/tcp_host" stream 192.168.78.1 \
            7482 1048576 "$bytes") || fail "the host's TCP stream failed"
        echo "R 2tcp host tcp_stream 1048576 $r $v MB/s" >> "$TEST_OUT/guests.txt"
        v=$(ip netns exec "$nsb" "$TEST_OUT/tcp_host" rtt 192.168.78.1 \
            7482 20000) || fail "the host's TCP round trip failed"
        echo "R 2tcp host tcp_rtt 2 $r $v usec" >> "$TEST_OUT/guests.txt"
        v=$(ip netns exec "$nsb" "$TEST_OUT/tcp_host" rtt 192.168.78.1 \
            7482 20000 spin) || fail "the host's TCP round trip failed"
        echo "R 2tcp host tcp_rtt_spin 2 $r $v usec" >> "$TEST_OUT/guests.txt"
    done
    kill "$spid"
    wait "$spid" 2> /dev/null || true
}

: > "$TEST_OUT/guests.txt"
: > "$TEST_OUT/missing.txt"
# collect SETUP LOG: the measurements in a guest's console log, and the
# rounds it left out (tests/bench/guest-bench.sh, _bench_cmd).
collect() {
    grep -a '^R ' "$2" | tr -d '\r' >> "$TEST_OUT/guests.txt"
    { grep -a '^bench: no result' "$2" || true; } | tr -d '\r' |
        sed "s/^/$1: /" >> "$TEST_OUT/missing.txt"
}
for s in $setups; do
    case $s in
    vm)
        "$PVRDMA_TOP/scripts/vm.sh" --name bench-vm --smp 2 --timeout 5400 \
            --add "$TESTS_TOP/tests/guest/pair.sh" \
            --add "$TESTS_TOP/tests/guest/rxe.sh" \
            --add "$TESTS_TOP/tests/bench/guest-bench.sh" \
            --add "$TEST_OUT/bench-vm.sh" --add "$evbw" \
            -- sh ./bench-vm.sh > /dev/null ||
            fail "the one-VM run failed: see $PVRDMA_OUT/vm/bench-vm.log"
        collect vm "$PVRDMA_OUT/vm/bench-vm.log" ;;
    2vm)
        fdir=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-fab.XXXXXX")
        vmpair_run bench-2vm 5400 "$TEST_OUT/bench-2vm.sh" \
            "$TEST_OUT/bench-2vm.sh" \
            --arg --add --arg "$TESTS_TOP/tests/guest/rxe.sh" \
            --arg --add --arg "$TESTS_TOP/tests/bench/guest-bench.sh" \
            --arg --add --arg "$evbw" --arg --smp --arg 1 \
            --arg -d --arg ",fabric-path=$fdir,max-qp=8192,max-cqe=131072" \
            --b-arg -q --b-arg -netdev --b-arg -q --b-arg user,id=hostnet \
            --b-arg -q --b-arg -device --b-arg -q \
            --b-arg "virtio-net-pci,netdev=hostnet,mac=$hostnic_mac,romfile=" \
            > /dev/null
        rm -rf "$fdir"
        fdir=
        collect 2vm "$PVRDMA_OUT/vm/bench-2vm-b.log" ;;
    2tcp)
        # As tests/guest/test-xhost.sh: a veth pair between two namespaces.
        ip netns add "$nsa" && ip netns add "$nsb" ||
            fail "cannot create network namespaces for the 2tcp setup (needs root; BENCH_SETUPS=\"vm 2vm\" leaves it out)"
        ip link add pvrdma-bv$$ type veth peer name pvrdma-bw$$ &&
            ip link set pvrdma-bv$$ netns "$nsa" &&
            ip link set pvrdma-bw$$ netns "$nsb" &&
            ip -n "$nsa" addr add 192.168.78.1/24 dev pvrdma-bv$$ &&
            ip -n "$nsb" addr add 192.168.78.2/24 dev pvrdma-bw$$ &&
            ip -n "$nsa" link set pvrdma-bv$$ up &&
            ip -n "$nsb" link set pvrdma-bw$$ up &&
            ip -n "$nsa" link set lo up && ip -n "$nsb" link set lo up ||
            fail "cannot make the veth pair between $nsa and $nsb"
        host_tcp
        vmpair_run bench-2tcp 5400 "$TEST_OUT/bench-2tcp.sh" \
            "$TEST_OUT/bench-2tcp.sh" \
            --arg --add --arg "$TESTS_TOP/tests/bench/guest-bench.sh" \
            --arg --add --arg "$evbw" --arg --smp --arg 1 \
            --a-wrap "ip netns exec $nsa" --b-wrap "ip netns exec $nsb" \
            --a-arg -d --a-arg ",fabric-listen=192.168.78.1:7481" \
            --b-arg -d --b-arg ",fabric-peer=192.168.78.1:7481" > /dev/null
        collect 2tcp "$PVRDMA_OUT/vm/bench-2tcp-b.log"
        # The same link in TLS (docs/fabric.md, "TLS on TCP links"), with
        # certificates and authz as test-xhost.sh has them.
        certs=$TEST_OUT/certs
        rm -rf "$certs"
        "$TESTS_TOP/tests/guest/tls-certs.sh" ca "$certs/ca"
        "$TESTS_TOP/tests/guest/tls-certs.sh" member "$certs/ca" "$certs/a" bench-a 192.168.78.1
        "$TESTS_TOP/tests/guest/tls-certs.sh" member "$certs/ca" "$certs/b" bench-b 192.168.78.2
        vmpair_run bench-2tls 5400 "$TEST_OUT/bench-2tls.sh" \
            "$TEST_OUT/bench-2tls.sh" \
            --arg --add --arg "$TESTS_TOP/tests/bench/guest-bench.sh" \
            --arg --add --arg "$evbw" --arg --smp --arg 1 \
            --a-wrap "ip netns exec $nsa" --b-wrap "ip netns exec $nsb" \
            --a-arg -q --a-arg -object --a-arg -q \
            --a-arg "tls-creds-x509,id=tls0,endpoint=server,dir=$certs/a" \
            --a-arg -q --a-arg -object --a-arg -q \
            --a-arg "authz-simple,id=authz0,identity=O=pvrdma,,CN=bench-b" \
            --b-arg -q --b-arg -object --b-arg -q \
            --b-arg "tls-creds-x509,id=tls0,endpoint=client,dir=$certs/b" \
            --b-arg -q --b-arg -object --b-arg -q \
            --b-arg "authz-simple,id=authz0,identity=O=pvrdma,,CN=bench-a" \
            --a-arg -d --a-arg ",fabric-listen=192.168.78.1:7481,fabric-tls-creds=tls0,fabric-tls-authz=authz0" \
            --b-arg -d --b-arg ",fabric-peer=192.168.78.1:7481,fabric-tls-creds=tls0,fabric-tls-authz=authz0" \
            > /dev/null
        collect 2tls "$PVRDMA_OUT/vm/bench-2tls-b.log"
        ip netns del "$nsa"
        ip netns del "$nsb" ;;
    mig)
        # A VM moved while RDMA runs with its peer (tests/bench/
        # migrate-bench.sh): after the report's tables.
        BENCH_OUT=$out bash "$TESTS_TOP/tests/bench/migrate-bench.sh" ||
            fail "the migration benchmark failed" ;;
    *) fail "BENCH_SETUPS: unknown setup $s (vm, 2vm, 2tcp, mig)" ;;
    esac
    log "bench: setup $s done ($((SECONDS - start)) s)"
done

cat "$TEST_OUT/host.txt" "$TEST_OUT/guests.txt" > "$out/results.txt"
python3 "$TESTS_TOP/tests/bench/report.py" "$out" \
    "$(uname -m), $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), QEMU TCG, $(date -u +%Y-%m-%d)" ||
    fail "report.py failed"
(cd "$out" && gnuplot plots.gp) || fail "gnuplot failed"
if [ -s "$TEST_OUT/missing.txt" ]; then
    { echo; echo "Rounds left out (the pair hung or failed; the median is of the others):"
      echo; sed 's/^/- /' "$TEST_OUT/missing.txt"; } >> "$out/results.md"
fi
if [ -s "$out/migration.txt" ]; then
    { echo; echo "## A VM moved while RDMA runs with its peer"; echo
      echo '```'; cat "$out/migration.txt"; echo '```'; } >> "$out/results.md"
fi
cat "$out/results.md"
pass "results in $out (results.json, results.md, latency.png, bandwidth.png), $((SECONDS - start)) s"
