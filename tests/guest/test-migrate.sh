#!/usr/bin/env bash
# Live migration of one VM with RDMA running (docs/migration.md): the guest
# streams RDMA WRITEs between two of its processes (tests/guest/progs/
# ev_bw.c) and runs verified ibv_rc_pingpong rounds (-c) one after the
# other, while the host moves it to a second QEMU started with -incoming
# (QMP `migrate` over a unix socket). After the switch the host tells the
# guest over its user-mode network (hostfwd on the destination); only then
# does the stream end (ITERS more WRITEs, the last bytes checked by its
# server) and two more rounds run: the traffic spans the switch by
# construction, whatever the timing. Every process must succeed, with no
# error completion and no async event (a failure or an event makes the
# tools exit non-zero).
. "$(dirname "$0")/lib.sh"

d=$TEST_OUT
rm -f "$d"/*.sock "$d"/go.out
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
pa=$(free_port) pb=$(free_port)
evbw=$(build_prog ev_bw)
qmp() { python3 "$TESTS_TOP/tests/guest/qmp.py" "$@"; }

cat > "$d/guest.sh" <<'GUEST'
# Told by the host (port 7000) once the VM runs on the destination.
nc -l -p 7000 > /tmp/go 2>/dev/null &
./ev_bw -d pvrdma0 -g 1 -s 65536 -n 2000 -p 18531 > /tmp/ev.s 2>&1 &
es=$!
./ev_bw -d pvrdma0 -g 1 -s 65536 -n 2000 -p 18531 -f /tmp/go.seen \
    127.0.0.1 > /tmp/ev.c 2>&1 &
ec=$!
round() {
    port=$((18600 + $1 % 200))
    ibv_rc_pingpong -d pvrdma0 -g 1 -s 4096 -n 500 -c -p $port \
        > /tmp/pp.s 2>&1 &
    sp=$!
    i=0
    until ibv_rc_pingpong -d pvrdma0 -g 1 -s 4096 -n 500 -c -p $port \
            127.0.0.1 > /tmp/pp.c 2>&1; do
        # the server may not listen yet: only "connect" failures retry
        grep -q "Couldn't connect" /tmp/pp.c || { cat /tmp/pp.c /tmp/pp.s; return 1; }
        i=$((i + 1)); [ $i -lt 100 ] || { cat /tmp/pp.c; return 1; }
        sleep 0.1
    done
    wait $sp || { cat /tmp/pp.s; return 1; }
}
echo MIGRATE-NOW
r=0
while ! [ -s /tmp/go ]; do
    r=$((r + 1))
    round $r || { echo "FAIL: ping-pong round $r"; exit 1; }
done
echo "migrated after $r rounds"
touch /tmp/go.seen
round 1000 && round 1001 || { echo "FAIL: ping-pong after the switch"; exit 1; }
wait $ec || { cat /tmp/ev.c /tmp/ev.s; echo "FAIL: WRITE stream"; exit 1; }
wait $es || { cat /tmp/ev.s; echo "FAIL: WRITE stream server"; exit 1; }
cat /tmp/ev.c
echo MIGRATE-OK
GUEST

common=(--smp 2 --timeout 900 --add "$evbw" --add "$d/guest.sh")
"$PVRDMA_TOP/scripts/vm.sh" --name mig-src "${common[@]}" \
    --net "user,hostfwd=tcp:127.0.0.1:$pa-:7000" \
    -q -qmp -q "unix:$d/qmp-src.sock,server=on,wait=off" \
    -- sh ./guest.sh > /dev/null 2>&1 &
src=$!
"$PVRDMA_TOP/scripts/vm.sh" --name mig-dst "${common[@]}" \
    --net "user,hostfwd=tcp:127.0.0.1:$pb-:7000" \
    -q -qmp -q "unix:$d/qmp-dst.sock,server=on,wait=off" \
    -q -incoming -q "unix:$d/mig.sock" \
    -- sh ./guest.sh > /dev/null 2>&1 &
dst=$!
cleanup() {
    kill "$src" "$dst" 2> /dev/null || true
}
trap cleanup EXIT
srclog=$PVRDMA_OUT/vm/mig-src.log dstlog=$PVRDMA_OUT/vm/mig-dst.log

# The traffic runs: move the VM.
until grep -q '^MIGRATE-NOW' "$srclog" 2> /dev/null; do
    kill -0 "$src" 2> /dev/null || fail "the source guest stopped before the migration (log: $srclog)"
    sleep 0.2
done
until [ -S "$d/mig.sock" ]; do
    kill -0 "$dst" 2> /dev/null || fail "the destination QEMU did not start (log: $dstlog)"
    sleep 0.1
done
qmp "$d/qmp-src.sock" migrate "{\"uri\": \"unix:$d/mig.sock\"}" > /dev/null ||
    fail "migrate was refused"
while :; do
    st=$(qmp "$d/qmp-src.sock" query-migrate |
         python3 -c 'import json, sys; r = json.load(sys.stdin); print(r.get("status", "none"), r.get("error-desc", ""))')
    case $st in
    completed*) break ;;
    failed*|cancelled*) fail "migration $st (source log: $srclog, destination log: $dstlog)" ;;
    esac
    sleep 0.2
done
log "migration completed: $(qmp "$d/qmp-src.sock" query-migrate | python3 -c 'import json, sys; r = json.load(sys.stdin); print("total", r.get("total-time"), "ms, downtime", r.get("downtime"), "ms")')"
qmp "$d/qmp-src.sock" quit > /dev/null || true
wait "$src" || true
# The guest now runs on the destination: tell it.
send_go() { { echo go >&3; } 3<> "/dev/tcp/127.0.0.1/$pb"; }
until send_go 2> /dev/null; do
    kill -0 "$dst" 2> /dev/null || fail "the destination stopped (log: $dstlog)"
    sleep 0.2
done
rc=0
wait "$dst" || rc=$?
trap - EXIT
[ "$rc" = 0 ] || fail "the guest failed after the migration (status $rc; log: $dstlog)"
grep -q '^MIGRATE-OK' "$dstlog" || fail "no MIGRATE-OK in $dstlog"
rounds=$(sed -n 's/^migrated after \([0-9]*\) rounds$/\1/p' "$dstlog")
grep '^ev_bw: WRITE' "$dstlog" || fail "no stream result in $dstlog"
pass "one VM moved to another QEMU while it streamed RDMA WRITEs (data checked) and ran $rounds verified ping-pong rounds; both went on after the switch"
