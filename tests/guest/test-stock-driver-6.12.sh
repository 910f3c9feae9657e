#!/usr/bin/env bash
# The upstream Linux vmw_pvrdma driver of a current kernel against our
# device: built, unmodified, from Debian 13's linux-source-6.12 (the very
# version of the guest's 6.12 kernel, make image-6.12; tests/guest/
# stockdrv.sh), and run in the 6.12 guest with rdma-core's stock
# vmw_pvrdma provider (the processes must really map libvmw_pvrdma), a
# vmxnet3 NIC at function 0 of the device's slot (the driver pairs with it
# and takes its GIDs from its addresses).
#   One guest: vmw_pvrdma0's port ACTIVE with the vmxnet3 address's RoCE v2
#     GID; ibv_rc_pingpong (data checked, -c), perftest's ib_write_bw and
#     ib_send_lat (result rows), rping over RDMA CM to the vmxnet3 address
#     (-V: the client checks every byte it reads back, 20 pings), our
#     kernel verbs test module on vmw_pvrdma0, rmmod; no kernel warning.
#   Two guests on one fabric (tests/guest/vmpair.sh), each with its vmxnet3
#     and the upstream driver, the vmxnet3 NICs on a link of their own:
#     ibv_rc_pingpong and rping -V between them, their out-of-band TCP and
#     RDMA CM's address resolution over that link.
# Cost: about 40 s (one guest about 20 s, the pair about 15 s) once the
# source package is cached; the first run downloads it (150 MB) and builds
# the driver (about 25 s), later runs take the kept build.
#
# Compared with 6.1's upstream driver (test-stock-driver.sh; both booted
# with the same script: messages, GID table, port state with the vmxnet3
# down and up, rmmod and insmod again) nothing differs that the device or
# a program sees. The 6.12 source differs only in kernel API updates
# (create_cq takes the uverbs attribute bundle, vm_flags_set(),
# PCI_IRQ_INTX, dev_put() of a NULL netdev) and in dropping post_send's
# check of a negative opcode. Both log the same lines (device version 20,
# driver version 20; paired device to eth1; attached to / detaching from
# device; and, from the same code in both, the kernel verbs test's UC QP
# and kernel SRQ refused: queuepair type 3 not supported, no shared
# receive queue support for kernel client), name the device vmw_pvrdma0, show only RoCE v2 GIDs (the
# vmxnet3's fe80:: and IPv4-mapped addresses, then fec0:: once QEMU's user
# network advertises its prefix), keep the port ACTIVE while the vmxnet3
# is down (the device's port, not the netdev's link; the address's GIDs
# stay but fec0::, which the kernel drops), and unload and load again
# cleanly; the kernel verbs test passes the same 29 checks. (6.12's own
# network code no longer logs "IPv6: ADDRCONF(NETDEV_CHANGE): eth1: link
# becomes ready"; not the driver's.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/stockdrv.sh"
. "$(dirname "$0")/vmpair.sh"

kernel=$PVRDMA_OUT/vmlinuz-6.12
initrd=$PVRDMA_OUT/initrd-6.12.cpio.gz
ktest=$PVRDMA_OUT/modules-6.12/pvrdma_ktest.ko
for f in "$kernel" "$initrd" "$ktest"; do
    [ -e "$f" ] || fail "$f is missing: run 'make image-6.12'"
done
rel=$(basename "$(readlink -f "$PVRDMA_OUT/kernel-6.12")")
vm=$(modinfo -F vermagic "$ktest")
[ "${vm%% *}" = "$rel" ] ||
    fail "pvrdma_ktest.ko is built for '${vm%% *}', the kernel is $rel: run 'make image-6.12'"
ko=$(stockdrv_build 6.12)
export PVRDMA_KERNEL=$kernel PVRDMA_INITRD=$initrd

# --- One guest -----------------------------------------------------------
cat > "$TEST_OUT/guest.sh" <<'GUEST'
. ./pair.sh
. ./stock.sh
echo "GUEST-KERNEL=$(uname -r)"
ip=10.0.3.15
dmesg -c > /dev/null
stock_driver_up $ip
grep -q "link_layer:.*Ethernet" /tmp/devinfo || fail "link layer not Ethernet"
stock_provider vmw_pvrdma0 $gid
pair rc_pingpong 120 "ibv_rc_pingpong -d vmw_pvrdma0 -g $gid -n 200 -c" \
    "ibv_rc_pingpong -d vmw_pvrdma0 -g $gid -n 200 -c $ip"
num='[0-9.]+|inf|-?nan'
for t in write_bw send_lat; do
    pair "ib_$t" 300 "ib_$t -d vmw_pvrdma0 -x $gid -F -n 200" \
        "ib_$t -d vmw_pvrdma0 -x $gid -F -n 200 $ip"
    grep -qE "^ *[0-9]+ +200 +($num)" "/tmp/ib_$t.cli" ||
        fail "ib_$t printed no result row"
done
# RDMA CM to the vmxnet3's address (rdma_cm finds vmw_pvrdma0 by it).
pair rping 120 "rping -s -a $ip -C 20 -V" "rping -c -a $ip -C 20 -V -v"
grep -q "mismatch" /tmp/rping.cli && fail "rping: data mismatch"
[ "$(grep -c "^ping data: rdma-ping-" /tmp/rping.cli)" = 20 ] ||
    fail "rping: not 20 verified pings"
