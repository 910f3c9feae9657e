#!/usr/bin/env bash
# Two "hosts": each VM's QEMU runs in its own network namespace, the two
# joined by a veth pair, and their fabrics talk TCP over it
# (fabric-listen= on A, fabric-peer= on B; payload inline in the stream).
# The same suite as test-xvm.sh (tests/guest/xvm.sh). The guests' own
# Ethernet link (used by the tools to exchange QP numbers) stays the
# harness's unix-socket link.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/vmpair.sh"
. "$(dirname "$0")/xvm.sh"

nsa=pvrdma-a-$$ nsb=pvrdma-b-$$ va=pvra$$ vb=pvrb$$
sdir=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-stats.XXXXXX")
cleanup() {
    ip netns del "$nsa" 2>/dev/null || true
    ip netns del "$nsb" 2>/dev/null || true
    rm -rf "$sdir"
}
trap cleanup EXIT
ip netns add "$nsa" && ip netns add "$nsb" ||
    fail "cannot create network namespaces (needs root)"
ip link add "$va" type veth peer name "$vb"
ip link set "$va" netns "$nsa"
ip link set "$vb" netns "$nsb"
ip -n "$nsa" addr add 192.168.77.1/24 dev "$va"
ip -n "$nsb" addr add 192.168.77.2/24 dev "$vb"
for ns in "$nsa" "$nsb"; do
    ip -n "$ns" link set lo up
done
ip -n "$nsa" link set "$va" up
ip -n "$nsb" link set "$vb" up

xvm_scripts "$TEST_OUT"
xvm_stats_start "$sdir"
vmpair_run "$TEST_NAME" 900 "$TEST_OUT/guest-a.sh" "$TEST_OUT/guest-b.sh" \
    "${XVM_ARGS[@]}" "${XVM_STATS_ARGS[@]}" \
    --a-wrap "ip netns exec $nsa" --b-wrap "ip netns exec $nsb" \
    --a-arg -d --a-arg ",fabric-listen=192.168.77.1:7471" \
    --b-arg -d --b-arg ",fabric-peer=192.168.77.1:7471" --b-arg --iothread
xvm_check "$TEST_NAME"
xvm_stats_check "$sdir" tcp
pass "ping-pongs, perftest, RDMA CM, UCX, NVMe and NFS over RDMA, Open MPI between two VMs over TCP between namespaces (B with iothread=); the devices' stats and info pvrdma sampled throughout"
