# shellcheck shell=bash
# Host-side helper for the tests between two VMs (sourced after lib.sh and
# vmpair.sh): writes the guest scripts of the common suite, in which
# guest A serves and guest B connects, and checks the result.
#
#   xvm_scripts DIR     writes DIR/guest-a.sh and DIR/guest-b.sh (the same
#                       script: each guest plays its VMPAIR_ROLE), builds
#                       the MPI ping-pong; vmpair_run needs "${XVM_ARGS[@]}"
#                       (files the guests need beyond vmpair's own)
#   xvm_check NAME      checks that the RAM disk of A holds what B wrote over
#                       NVMe-oF and A's NFS export what B wrote over NFS,
#                       prints the measured lines of NAME's logs
#   xvm_stats_start DIR gives each guest's QEMU a QMP socket in DIR (the
#                       vmpair_run arguments in "${XVM_STATS_ARGS[@]}") and
#                       samples its device's stats property and `info
#                       pvrdma` every second while it runs (tests/guest/
#                       stats.py)
#   xvm_stats_check DIR KIND
#                       stops sampling; checks the samples (the link of
#                       KIND, shm or tcp, up, its counters moving forward
#                       with the traffic, objects within their limits)
#
# The suite: ibv_rc_pingpong polling, with events (-e), with 64 KiB
# messages and without CQ_POLL doorbells, ibv_srq_pingpong,
# ibv_xsrq_pingpong (XRC), ibv_ud_pingpong (polling; events at eth0's MTU, 1024) (each checks its data,
# -c), then perftest's
# ib_send_lat, ib_write_bw (64 KiB and 1 MiB), ib_read_lat, ib_atomic_bw,
# ib_send_lat -c UD, ib_send_bw -c UD; rc_verify across the VMs where the
# test adds the program (--arg --add --arg PATH); RDMA CM (rping -V, ucmatose, udaddy, multicast with
# mckey (a receiver in each VM, the sender in B), rdma_server /
# rdma_client, ib_send_lat -R, ib_write_bw -R); UCX (ucx_perftest tag_lat, tag_bw 64 KiB,
# ucp_am_lat, ucp_put_bw, ucp_get over rc_verbs/ud_verbs); NVMe over RDMA (A the target, B the host; xvm_check compares the
# MD5 of what B wrote with what A's RAM disk holds); NFS over RDMA (A the
# server, B the client; MD5s compared the same way); Open MPI over UCX
# (tests/guest/progs/mpi_pingpong.c, data verified in the program)
# (result rows required; times may read inf/nan under TCG, as in
# test-perftest.sh: perftest's clock, not RDMA).
#
# PVRDMA_XVM_QUICK=1 (a variant's run, test-qemu-newest): the suite without
# the application stacks above the verbs, which do not depend on QEMU's
# version (UCX, Open MPI, perftest's -R over RDMA CM); the port counters
# are still read and checked.

