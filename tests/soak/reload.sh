#!/usr/bin/env bash
# QEMU's own memory across module reloads (not in make check; about 2.5
# minutes): one guest unloads and reloads pvrdma.ko RELOADS times (60),
# each time running a verified 64 KiB ping-pong; with NORELOAD=1 the
# same ping-pongs without the reloads (the control). Every
# 5 s the host samples QEMU's resident memory of its own (without guest
# RAM and TCG's code buffer, as make soak counts it), fds and mappings
# into $PVRDMA_OUT/soak/reload.dat ("seconds reloads own_kb fds maps")
# and prints the growth per reload after the first five. About 500 kB
# per reload, 6 kB per rebind (REBIND=1): TCG translating the reloaded
# module's code at its new addresses, not the device (README, "soak").
. "$(dirname "$0")/../guest/lib.sh"

n=${RELOADS:-60}
reload="rmmod pvrdma && modprobe pvrdma"
# REBIND=1: the driver unbound from the device and bound again, module
# kept: the device's whole reset and activation path without new module
# code for TCG to translate (the control that isolates the device).
[ -z "${REBIND:-}" ] ||
    reload='d=$(basename /sys/bus/pci/drivers/pvrdma/0000:*) && echo $d > /sys/bus/pci/drivers/pvrdma/unbind && echo $d > /sys/bus/pci/drivers/pvrdma/bind'
[ -z "${NORELOAD:-}" ] || reload=true
out=$PVRDMA_OUT/soak
mkdir -p "$out"
cat > "$TEST_OUT/reload-guest.sh" <<GUEST
. ./pair.sh
i=0
while [ \$i -lt $n ]; do
    i=\$((i + 1))
    $reload || fail "reload \$i"
    wait_for 20 sh -c 'ibv_devinfo -d pvrdma0 2>/dev/null | grep -q PORT_ACTIVE' ||
        fail "port not active after reload \$i"
    pair pp-\$i 60 "ibv_rc_pingpong -d pvrdma0 -g 0 -n 50 -s 65536 -c -p 18700" \\
        "ibv_rc_pingpong -d pvrdma0 -g 0 -n 50 -s 65536 -c -p 18700 127.0.0.1" \\
        > /dev/null || fail "ping-pong \$i"
    echo "RELOAD \$i"
done
echo GUEST-OK
GUEST
own_kb() {
    awk '/^Size:/ { big = $2 >= 262144 } /^Rss:/ { if (!big) s += $2 }
         END { print s + 0 }' "/proc/$1/smaps"
}
log=$PVRDMA_OUT/vm/$TEST_NAME.log
"$PVRDMA_TOP/scripts/vm.sh" --name "$TEST_NAME" --smp 2 --timeout 900 \
    -q -name -q "pvrdma-reload-$$" --add "$TESTS_TOP/tests/guest/pair.sh" \
    --add "$TEST_OUT/reload-guest.sh" -- sh ./reload-guest.sh > /dev/null 2>&1 &
v=$!
p=
until [ -n "$p" ] || ! kill -0 $v 2> /dev/null; do
    sleep 0.5
    for q in $(pgrep -f "pvrdma-reload-$$"); do
        case "$(readlink "/proc/$q/exe")" in *qemu-system*) p=$q ;; esac
    done
done
[ -n "$p" ] || fail "QEMU did not start (log $log)"
: > "$out/reload.dat"
while kill -0 "$p" 2> /dev/null; do
    echo "$SECONDS $(grep -c '^RELOAD ' "$log") $(own_kb "$p") $(ls "/proc/$p/fd" | wc -l) $(wc -l < "/proc/$p/maps")" >> "$out/reload.dat"
    sleep 5
done 2> /dev/null
wait $v || fail "the guest failed (log $log)"
awk '$2 >= 5 && !a { a = $2; ka = $3 } { b = $2; kb = $3 }
     END { if (b > a) printf "%d reloads: %.0f kB of QEMU'"'"'s own memory each\n", b - a, (kb - ka) / (b - a) }' "$out/reload.dat"
