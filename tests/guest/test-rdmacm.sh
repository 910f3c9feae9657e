#!/usr/bin/env bash
# RDMA CM within one guest (connection setup through QP1 MADs and UD):
# rping with data verification (-V), ucmatose, udaddy, rdma_server /
# rdma_client, perftest with -R (ib_send_lat, ib_write_bw); then a kernel
# user: NVMe over RDMA, target (nvmet-rdma, a RAM disk) and host
# (nvme-rdma) in the same guest, 4 MiB written and read back, compared
# with the source and with the target's RAM disk, then disconnect and
# target teardown with no NVMe/RDMA error in the kernel log.
. "$(dirname "$0")/lib.sh"

cat > "$TEST_OUT/guest.sh" <<'GUEST'
. ./pair.sh
. ./nvmeof.sh
ip=10.0.2.15
num='[0-9.]+|inf|-?nan'
pair rping 120 "rping -s -a $ip -C 20 -V" "rping -c -a $ip -C 20 -V -v"
grep -q "rdma-ping-19: " /tmp/rping.cli || fail "rping: 20 pings not seen"
pair ucmatose 120 "ucmatose -b $ip" "ucmatose -s $ip -b $ip"
pair udaddy 120 "udaddy -b $ip" "udaddy -s $ip -b $ip"
pair rdma_server 120 "rdma_server -s $ip" "rdma_client -s $ip"
pair send_lat_R 300 "ib_send_lat -d pvrdma0 -R -n 200" \
    "ib_send_lat -d pvrdma0 -R -n 200 $ip"
grep -qE "^ *[0-9]+ +200 +($num)" /tmp/send_lat_R.cli ||
    fail "ib_send_lat -R printed no result row"
pair write_bw_R 300 "ib_write_bw -d pvrdma0 -R -n 200" \
    "ib_write_bw -d pvrdma0 -R -n 200 $ip"
grep -qE "^ *[0-9]+ +200 +($num) +($num)" /tmp/write_bw_R.cli ||
    fail "ib_write_bw -R printed no result row"
echo "=== NVMe over RDMA"
nvmeof_dmesg_mark
nvmeof_target $ip
nvmeof_host $ip
dd if=/dev/ram0 of=/tmp/ram bs=65536 count=64 2>/dev/null
cmp /tmp/nvme.data /tmp/ram || fail "the target's RAM disk does not hold the data"
nvmeof_target_down
nvmeof_dmesg_clean
echo GUEST-OK
GUEST
"$PVRDMA_TOP/scripts/vm.sh" --name "$TEST_NAME" --timeout 900 --smp 2 \
    --add "$TESTS_TOP/tests/guest/pair.sh" \
    --add "$TESTS_TOP/tests/guest/nvmeof.sh" --add "$TEST_OUT/guest.sh" \
    -- sh ./guest.sh || fail "see $PVRDMA_OUT/vm/$TEST_NAME.log"
grep -hE "nvme-rdma: 4 MiB|usec/iter|^\[send_lat_R client\] +2 " \
    "$PVRDMA_OUT/vm/$TEST_NAME.log" | sed 's/^/  /'
pass "rping -V, ucmatose, udaddy, rdma_server/client, perftest -R, NVMe over RDMA (one guest)"