xvm_scripts() {
    local dir=$1 mpi_prog
    mpi_prog=$(build_mpi_prog mpi_pingpong)
    XVM_ARGS=(--arg --add --arg "$TESTS_TOP/tests/guest/mpi.sh"
              --arg --add --arg "$mpi_prog")
    # One script for both guests: A serves each case, B connects
    # (VMPAIR_ROLE and PEER_IP come from vmpair.sh).
    {
    echo "XVM_QUICK=${PVRDMA_XVM_QUICK:-0}"
    cat <<'GUEST'
. ./sync.sh
gid=1
opts="-d pvrdma0 -x 1 -F"
num='[0-9.]+|inf|-?nan'
# xcase NAME TIMEOUT CMD: CMD on both sides, the client's aimed at A
xcase() {
    if [ "$VMPAIR_ROLE" = a ]; then
        xpair_server "$1" "$2" "$3"
    else
        xpair_client "$1" "$2" "$3 $PEER_IP"
    fi
}
for t in "rc -n 200" "rc -n 200 -e" "rc -n 50 -s 65536" "srq -n 100" \
         "ud -n 200" "ud -n 100 -s 1024 -e"; do
    set -- $t
    name=$1_pingpong$(echo "$*" | tr -cd 'es0-9' | cut -c1-12)
    shift
    xcase "$name" 180 "ibv_${name%%_*}_pingpong -d pvrdma0 -g $gid -c $*"
done
# XRC: A's XRC_RECV QP feeds its XRC SRQ from B's XRC_SEND QP and back
# (the remote SRQ number in every request over the link).
xcase xsrq_pingpong 180 "ibv_xsrq_pingpong -d pvrdma0 -g $gid -n 100 -s 65536"
# The cases above ring CQ_POLL on empty polls (the device's hint): the
# device reads the link in the polling vCPU's thread (docs/fabric.md,
# "Latency"). Here neither side rings it: the event loop reads the link.
xcase rc_pingpong_nopoll 180 \
    "env PVRDMA_CQ_POLL_EVERY=0 ibv_rc_pingpong -d pvrdma0 -g $gid -c -n 100"
for t in "send_lat -n 200" "write_bw -n 200" "write_bw -n 50 -s 1048576" \
         "read_lat -n 200" "atomic_bw -n 200" "send_lat -n 200 -c UD" \
         "send_bw -n 200 -c UD"; do
    set -- $t
    xcase "ib_$1$3$5" 300 "ib_$* $opts"
    [ "$VMPAIR_ROLE" = a ] ||
        grep -qE "^ *[0-9]+ +$3 +($num)" "/tmp/ib_$1$3$5.cli" ||
        fail "ib_$1 printed no result row for $3 iterations"
done
# RDMA CM (QP1 MADs between the VMs, address resolution over eth0): the
# server listens on any address, the client names A's (appended).
xcm() {
    if [ "$VMPAIR_ROLE" = a ]; then
        xpair_server "$1" "$2" "$3"
    else
        xpair_client "$1" "$2" "$4 $PEER_IP"
    fi
}
xcm rping 120 "rping -s -a 0.0.0.0 -C 20 -V" "rping -c -C 20 -V -v -a"
[ "$VMPAIR_ROLE" = a ] || grep -q "rdma-ping-19: " /tmp/rping.cli ||
    fail "rping: 20 pings not seen"
# Our verification program, where the test put it in the guests
# (test-xhost): every RC opcode, byte, completion field and error status,
# A's agent holding the responder QPs, SRQ and buffers (-P: CQ_POLL on
# empty polls, as the device has a fabric peer).
if [ -x ./rc_verify ]; then
    xcm rc_verify 400 "./rc_verify -s" "./rc_verify -d pvrdma0 -g 1 -G 1 -P -c"
    [ "$VMPAIR_ROLE" = a ] ||
        grep -qE "^RESULT passed=[1-9][0-9]{2,} failed=0" /tmp/rc_verify.cli ||
        fail "rc_verify across the VMs: no RESULT with 100 or more checks, none failed"
fi
xcm ucmatose 120 "ucmatose" "ucmatose -s"
xcm udaddy 120 "udaddy" "udaddy -s"
# Multicast (RDMA CM's mckey): a receiver in each VM joins 239.7.8.9 (the
# IGMP join shows in /proc/net/igmp), B sends it 20 datagrams of 1000
# bytes, and both receivers get all 20: B's from a process of its own VM,
# A's over the fabric link. The device reports its multicast limits.
[ "$VMPAIR_ROLE" = a ] ||
    ibv_devinfo -v -d pvrdma0 | grep -qE "max_mcast_grp:[[:space:]]+64$" ||
    fail "ibv_devinfo: max_mcast_grp is not the device's 64"
# (mckey's output is block-buffered into the file: the kernel's IGMP
# join says that the receiver joined; its QP is attached as the join's
# event comes, well within the 2 s here and the sender's own 3 s pause.)
gone() { ! kill -0 "$1" 2>/dev/null; }
mckey -m 239.7.8.9 -b "$SELF_IP" -C 20 -S 1000 > /tmp/mckey.rcv 2>&1 &
mpid=$!
wait_for 60 grep -q "090807EF" /proc/net/igmp ||
    fail "mckey: 239.7.8.9 not joined on eth0 (/proc/net/igmp)"
sleep 2
if [ "$VMPAIR_ROLE" = a ]; then
    sync_signal mckey-joined 120
else
    sync_wait "$PEER_IP" mckey-joined 120
    timeout 120 mckey -m 239.7.8.9 -b "$SELF_IP" -s -C 20 -S 1000 \
        > /tmp/mckey.snd 2>&1 ||
        { cat /tmp/mckey.snd; fail "mckey: the sender failed"; }
fi
wait_for 120 gone $mpid || kill $mpid
rc=0
wait $mpid || rc=$?
sed 's/^/[mckey receiver] /' /tmp/mckey.rcv
[ $rc -eq 0 ] && grep -q "data transfers complete" /tmp/mckey.rcv ||
    fail "mckey: the receiver did not get all 20 datagrams (exit $rc)"
if [ "$VMPAIR_ROLE" = a ]; then
    sync_signal mckey-done 120
else
    sync_wait "$PEER_IP" mckey-done 120
fi
xcm rdma_server 120 "rdma_server" "rdma_client -s"
if [ "$XVM_QUICK" != 1 ]; then
AGAIN_RE=$CM_RACE_RE     # (pair.sh: perftest's own race)
xcm send_lat_R 300 "ib_send_lat $opts -R -n 200" "ib_send_lat $opts -R -n 200"
xcm write_bw_R 300 "ib_write_bw $opts -R -n 200" "ib_write_bw $opts -R -n 200"
AGAIN_RE=
[ "$VMPAIR_ROLE" = a ] ||
    grep -qE "^ *[0-9]+ +200 +($num) +($num)" /tmp/write_bw_R.cli ||
    fail "ib_write_bw -R printed no result row"
# UCX over rc_verbs and ud_verbs only (ucx_perftest: A serves).
ucx="env UCX_NET_DEVICES=pvrdma0:1 UCX_TLS=rc_verbs,ud_verbs ucx_perftest"
for t in "tag_lat -n 1000" "tag_bw -s 65536 -n 200" "ucp_am_lat -n 1000" \
         "ucp_put_bw -n 1000" "ucp_get -n 1000"; do
    set -- $t
    xcm "ucx_$1" 180 "$ucx -t $t" "$ucx -t $t"
    [ "$VMPAIR_ROLE" = a ] ||
        grep -qE "^Final: +${t##* } " "/tmp/ucx_$1.cli" ||
        fail "ucx_perftest -t $1: no final line"
done
fi
# NVMe over RDMA: A exports a RAM disk, B writes 4 MiB through nvme-rdma
# and reads it back; both print the data's MD5 (the host compares them).
. ./nvmeof.sh
dmesg_mark
if [ "$VMPAIR_ROLE" = a ]; then
    nvmeof_target "$SELF_IP"
    sync_signal nvme-up 120
    sync_wait "$PEER_IP" nvme-done 300
    echo "nvmet: RAM disk holds $(dd if=/dev/ram0 bs=65536 count=64 2>/dev/null | md5sum | cut -c1-32)"
    nvmeof_target_down
else
    sync_wait "$PEER_IP" nvme-up 120
    nvmeof_host "$PEER_IP"
    sync_signal nvme-done 120
fi
dmesg_clean
# NFS over RDMA: A serves, B writes 16 MiB and reads it back after a
# remount; both print the data's MD5 (the host compares them).
. ./nfs.sh
dmesg_mark
if [ "$VMPAIR_ROLE" = a ]; then
    nfs_server "$SELF_IP"
    sync_signal nfs-up 120
    sync_wait "$PEER_IP" nfs-done 300
    echo "nfsd: exported file holds $(nfs_server_md5)"
    nfs_server_down
else
    sync_wait "$PEER_IP" nfs-up 120
    nfs_client "$PEER_IP"
    sync_signal nfs-done 120
fi
dmesg_clean
# The port counters after all that (read while the other guest waits in
# the MPI step below, so the link is up): the link, packets and bytes
# both ways, and what each side surely sent (B, the client of perftest)
# and executed (A) moved.
xcounters() {
    local c v
    rdma statistic show link pvrdma0/1 | tee /tmp/counters
    for c in links_up sent_pkts rcvd_pkts sent_bytes rcvd_bytes rdma_sends \
             rdma_recvs "$@"; do
        v=$(cat /sys/class/infiniband/pvrdma0/ports/1/hw_counters/$c)
        [ "$v" -gt 0 ] || fail "port counter $c is $v after the traffic"
    done
    echo "port counters moved: links_up sent/rcvd pkts and bytes sends recvs $*"
}
if [ "$VMPAIR_ROLE" = a ]; then
    xcounters rdma_writes_rcvd rdma_reads_rcvd atomics_rcvd
else
    xcounters rdma_writes rdma_reads atomics
fi
if [ "$XVM_QUICK" = 1 ]; then
    # (each read its counters while the other still runs)
    if [ "$VMPAIR_ROLE" = a ]; then
        sync_wait "$PEER_IP" counted 120
    else
        sync_signal counted 120
    fi
    echo GUEST-OK
    exit 0
fi
# Open MPI (UCX PML over rc_verbs/ud_verbs only): A launches one rank per
# guest (B's daemon through mpi.sh's remote shell); the ping-pong checks
# every byte both ways, 1 B to 4 MiB, and an allreduce.
. ./mpi.sh
mpi_hosts
if [ "$VMPAIR_ROLE" = a ]; then
    sync_wait "$PEER_IP" mpi-rshd 120
    mpi_run 2 vm-a:1,vm-b:1 ./mpi_pingpong 20 > /tmp/mpi.out 2>&1 ||
        { cat /tmp/mpi.out; fail "mpirun failed"; }
    cat /tmp/mpi.out
    grep -q "^mpi_pingpong: OK" /tmp/mpi.out || fail "mpi_pingpong: no OK line"
    sync_signal mpi-done 120
else
    mpi_rshd
    sync_signal mpi-rshd 120
    sync_wait "$PEER_IP" mpi-done 400
fi
echo GUEST-OK
GUEST
    } > "$dir/guest-a.sh"
    cp "$dir/guest-a.sh" "$dir/guest-b.sh"
}