insmod ./pvrdma_ktest.ko ibdev=vmw_pvrdma0 kernel_srq=0 kernel_uc=0 kernel_resize_cq=0 ||
    fail "insmod pvrdma_ktest"
rmmod pvrdma_ktest
dmesg | grep "ktest:" > /tmp/ktest
grep "ktest: RESULT" /tmp/ktest
grep -q "ktest: RESULT passed=[1-9][0-9]* failed=0" /tmp/ktest ||
    { cat /tmp/ktest; fail "kernel verbs through vmw_pvrdma"; }
rmmod vmw_pvrdma || fail "rmmod vmw_pvrdma"
echo "--- the driver's kernel messages"
dmesg | grep -E "vmw_pvrdma|infiniband" | sed 's/^\[[ 0-9.]*\] //'
dmesg | grep -qE "BUG|WARNING:|Oops|Call Trace" && { dmesg; fail "kernel warnings in dmesg"; }
echo GUEST-OK
GUEST
log=$PVRDMA_OUT/vm/$TEST_NAME.log
"$PVRDMA_TOP/scripts/vm.sh" --name "$TEST_NAME" --timeout 600 --smp 2 \
    --pvrdma 0 --noload \
    -q -netdev -q user,id=vmx0,net=10.0.3.0/24 \
    -q -device -q vmxnet3,netdev=vmx0,addr=0x6.0,multifunction=on,romfile= \
    -q -device -q pvrdma,addr=0x6.1 \
    --add "$ko" --add "$ktest" --add "$TESTS_TOP/tests/guest/pair.sh" \
    --add "$TESTS_TOP/tests/guest/stock.sh" --add "$TEST_OUT/guest.sh" \
    -- sh ./guest.sh > /dev/null || fail "one guest: see $log"
grep -q "^GUEST-OK" "$log" || fail "one guest: no GUEST-OK, see $log"
grep -qx "GUEST-KERNEL=$rel" "$log" ||
    fail "the guest does not run $rel: $(grep '^GUEST-KERNEL=' "$log" || echo 'no uname -r'), see $log"
pass "one 6.12 guest ($rel): vmw_pvrdma0 ACTIVE with its RoCE v2 GID, the stock provider loaded; ibv_rc_pingpong -c, ib_write_bw, ib_send_lat, rping -V, kernel verbs, rmmod"

# --- Two guests on one fabric --------------------------------------------
cat > "$TEST_OUT/guest-a.sh" <<'GUEST'
. ./sync.sh
. ./stock.sh
# The vmxnet3 NICs' own link: A 10.9.1.1, B 10.9.1.2.
case $VMPAIR_ROLE in
a) vip=10.9.1.1 vpeer=10.9.1.2 ;;
*) vip=10.9.1.2 vpeer=10.9.1.1 ;;
esac
dmesg -c > /dev/null
stock_driver_up $vip
stock_provider vmw_pvrdma0 $gid
if [ "$VMPAIR_ROLE" = a ]; then
    xpair_server rc_pingpong 180 "ibv_rc_pingpong -d vmw_pvrdma0 -g $gid -n 200 -c"
    xpair_server rping 180 "rping -s -a $vip -C 20 -V"
else
    xpair_client rc_pingpong 180 "ibv_rc_pingpong -d vmw_pvrdma0 -g $gid -n 200 -c $vpeer"
    xpair_client rping 180 "rping -c -a $vpeer -C 20 -V -v"
    grep -q "mismatch" /tmp/rping.cli && fail "rping: data mismatch"
    [ "$(grep -c "^ping data: rdma-ping-" /tmp/rping.cli)" = 20 ] ||
        fail "rping: not 20 verified pings"
fi
rmmod vmw_pvrdma || fail "rmmod vmw_pvrdma"
dmesg | grep -qE "BUG|WARNING:|Oops|Call Trace" && { dmesg; fail "kernel warnings in dmesg"; }
echo GUEST-OK
GUEST
cp "$TEST_OUT/guest-a.sh" "$TEST_OUT/guest-b.sh"
dir=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-stock612.XXXXXX")
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/fab"
# (vm.sh's -q takes one QEMU word: each word its own -q)
args=(--arg --pvrdma --arg 0 --arg --noload
      --arg -q --arg -device --arg -q --arg "pvrdma,addr=0x6.1,fabric-path=$dir/fab"
      --arg --add --arg "$ko" --arg --add --arg "$TESTS_TOP/tests/guest/stock.sh")
for r in a b; do
    o=$([ $r = a ] && echo b || echo a)
    n=$([ $r = a ] && echo 1 || echo 2)
    args+=("--$r-arg" -q "--$r-arg" -netdev "--$r-arg" -q "--$r-arg"
           "dgram,id=vmx0,local.type=unix,local.path=$dir/vmx-$r.sock,remote.type=unix,remote.path=$dir/vmx-$o.sock"
           "--$r-arg" -q "--$r-arg" -device "--$r-arg" -q "--$r-arg"
           "vmxnet3,netdev=vmx0,addr=0x6.0,multifunction=on,romfile=,mac=52:54:00:0a:0a:0$n")
done
vmpair_run "$TEST_NAME-xvm" 600 "$TEST_OUT/guest-a.sh" "$TEST_OUT/guest-b.sh" \
    "${args[@]}"
grep -h "iters in" "$PVRDMA_OUT/vm/$TEST_NAME-xvm-b.log" | sed 's/^/  /'
pass "two 6.12 guests on one fabric, the upstream driver and the stock provider in each: ibv_rc_pingpong -c and rping -V between them"
