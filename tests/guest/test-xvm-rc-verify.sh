#!/usr/bin/env bash
# Our verification program (tests/guest/progs/rc_verify.c) across two VMs
# on one fabric, joined by shared memory (fabric-path) and then by TCP
# between two network namespaces, as two hosts (fabric-listen /
# fabric-peer over a veth pair, payload inline in the stream), in TLS
# with a pre-shared key (fabric-tls-creds naming an
# -object tls-creds-psk: a plain link could not come up, each end would
# refuse the other): guest A runs its agent (rc_verify -s), which
# holds the responder QPs, SRQ and buffers; guest B runs the checks with
# the requester there and every responder action sent to A (rc_verify -c):
# every opcode, byte, completion field and error status of the one-VM run.
# Guest B first runs rc_verify within itself; the cross-VM run must pass
# as many checks as that one, with none failed. Then the same again as
# XRC (rc_verify -X, a second agent in A): B's XRC_SEND QP to an
# XRC_RECV QP with the XRC SRQs of a domain A opens, two SRQs named in
# turn, another domain's SRQ named (REM_INV_REQ_ERR), keys of the other
# SRQ's PD (REM_ACCESS_ERR). The device has a fabric
# with peers elsewhere, so empty polls ring CQ_POLL (-P). One side runs
# its device with iothread=: A (the responder) over shared memory, B (the
# requester) over TCP.
# Then a stream of 64-byte WRITEs from B (ib_write_bw -n 20000), with
# B's QEMU tracing doorbells: with the send doorbell hint (shared
# memory) B's provider leaves most SEND doorbells out, as the device
# reads the send queue when answers come; with x-sq-db-hint=off (the TCP
# pair: the control, showing the count is real) it rings one per WRITE.
# The TCP pair then runs RDMA CM and a kernel user over the TLS link:
# rping -V, and NVMe over RDMA (B's 4 MiB found on A's RAM disk).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/vmpair.sh"
rc_verify=$(build_prog rc_verify)

fdir=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-fab.XXXXXX")
trap 'rm -rf "$fdir"' EXIT

# GID index 1: the RoCE v2 IPv4-mapped GID (A ::ffff:10.9.0.1, B ...2).
cat > "$TEST_OUT/guest-a.sh" <<'GUEST'
. ./sync.sh
xpair_server rc_verify 400 "./rc_verify -s"
xpair_server rc_verify_xrc 400 "./rc_verify -s"
xpair_server wr64 120 "ib_write_bw -d pvrdma0 -x 1 -F -s 64 -n 20000"
GUEST
cat > "$TEST_OUT/guest-b.sh" <<'GUEST'
. ./sync.sh
echo "=== rc_verify within this VM"
rc=0
timeout 200 ./rc_verify -d pvrdma0 -g 1 -P > /tmp/local.out 2>&1 || rc=$?
sed 's/^/[rc_verify local] /' /tmp/local.out
[ "$rc" -eq 0 ] || fail "rc_verify within this VM exited with $rc"
echo "=== rc_verify -X within this VM"
rc=0
timeout 200 ./rc_verify -X -d pvrdma0 -g 1 -P > /tmp/local.out 2>&1 || rc=$?
sed 's/^/[rc_verify_xrc local] /' /tmp/local.out
[ "$rc" -eq 0 ] || fail "rc_verify -X within this VM exited with $rc"
xpair_client rc_verify 400 "./rc_verify -d pvrdma0 -g 1 -G 1 -P -c $PEER_IP"
xpair_client rc_verify_xrc 400 "./rc_verify -X -d pvrdma0 -g 1 -G 1 -P -c $PEER_IP"
xpair_client wr64 120 "ib_write_bw -d pvrdma0 -x 1 -F -s 64 -n 20000 $PEER_IP"
GUEST
# The TCP pair (between namespaces, in TLS) also runs RDMA CM and a
# kernel user: rping -V (B's client checks every byte it reads back) and
# NVMe over RDMA (B writes 4 MiB to A's RAM disk and reads it back; both
# print its MD5, compared here).
for r in a b; do
    cp "$TEST_OUT/guest-$r.sh" "$TEST_OUT/guest-$r-tcp.sh"
    echo "echo GUEST-OK" >> "$TEST_OUT/guest-$r.sh"