xvm_check() {
    local name=$1 wrote held
    vmpair_nvme_check "$name"
    wrote=$(sed -n 's/.*nfs-rdma: 16 MiB written and read back equal in [0-9]* READs (\([0-9a-f]*\)).*/\1/p' \
        "$PVRDMA_OUT/vm/$name-b.log")
    held=$(sed -n 's/.*nfsd: exported file holds \([0-9a-f]*\).*/\1/p' \
        "$PVRDMA_OUT/vm/$name-a.log")
    [ -n "$wrote" ] && [ "$wrote" = "$held" ] ||
        fail "NFS over RDMA: B wrote MD5 '$wrote', A's export holds '$held'"
    echo "  NFS over RDMA: 16 MiB from B in A's export, MD5 $held"
    [ "${PVRDMA_XVM_QUICK:-0}" = 1 ] ||
        grep -q "mpi_pingpong: OK" "$PVRDMA_OUT/vm/$name-a.log" ||
        fail "Open MPI: no verified ping-pong in A's log"
    grep -q "^port counters moved: .*rdma_writes_rcvd" \
        "$PVRDMA_OUT/vm/$name-a.log" ||
        fail "A's port counters were not checked, see $name-a.log"
    grep -q "^port counters moved: .*rdma_writes rdma_reads atomics" \
        "$PVRDMA_OUT/vm/$name-b.log" ||
        fail "B's port counters were not checked, see $name-b.log"
    [ "${PVRDMA_XVM_QUICK:-0}" = 1 ] ||
        grep -h "^mpi_pingpong: " "$PVRDMA_OUT/vm/$name-a.log" | sed 's/^/  /'
    grep -hE "iters in|^\[ib_.* client\] +[0-9]+ +[0-9]+ " \
        "$PVRDMA_OUT/vm/$name-b.log" | sed 's/^\[[^]]*\] */  /'
}

xvm_stats_start() {
    local dir=$1 r
    XVM_STATS_ARGS=() XVM_STATS_PIDS=()
    for r in a b; do
        XVM_STATS_ARGS+=(--$r-arg -q --$r-arg -qmp --$r-arg -q
                         --$r-arg "unix:$dir/qmp-$r.sock,server=on,wait=off")
        python3 "$TESTS_TOP/tests/guest/stats.py" sample \
            "$dir/qmp-$r.sock" "$dir/stats-$r.jsonl" $$ &
        XVM_STATS_PIDS+=($!)
    done
}

xvm_stats_check() {
    local dir=$1 kind=$2
    # (each ends when its QEMU closes the socket; the guests are gone)
    wait "${XVM_STATS_PIDS[@]}" || true
    python3 "$TESTS_TOP/tests/guest/stats.py" check "$kind" \
        "$dir/stats-a.jsonl" "$dir/stats-b.jsonl" ||
        fail "the devices' stats (qom-get stats, info pvrdma) are wrong"
}
