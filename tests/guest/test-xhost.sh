#!/usr/bin/env bash
# Two "hosts": each VM's QEMU runs in its own network namespace, the two
# joined by a veth pair, and their fabrics talk TCP over it
# (fabric-listen= on A, fabric-peer= on B; payload inline in the stream),
# in TLS with x509 certificates of one CA made for the test
# (tests/guest/tls-certs.sh), each naming its host's address, and each
# QEMU allowing only the other's name (fabric-tls-authz, authz-simple).
# The same suite as test-xvm.sh (tests/guest/xvm.sh), and our
# verification program rc_verify across the link. The guests' own
# Ethernet link (used by the tools to exchange QP numbers) stays the
# harness's unix-socket link.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/vmpair.sh"
. "$(dirname "$0")/xvm.sh"

sdir=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-stats.XXXXXX")
trap 'vmpair_netns_del; rm -rf "$sdir"' EXIT
vmpair_netns 192.168.77

certs=$sdir/certs
"$TESTS_TOP/tests/guest/tls-certs.sh" ca "$certs/ca"
"$TESTS_TOP/tests/guest/tls-certs.sh" member "$certs/ca" "$certs/a" host-a 192.168.77.1
"$TESTS_TOP/tests/guest/tls-certs.sh" member "$certs/ca" "$certs/b" host-b 192.168.77.2
tls_args() { # a|b ENDPOINT PEER-NAME: the credentials and authz objects
    local r=$1
    TLS_ARGS+=(--$r-arg -q --$r-arg -object --$r-arg -q
               --$r-arg "tls-creds-x509,id=tls0,endpoint=$2,dir=$certs/$r"
               --$r-arg -q --$r-arg -object --$r-arg -q
               --$r-arg "authz-simple,id=authz0,identity=O=pvrdma,,CN=$3")
}
TLS_ARGS=()
tls_args a server host-b
tls_args b client host-a
tls=fabric-tls-creds=tls0,fabric-tls-authz=authz0

xvm_scripts "$TEST_OUT"
rc_verify=$(build_prog rc_verify)
xvm_stats_start "$sdir"
vmpair_run "$TEST_NAME" 900 "$TEST_OUT/guest-a.sh" "$TEST_OUT/guest-b.sh" \
    "${XVM_ARGS[@]}" "${XVM_STATS_ARGS[@]}" "${TLS_ARGS[@]}" \
    --arg --add --arg "$rc_verify" \
    --a-wrap "ip netns exec $VMPAIR_NS_A" --b-wrap "ip netns exec $VMPAIR_NS_B" \
    --a-arg -d --a-arg ",fabric-listen=192.168.77.1:7471,$tls" \
    --b-arg -d --b-arg ",fabric-peer=192.168.77.1:7471,$tls" --b-arg --iothread
xvm_check "$TEST_NAME"
xvm_stats_check "$sdir" tls
pass "ping-pongs, perftest, rc_verify, RDMA CM, UCX, NVMe and NFS over RDMA, Open MPI between two VMs over TCP in TLS (x509 certificates, authz) between namespaces (B with iothread=); the devices' stats and info pvrdma sampled throughout"
