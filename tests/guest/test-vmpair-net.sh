#!/usr/bin/env bash
# Two guests on one link (tests/guest/vmpair.sh), checking the harness and
# the guest barriers (tests/guest/sync.sh): B pings A, then A serves a
# 1 MiB random file over busybox nc (xpair_server/xpair_client) and B
# checks its MD5.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/vmpair.sh"

# The file goes to A only; the sum it must have, to B only.
head -c 1048576 /dev/urandom > "$TEST_OUT/blob"
printf '%s  /tmp/blob\n' "$(md5sum < "$TEST_OUT/blob" | cut -d' ' -f1)" \
    > "$TEST_OUT/blob.md5"

cat > "$TEST_OUT/guest-a.sh" <<'GUEST'
. ./sync.sh
sync_signal up          # B pings from now on
xpair_server blob 120 "nc -l -p 5001 -e cat /run/files/blob"
echo GUEST-OK
GUEST
cat > "$TEST_OUT/guest-b.sh" <<'GUEST'
. ./sync.sh
sync_wait "$PEER_IP" up
ping -c 3 "$PEER_IP" || fail "ping $PEER_IP"
# Empty stdin: nc half-closes at once; A's `cat` does not read (sync.sh).
xpair_client blob 120 "time nc $PEER_IP 5001 </dev/null > /tmp/blob"
echo "received $(wc -c < /tmp/blob) bytes"
md5sum -c blob.md5 || fail "blob: MD5 differs"
echo GUEST-OK
GUEST
vmpair_run "$TEST_NAME" 300 "$TEST_OUT/guest-a.sh" "$TEST_OUT/guest-b.sh" \
    --a-arg --add --a-arg "$TEST_OUT/blob" \
    --b-arg --add --b-arg "$TEST_OUT/blob.md5"
pass "ping from B to A; 1 MiB from A to B over busybox nc, MD5 checked on B"