done
cat >> "$TEST_OUT/guest-a-tcp.sh" <<'GUEST'
xpair_server rping 120 "rping -s -a 0.0.0.0 -C 20 -V"
. ./nvmeof.sh
dmesg_mark
nvmeof_target "$SELF_IP"
sync_signal nvme-up 120
sync_wait "$PEER_IP" nvme-done 300
echo "nvmet: RAM disk holds $(dd if=/dev/ram0 bs=65536 count=64 2>/dev/null | md5sum | cut -c1-32)"
nvmeof_target_down
dmesg_clean
echo GUEST-OK
GUEST
cat >> "$TEST_OUT/guest-b-tcp.sh" <<'GUEST'
xpair_client rping 120 "rping -c -C 20 -V -v -a $PEER_IP"
grep -q "rdma-ping-19: " /tmp/rping.cli || fail "rping: 20 pings not seen"
. ./nvmeof.sh
dmesg_mark
sync_wait "$PEER_IP" nvme-up 120
nvmeof_host "$PEER_IP"
sync_signal nvme-done 120
dmesg_clean
echo GUEST-OK
GUEST
# One pair of guests joined by the fabric options given ($2...), named $1.
check_pair() {
    local name=$1 sfx=$2 log_b one one_failed two two_failed tool
    shift 2
    vmpair_run "$name" 600 "$TEST_OUT/guest-a$sfx.sh" "$TEST_OUT/guest-b$sfx.sh" \
        --arg --add --arg "$rc_verify" \
        --b-arg -q --b-arg -trace --b-arg -q \
        --b-arg "pvrdma_doorbell,file=$TEST_OUT/$name-b.trace" "$@"
    log_b=$PVRDMA_OUT/vm/$name-b.log
    result() {
        sed -n "s/^\[$1\] RESULT passed=\([0-9][0-9]*\) failed=\([0-9][0-9]*\)\r\{0,1\}$/\1 \2/p" \
            "$log_b"
    }
    CHECKS=0
    # RC, then XRC (rc_verify -X; it must not have skipped XRC).
    for tool in rc_verify rc_verify_xrc; do
        read -r one one_failed <<< "$(result "$tool local")"
        read -r two two_failed <<< "$(result "$tool client")"
        [ -n "$one" ] || fail "$name: no RESULT from $tool within guest B (log $log_b)"
        [ -n "$two" ] || fail "$name: no RESULT from $tool across the VMs (log $log_b)"
        echo "  $name: $tool within one VM: passed=$one failed=$one_failed; across two VMs: passed=$two failed=$two_failed"
        if [ "$one_failed" -ne 0 ] || [ "$two_failed" -ne 0 ]; then
            fail "$name: $tool: failed checks (log $log_b)"
        fi
        if [ "$one" -eq 0 ] || [ "$two" -ne "$one" ]; then
            fail "$name: $tool across the VMs passed $two checks, within one VM $one"
        fi
        CHECKS=$((CHECKS + two))
    done
    [ "$(grep -c '^\[rc_verify_xrc [a-z]*\] PASS xrc: setup' "$log_b")" -eq 2 ] ||
        fail "$name: rc_verify -X did not set up XRC twice (log $log_b)"
    # SEND doorbells (UAR offset 0 of a user page, bit 30) of guest B.
    SENDS=$(grep -cE 'pvrdma_doorbell offset 0x[1-9a-f][0-9a-f]*000 val 0x[4-7][0-9a-f]{7}$' \
            "$TEST_OUT/$name-b.trace" || true)
    grep -q "^\[wr64 client\] *64 *20000 " "$log_b" ||
        fail "$name: no ib_write_bw result (log $log_b)"
}
check_pair "$TEST_NAME" "" --arg -d --arg ",fabric-path=$fdir" --a-arg --iothread
hinted=$SENDS
# TCP between two network namespaces joined by a veth pair, as two hosts;
# TLS with one key in both QEMUs' keys.psk.
trap 'vmpair_netns_del; rm -rf "$fdir"' EXIT
vmpair_netns 192.168.79
rm -rf "$TEST_OUT/psk"
"$TESTS_TOP/tests/guest/tls-certs.sh" psk "$TEST_OUT/psk"
check_pair "$TEST_NAME-tcp" -tcp \
    --a-wrap "ip netns exec $VMPAIR_NS_A" --b-wrap "ip netns exec $VMPAIR_NS_B" \
    --a-arg -d \
    --a-arg ",fabric-listen=192.168.79.1:7591,fabric-tls-creds=tls0" \
    --a-arg -q --a-arg -object --a-arg -q \
    --a-arg "tls-creds-psk,id=tls0,endpoint=server,dir=$TEST_OUT/psk" \
    --b-arg -d \
    --b-arg ",fabric-peer=192.168.79.1:7591,fabric-tls-creds=tls0,x-sq-db-hint=off" \
    --b-arg -q --b-arg -object --b-arg -q \
    --b-arg "tls-creds-psk,id=tls0,endpoint=client,dir=$TEST_OUT/psk" \
    --b-arg --iothread
grep -q "rdma-ping-19: " "$PVRDMA_OUT/vm/$TEST_NAME-tcp-b.log" ||
    fail "TCP pair: rping -V did not complete 20 pings"
vmpair_nvme_check "$TEST_NAME-tcp"
echo "  SEND doorbells of guest B (rc_verify, then 20000 WRITEs): $hinted with the hint, $SENDS without"
[ "$SENDS" -ge 20000 ] || fail "x-sq-db-hint=off: only $SENDS SEND doorbells traced"
[ "$hinted" -le 10000 ] || fail "$hinted SEND doorbells with the hint (at most 10000 expected)"
pass "rc_verify across two VMs, RC and XRC, shared memory and TCP between namespaces in TLS (PSK): all $CHECKS checks of the one-VM runs; over TLS also rping -V and NVMe over RDMA; SEND doorbells left out on the device's hint ($hinted against $SENDS)"
