# shellcheck shell=bash
# Host-side helper for the tests between two VMs (sourced after lib.sh and
# vmpair.sh): writes the guest scripts of the common suite, in which
# guest A serves and guest B connects, and checks the result.
#
#   xvm_scripts DIR     writes DIR/guest-a.sh and DIR/guest-b.sh (the same
#                       script: each guest plays its VMPAIR_ROLE)
#   xvm_check NAME      prints the measured lines of NAME's logs
#
# The suite: ibv_rc_pingpong polling, with events (-e), with 64 KiB
# messages and without CQ_POLL doorbells, ibv_srq_pingpong,
# ibv_ud_pingpong (polling; events at the MTU) (each checks its data,
# -c), then perftest's
# ib_send_lat, ib_write_bw (64 KiB and 1 MiB), ib_read_lat, ib_atomic_bw
# (result rows required; times may read inf/nan under TCG, as in
# test-perftest.sh: perftest's clock, not RDMA).

xvm_scripts() {
    local dir=$1
    # One script for both guests: A serves each case, B connects
    # (VMPAIR_ROLE and PEER_IP come from vmpair.sh).
    cat > "$dir/guest-a.sh" <<'GUEST'
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
         "ud -n 200" "ud -n 100 -s 4096 -e"; do
    set -- $t
    name=$1_pingpong$(echo "$*" | tr -cd 'es0-9' | cut -c1-12)
    shift
    xcase "$name" 180 "ibv_${name%%_*}_pingpong -d pvrdma0 -g $gid -c $*"
done
# The cases above ring CQ_POLL on empty polls (the device's hint): the
# device reads the link in the polling vCPU's thread (docs/fabric.md,
# "Latency"). Here neither side rings it: the event loop reads the link.
xcase rc_pingpong_nopoll 180 \
    "env PVRDMA_CQ_POLL_EVERY=0 ibv_rc_pingpong -d pvrdma0 -g $gid -c -n 100"
for t in "send_lat -n 200" "write_bw -n 200" "write_bw -n 50 -s 1048576" \
         "read_lat -n 200" "atomic_bw -n 200" "send_lat -n 200 -c UD"; do
    set -- $t
    xcase "ib_$1$3$5" 300 "ib_$* $opts"
    [ "$VMPAIR_ROLE" = a ] ||
        grep -qE "^ *[0-9]+ +$3 +($num)" "/tmp/ib_$1$3$5.cli" ||
        fail "ib_$1 printed no result row for $3 iterations"
done
echo GUEST-OK
GUEST
    cp "$dir/guest-a.sh" "$dir/guest-b.sh"
}

xvm_check() {
    local name=$1
    grep -hE "iters in|^\[ib_.* client\] +[0-9]+ +[0-9]+ " \
        "$PVRDMA_OUT/vm/$name-b.log" | sed 's/^\[[^]]*\] */  /'
}
