#!/usr/bin/env bash
# rdma-core's ping-pong examples between two processes of one guest on one
# pvrdma device: ibv_rc_pingpong (polling and with completion events, -e),
# ibv_srq_pingpong, ibv_xsrq_pingpong (XRC: three clients sharing one
# XRC domain with the server, and with events), ibv_ud_pingpong (polling, and events with one-MTU
# datagrams); each checks its own data (-c).  Then receive doorbells on
# demand (docs/abi.md): with a small receive queue ibv_rc_pingpong reposts
# a receive per message; QEMU's trace counts the RECV doorbells, which
# our provider must leave out while the device's hint says so, and must
# ring with x-rq-db-hint=off (the control: the count is real).  And a
# ping-pong while the other vCPU changes QEMU's memory map in a loop.
. "$(dirname "$0")/lib.sh"

cat > "$TEST_OUT/guest.sh" <<'GUEST'
. ./pair.sh
gid=1   # ::ffff:10.0.2.15, a RoCE v2 GID
pair rc_pingpong 120 "ibv_rc_pingpong -d pvrdma0 -g $gid -n 200 -c" \
    "ibv_rc_pingpong -d pvrdma0 -g $gid -n 200 -c 127.0.0.1"
pair rc_pingpong_events 120 "ibv_rc_pingpong -d pvrdma0 -g $gid -n 200 -c -e" \
    "ibv_rc_pingpong -d pvrdma0 -g $gid -n 200 -c -e 127.0.0.1"
pair rc_pingpong_big 120 "ibv_rc_pingpong -d pvrdma0 -g $gid -n 50 -s 65536 -c" \
    "ibv_rc_pingpong -d pvrdma0 -g $gid -n 50 -s 65536 -c 127.0.0.1"
pair srq_pingpong 120 "ibv_srq_pingpong -d pvrdma0 -g $gid -n 100 -c" \
    "ibv_srq_pingpong -d pvrdma0 -g $gid -n 100 -c 127.0.0.1"
# XRC (PVRDMA_EX_CAP_XRC): every process opens the one XRC domain of
# /tmp/xrc_domain (ibv_open_xrcd by file); the server's XRC_RECV QP per
# client feeds its SRQ, each client's SRQ is fed by the server's XRC_SEND
# QPs: three clients at once, then a client waiting on CQ events.  The
# server may send to a client whose XRC_RECV QP is not ready yet: the
# device drops that SEND and sends it again on its fabric's next tick,
# as hardware retries (hangs in about 1 run of 3 without).
xc="ibv_xsrq_pingpong -d pvrdma0 -g $gid -n 100 127.0.0.1"
pair xsrq_pingpong 120 "ibv_xsrq_pingpong -d pvrdma0 -g $gid -n 100 -c 3" \
    "$xc & a=\$!; $xc & b=\$!; $xc; r=\$?; wait \$a || r=1; wait \$b || r=1; exit \$r"
pair xsrq_pingpong_events 120 \
    "ibv_xsrq_pingpong -d pvrdma0 -g $gid -n 100 -e -s 65536" \
    "ibv_xsrq_pingpong -d pvrdma0 -g $gid -n 100 -e -s 65536 127.0.0.1"
# The port's MTU follows eth0's: 9000 gives 4096, the device's largest.
ip link set eth0 mtu 9000
pair ud_pingpong 120 "ibv_ud_pingpong -d pvrdma0 -g $gid -n 200 -c" \
    "ibv_ud_pingpong -d pvrdma0 -g $gid -n 200 -c 127.0.0.1"
pair ud_pingpong_mtu 120 \
    "ibv_ud_pingpong -d pvrdma0 -g $gid -n 100 -s 4096 -c -e" \
    "ibv_ud_pingpong -d pvrdma0 -g $gid -n 100 -s 4096 -c -e 127.0.0.1"
