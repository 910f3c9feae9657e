#!/usr/bin/env bash
# Two VMs on one host joined by one fabric (-device pvrdma,fabric-path=DIR;
# bulk data through shared memory between the two QEMU processes): the
# ping-pongs and perftest of tests/guest/xvm.sh, guest A serving, guest B
# connecting. Guest A's device runs its doorbells and links in an
# IOThread (iothread=), B's in its vCPU and main loop: one run covers
# both ways of running between VMs (test-xhost.sh has them the other way
# round).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/vmpair.sh"
. "$(dirname "$0")/xvm.sh"

fdir=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-fab.XXXXXX")
sdir=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-stats.XXXXXX")
trap 'rm -rf "$fdir" "$sdir"' EXIT
xvm_scripts "$TEST_OUT"
xvm_stats_start "$sdir"
vmpair_run "$TEST_NAME" 900 "$TEST_OUT/guest-a.sh" "$TEST_OUT/guest-b.sh" \
    "${XVM_ARGS[@]}" "${XVM_STATS_ARGS[@]}" --a-arg --iothread \
    --arg -d --arg ",fabric-path=$fdir"
xvm_check "$TEST_NAME"
xvm_stats_check "$sdir" shm
if [ "${PVRDMA_XVM_QUICK:-0}" = 1 ]; then
    pass "ping-pongs (RC, SRQ, XRC, UD), perftest (RC, UD), RDMA CM (rping -V, ucmatose, udaddy, mckey), NVMe and NFS over RDMA between two VMs (A with iothread=; PVRDMA_XVM_QUICK: no UCX, Open MPI, perftest -R); the devices' stats and info pvrdma sampled throughout"
else
    pass "ping-pongs (RC, SRQ, XRC, UD), perftest (RC, UD, -R), RDMA CM (rping -V, ucmatose, udaddy, mckey), UCX, NVMe and NFS over RDMA, Open MPI between two VMs (A with iothread=); the devices' stats and info pvrdma sampled throughout"
fi
