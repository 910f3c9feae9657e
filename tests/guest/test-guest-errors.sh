#!/usr/bin/env bash
# A guest that hammers the device with 200000 bad register writes: every
# write is refused (the register keeps its value), the device keeps
# working, each logged refusal is also its kind's trace event with the
# values as fields, and the guest-error log is rate-limited per kind (at
# most 10 lines a second).  The bound comes from the time QEMU really ran,
# so a slow machine cannot fail the test; an unlimited log would hold all
# 200000 lines. Then bus mastering is turned off under the driver: the
# device resets (it may not touch guest memory any more), the driver's
# next command fails, and a reloaded driver works again.
. "$(dirname "$0")/lib.sh"

storm=$TEST_OUT/reg_storm
gcc -O2 -static -Wall -Wextra -Werror -o "$storm" \
    "$TESTS_TOP/tests/guest/progs/reg_storm.c" || fail "cannot build reg_storm"

qlog=$TEST_OUT/qemu.log
rm -f "$qlog"
cat > "$TEST_OUT/guest.sh" <<'GUEST'
fail() { echo "GUEST-FAIL: $*"; exit 1; }
dev=
for d in /sys/bus/pci/devices/*; do
    [ "$(cat "$d/vendor")" = 0x15ad ] && [ "$(cat "$d/device")" = 0x0820 ] &&
        dev=$d && break
done
[ -n "$dev" ] || fail "no pvrdma PCI function"
# Before any driver claims the BAR (strict /dev/mem rules forbid mapping a
# claimed one); the driver then binds to the device the storm hit.
./reg_storm "$dev/resource1" 0 0x11 200000 > /tmp/storm || fail "reg_storm failed"
grep -qx 'REG=0x00000014' /tmp/storm || fail "VERSION changed: $(cat /tmp/storm)"
modprobe pvrdma || fail "modprobe pvrdma failed"
for i in $(seq 50); do
    ibv_devinfo -d pvrdma0 2>/dev/null | grep -q PORT_ACTIVE && break
    sleep 0.1
done
ibv_devinfo -d pvrdma0 | grep -q PORT_ACTIVE || fail "device stopped working"
# Bus mastering turned off under the driver (what Linux does to every
# device before kexec): the device resets (QEMU traces it), so the
# driver's next commands fail; reloading the driver brings it back.
cmd=$(od -An -tu2 -j 4 -N 2 "$dev/config" | tr -d ' ')
off=$((cmd & ~4))
printf "\\$(printf %o $((off & 255)))\\$(printf %o $((off >> 8)))" |
    dd of="$dev/config" bs=1 seek=4 conv=notrunc 2> /dev/null ||
    fail "cannot clear bus mastering"
echo "PCI command $cmd -> $(od -An -tu2 -j 4 -N 2 "$dev/config" | tr -d ' ')"
ibv_rc_pingpong -d pvrdma0 -g 1 -n 5 > /tmp/pp.out 2>&1 &&
    fail "a ping-pong server started on a device whose bus mastering is off"
cat /tmp/pp.out
rmmod pvrdma || fail "rmmod pvrdma"
modprobe pvrdma || fail "modprobe pvrdma after the reset"
for i in $(seq 50); do
    ibv_devinfo -d pvrdma0 2>/dev/null | grep -q PORT_ACTIVE && break
    sleep 0.1
done
(ibv_rc_pingpong -d pvrdma0 -g 1 -n 100 -c > /tmp/pps.out 2>&1 &
 sleep 1; ibv_rc_pingpong -d pvrdma0 -g 1 -n 100 -c 127.0.0.1) ||
    fail "no ping-pong after the driver came back"
dmesg | grep -E "BUG|Oops|WARNING: " && fail "the kernel logged the above"
echo GUEST-OK
GUEST
t0=$(date +%s)
"$PVRDMA_TOP/scripts/vm.sh" --name "$TEST_NAME" --timeout 300 --noload \
    --qemu-arg -d --qemu-arg guest_errors --qemu-arg -D --qemu-arg "$qlog" \
    --qemu-arg -trace --qemu-arg 'pvrdma_err_write_read_only_register' \
    --qemu-arg -trace --qemu-arg 'pvrdma_bus_master_off' \
    --add "$TEST_OUT/guest.sh" --add "$storm" -- sh ./guest.sh ||
    fail "see $PVRDMA_OUT/vm/$TEST_NAME.log"
grep -q '^GUEST-OK' "$PVRDMA_OUT/vm/$TEST_NAME.log" || fail "guest checks failed"
secs=$(($(date +%s) - t0 + 1))
[ -f "$qlog" ] || fail "QEMU wrote no log to $qlog"
logged=$(grep -c 'pvrdma: write 0x11 to read-only register 0x0$' "$qlog" || true)
traced=$(grep -c 'pvrdma_err_write_read_only_register write 0x11 to read-only register 0x0$' "$qlog" || true)
echo "  200000 bad writes, QEMU ran ${secs}s: $logged logged, $traced traced"
[ "$logged" -ge 10 ] || fail "only $logged bad writes logged (want >= 10)"
[ "$logged" -le $((10 * (secs + 1))) ] ||
    fail "$logged lines in ${secs}s: the log is not rate-limited (<= 10/s)"
[ "$traced" -eq "$logged" ] ||
    fail "$traced trace events for $logged logged errors (kind or values lost)"
grep -q "pvrdma_bus_master_off" "$qlog" ||
    fail "clearing bus mastering did not reset the device (no pvrdma_bus_master_off)"
pass "bus mastering off resets the device (the driver reloads and works); bad register writes refused, traced as pvrdma_err_write_read_only_register with their values, log rate-limited"