# The memory map changes under doorbells: while a ping-pong runs, the
# other vCPU turns the NIC's memory decoding off and on through its
# config space (each a new map in QEMU), as Linux does when it sizes
# BARs at boot.  QEMU 10.0's TCG aborted here within seconds
# (scripts/qemu/tcg-iotlb-view.patch); the ping-pong must complete.
nic=$(for d in /sys/bus/pci/devices/*; do
          [ "$(cat "$d/class")" = 0x020000 ] && echo "$d"; done | head -n 1)
[ -n "$nic" ] || fail "no Ethernet function to toggle"
# the command register's two bytes, as octal escapes for printf
cmdreg() {
    dd if="$nic/config" bs=1 skip=4 count=2 2>/dev/null | od -An -to1 |
        awk '{ printf "\\%s\\%s", $1, $2 }'
}
cmd=$(cmdreg)
( while [ ! -e /tmp/toggle.stop ]; do
      printf '\000\000' | dd of="$nic/config" bs=1 seek=4 count=2 \
          conv=notrunc 2>/dev/null
      printf "$cmd" | dd of="$nic/config" bs=1 seek=4 count=2 \
          conv=notrunc 2>/dev/null
      echo x
  done > /tmp/toggles ) &
toggler=$!
pair map_race 300 "ibv_rc_pingpong -d pvrdma0 -g 0 -n 100000 -p 18531 -c" \
    "ibv_rc_pingpong -d pvrdma0 -g 0 -n 100000 -p 18531 -c 127.0.0.1"
touch /tmp/toggle.stop
wait $toggler
echo "map changes during the ping-pong: $(( $(wc -l < /tmp/toggles) * 2 ))"
[ "$(cmdreg)" = "$cmd" ] || fail "the NIC's command register was not restored"
[ "$(wc -l < /tmp/toggles)" -ge 50 ] || fail "the NIC was toggled too few times"
echo GUEST-OK
GUEST
"$PVRDMA_TOP/scripts/vm.sh" --name "$TEST_NAME" --timeout 600 --smp 2 \
    --add "$TESTS_TOP/tests/guest/pair.sh" --add "$TEST_OUT/guest.sh" \
    -- sh ./guest.sh || fail "see $PVRDMA_OUT/vm/$TEST_NAME.log"
grep -h "iters in\|map changes" "$PVRDMA_OUT/vm/$TEST_NAME.log" | sed 's/^/  measured: /'

# RECV doorbells (UAR offset 0 of a page, bit 31) in QEMU's trace $1, on
# the user contexts' pages (page 0 is the kernel's: its QP1 receives).
recv_doorbells() {
    grep -cE 'pvrdma_doorbell offset 0x[1-9a-f][0-9a-f]*000 val 0x[89a-f][0-9a-f]{7}$' "$1"
}
cat > "$TEST_OUT/repost.sh" <<'GUEST'
. ./pair.sh
pair rc_pingpong_repost 120 "ibv_rc_pingpong -d pvrdma0 -g 1 -r 16 -n 400 -c" \
    "ibv_rc_pingpong -d pvrdma0 -g 1 -r 16 -n 400 -c 127.0.0.1"
echo GUEST-OK
GUEST
for hint in on off; do
    "$PVRDMA_TOP/scripts/vm.sh" --name "$TEST_NAME-hint-$hint" --timeout 300 \
        --smp 2 -d ",x-rq-db-hint=$hint" \
        -q -d -q trace:pvrdma_doorbell -q -D -q "$TEST_OUT/trace-$hint.log" \
        --add "$TESTS_TOP/tests/guest/pair.sh" --add "$TEST_OUT/repost.sh" \
        -- sh ./repost.sh ||
        fail "see $PVRDMA_OUT/vm/$TEST_NAME-hint-$hint.log"
done
on=$(recv_doorbells "$TEST_OUT/trace-on.log")
off=$(recv_doorbells "$TEST_OUT/trace-off.log")
echo "  RECV doorbells of 2 x 400 reposts (rx depth 16): $on with the hint, $off without"
# Without: the 16 posted at the start and about one per message, per
# side.  With: the 16 (posted in INIT, before the device sets the hint)
# and the first repost in RTS; with iothread= the rest of that first
# batch of reposts may ring too, before the IOThread took the doorbell
# that sets the hint: at most 16 + 16 per side either way.
[ "$off" -ge 400 ] || fail "x-rq-db-hint=off: only $off RECV doorbells traced"
[ "$on" -le 64 ] || fail "$on RECV doorbells with the hint (at most 64 expected)"
pass "ibv_rc_pingpong (poll, events, 64 KiB), ibv_srq_pingpong, ibv_xsrq_pingpong (3 clients, events), ibv_ud_pingpong (poll, events at the MTU), a ping-pong while the memory map changes; RECV doorbells left out on the device's hint ($on against $off)"
