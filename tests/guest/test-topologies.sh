#!/usr/bin/env bash
# Device placement: (1) a vmxnet3 NIC at function 0 of the slot and pvrdma
# at function 1 (the layout stock vmw_pvrdma drivers require): our driver
# pairs with the vmxnet3 netdev, not with the virtio-net one; (2) two
# pvrdma devices in one guest: both register and both ports are ACTIVE.
. "$(dirname "$0")/lib.sh"
vm=$PVRDMA_TOP/scripts/vm.sh

cat > "$TEST_OUT/vmxnet3-guest.sh" <<'GUEST'
fail() { echo "GUEST-FAIL: $*"; exit 1; }
vmx=
for n in /sys/class/net/*; do
    drv=$(basename "$(readlink -f "$n/device/driver" 2>/dev/null)")
    [ "$drv" = vmxnet3 ] && vmx=$(basename "$n")
done
[ -n "$vmx" ] || fail "no vmxnet3 netdev in the guest"
ip link set "$vmx" up
sleep 1
rdma link show | tee /tmp/link
grep -q "pvrdma0/1 state ACTIVE .*netdev $vmx " /tmp/link ||
    fail "pvrdma0 is not paired with the vmxnet3 netdev $vmx"
ibv_devinfo | grep -q PORT_ACTIVE || fail "port not active"
echo GUEST-OK
GUEST
"$vm" --name "$TEST_NAME-vmxnet3" --timeout 300 --pvrdma 0 \
    --qemu-arg -netdev --qemu-arg user,id=vmx0 \
    --qemu-arg -device \
    --qemu-arg vmxnet3,netdev=vmx0,addr=0x6.0,multifunction=on,romfile= \
    --qemu-arg -device --qemu-arg pvrdma,addr=0x6.1 \
    --add "$TEST_OUT/vmxnet3-guest.sh" -- sh ./vmxnet3-guest.sh ||
    fail "vmxnet3 pairing (see $PVRDMA_OUT/vm/$TEST_NAME-vmxnet3.log)"
pass "pvrdma at function 1 pairs with the vmxnet3 at function 0"

cat > "$TEST_OUT/two-guest.sh" <<'GUEST'
fail() { echo "GUEST-FAIL: $*"; exit 1; }
rdma link show | tee /tmp/link
for d in pvrdma0 pvrdma1; do
    grep -q "$d/1 state ACTIVE" /tmp/link || fail "$d port not ACTIVE"
done
ibv_devices
echo GUEST-OK
GUEST
"$vm" --name "$TEST_NAME-two" --timeout 300 --pvrdma 2 \
    --add "$TEST_OUT/two-guest.sh" -- sh ./two-guest.sh ||
    fail "two devices (see $PVRDMA_OUT/vm/$TEST_NAME-two.log)"
pass "two pvrdma devices in one guest, both ACTIVE"
