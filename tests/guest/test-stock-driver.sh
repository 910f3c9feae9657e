#!/usr/bin/env bash
# ABI check from the other side: the upstream Linux vmw_pvrdma driver, as
# Debian 12 ships its source (linux-source-6.1) but does not build it,
# unmodified, against our device. It requires a vmxnet3 NIC at function 0
# of the slot. With it: the port is ACTIVE, ibv_rc_pingpong and ib_write_bw
# pass through our provider and through rdma-core's stock one, and our
# kernel verbs test passes. Then the slot is hot-unplugged while a process
# has the device open: the removal waits for the process (the upstream
# driver cannot take the device from it), and completes once it ends.
# (test-stock-driver-6.12.sh: the 6.12 driver in the 6.12 guest.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/migrate.sh"          # qmp
. "$(dirname "$0")/stockdrv.sh"
kver=$(basename "$(readlink -f "$PVRDMA_OUT/kernel")")

ko=$(stockdrv_build 6.1)
kmod=$TESTS_TOP/tests/guest/kmod
make -s -C "$kmod" KVER="$kver" >&2 || fail "cannot build the test module"

cat > "$TEST_OUT/guest.sh" <<'GUEST'
. ./pair.sh
. ./stock.sh
stock_driver_up 10.0.3.15 30
for provider in ours stock; do
    [ $provider = ours ] || stock_provider vmw_pvrdma0 "$gid"
    pair "rc_pingpong_$provider" 120 \
        "ibv_rc_pingpong -d vmw_pvrdma0 -g $gid -n 200 -c" \
        "ibv_rc_pingpong -d vmw_pvrdma0 -g $gid -n 200 -c 10.0.3.15"
    pair "ib_write_bw_$provider" 300 \
        "ib_write_bw -d vmw_pvrdma0 -x $gid -F -n 200" \
        "ib_write_bw -d vmw_pvrdma0 -x $gid -F -n 200 10.0.3.15"
    grep -qE "^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+" "/tmp/ib_write_bw_$provider.cli" ||
        fail "ib_write_bw printed no result row"
done
dmesg -c > /dev/null
insmod ./pvrdma_ktest.ko ibdev=vmw_pvrdma0 kernel_srq=0 kernel_uc=0 kernel_resize_cq=0 ||
    fail "insmod pvrdma_ktest"
rmmod pvrdma_ktest
dmesg | grep "ktest:" | tee /tmp/ktest
grep -q "ktest: RESULT passed=[1-9][0-9]* failed=0" /tmp/ktest ||
    fail "kernel verbs through vmw_pvrdma"
# Hot-unplug with a user process on the device: the upstream driver has
# no disassociate_ucontext, so the removal waits until the process ends
# (then completes). The host removes the slot (device_del of function 0
# takes the vmxnet3 and the device together) and tells this guest on
# ttyS1 when it has seen the removal wait; then the process is killed.
exec 3< /dev/ttyS1
stty -F /dev/ttyS1 raw -echo || fail "stty ttyS1"
ibv_rc_pingpong -d vmw_pvrdma0 -g $gid -n 200 -p 18700 > /tmp/held.out 2>&1 &
held=$!
wait_for 20 sh -c "ls -l /proc/$held/fd | grep -q uverbs" ||
    fail "the ping-pong server did not open the device"
echo "UNPLUG-NOW"
read -r line <&3 || fail "the host's control channel closed"
[ "$line" = kill ] || fail "control channel: '$line'"
kill -0 $held || fail "the process on the device ended during the removal"
test -e /sys/class/infiniband/vmw_pvrdma0 ||
    fail "vmw_pvrdma0 went while a process held it"
kill $held
wait_for 60 not test -e /sys/class/infiniband/vmw_pvrdma0 ||
    fail "vmw_pvrdma0 still there 60 s after its last user ended"
echo "stock driver: the removal waited for the process, then completed"
rmmod vmw_pvrdma || fail "rmmod vmw_pvrdma"
dmesg | grep -qE "BUG|WARNING:|Oops" && fail "kernel warnings in dmesg"
echo GUEST-OK
GUEST
qmps=$TEST_OUT/qmp.sock ctl=$TEST_OUT/ctl.sock log=$PVRDMA_OUT/vm/$TEST_NAME.log
rm -f "$qmps" "$ctl" "$log"
"$PVRDMA_TOP/scripts/vm.sh" --name "$TEST_NAME" --timeout 600 --smp 2 \
    --pvrdma 0 --noload \
    --qemu-arg -netdev --qemu-arg user,id=vmx0,net=10.0.3.0/24 \
    --qemu-arg -device \
    --qemu-arg vmxnet3,id=vmxdev,netdev=vmx0,addr=0x6.0,multifunction=on,romfile= \
    --qemu-arg -device --qemu-arg pvrdma,id=pvdev,addr=0x6.1 \
    --qemu-arg -qmp --qemu-arg "unix:$qmps,server=on,wait=off" \
    --qemu-arg -chardev --qemu-arg "socket,id=ctl,path=$ctl,server=on,wait=off" \
    --qemu-arg -device --qemu-arg isa-serial,chardev=ctl \
    --add "$ko" --add "$kmod/pvrdma_ktest.ko" \
    --add "$TESTS_TOP/tests/guest/pair.sh" \
    --add "$TESTS_TOP/tests/guest/stock.sh" --add "$TEST_OUT/guest.sh" \
    -- sh ./guest.sh > /dev/null &
vm=$!
until grep -qx UNPLUG-NOW "$log" 2> /dev/null; do
    kill -0 $vm 2> /dev/null || fail "the guest ended before the removal, see $log"
    sleep 0.2
done
present() {
    qmp "$qmps" qom-list '{"path": "/machine/peripheral"}' | grep -q '"name": "pvdev"'
}
qmp "$qmps" device_del '{"id": "vmxdev"}' > /dev/null
# The guest's removal has begun (its vmxnet3 half goes first or not at
# all: only the whole slot leaves) and must not end while the process
# holds the device: 15 s of it, the device still there.
for i in $(seq 75); do
    present || fail "the device was removed while a process held it (upstream driver)"
    sleep 0.2
done
python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"kill\n")' "$ctl"
for i in $(seq 300); do
    present || break
    sleep 0.2
done
present && fail "the device was not removed 60 s after the process ended"
wait $vm || fail "see $log"
grep "stock driver: the removal" "$log"
# A live migration (unix socket, then file) with the upstream driver and
# rdma-core's stock provider, as Ubuntu, Fedora, RHEL or SUSE guests run
# them, their processes running.
PVRDMA_MIGRATE_DRIVER=$ko PVRDMA_MIGRATE_PROVIDER=stock \
    PVRDMA_MIGRATE_FULL=0 \
    PVRDMA_TEST_SUFFIX=-stockdrv \
    bash "$TESTS_TOP/tests/guest/test-migrate.sh" ||
    fail "a migration with the upstream driver failed"
pass "upstream vmw_pvrdma driver: port ACTIVE, ping-pong and ib_write_bw with both providers, kernel verbs, hot-unplug waiting for its user process, a live migration with traffic (driver and provider both stock)"
