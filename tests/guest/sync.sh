# Guest-side helpers (busybox sh) for tests that run in two guests at once
# (tests/guest/vmpair.sh), sourced by their guest scripts:
#   sync_signal TAG [TIMEOUT]        let the peer's `sync_wait ... TAG` through
#   sync_wait PEER_IP TAG [TIMEOUT]  wait for the peer's `sync_signal TAG`
#   xpair_server NAME TIMEOUT CMD    (one guest) start CMD in the background,
#                                    give it 2 s to listen, signal NAME, wait
#                                    for CMD (it must exit 0 within TIMEOUT),
#                                    then for the client's NAME-done
#   xpair_client NAME TIMEOUT CMD    (the other) wait for NAME from $PEER_IP,
#                                    run CMD (it must exit 0 within TIMEOUT),
#                                    signal NAME-done
#   sync_wait_any PEER_IP TIMEOUT TAG...  sync_wait for any of the TAGs
#                                    (the one signalled in $sync_got)
# With AGAIN_RE set on both sides (pair.sh: a tool's own race), a client
# that failed that way signals NAME-again instead, the server side stops
# its server, and the pair runs again.
# The two sides of a barrier or pair use the same TAG (NAME; a word of
# letters, digits, - _ .) and run in the same order. TIMEOUT (default
# $SYNC_TIMEOUT, 120 s) also covers the peer booting later; a barrier or
# command that misses it fails the guest script, as pair.sh does.
# vmpair.sh puts PEER_IP, SELF_IP and VMPAIR_ROLE (a or b) in the
# environment, so CMD may use $PEER_IP.
#
# A guest must not finish while its peer still needs it: its QEMU goes
# away with whatever its TCP stack had not yet delivered (a server's last
# data, the FIN), and the peer waits for it forever. Hence NAME-done, and
# a script that ends with anything else should end with a barrier.
#
# A barrier is one TCP exchange on port $SYNC_PORT (7400) of eth0: the
# signalling side listens (busybox `nc -l -w`, one connection), sends TAG
# and returns once "ok TAG" comes back; the waiting side connects until it
# gets through (refused or unreachable while the peer boots: retried every
# second), answers once it has TAG, and returns when the signaller closes
# (or 5 s later: the signaller's guest may be gone by then). A mismatch
# (the peer at another barrier) fails both sides at once.
#
# The guest's busybox (1.35) has the small nc: -l -p PORT -w SEC -e PROG
# [ARGS], no -q, -z, -u or -N. It exits 0 as soon as the socket reaches
# EOF, even with its own stdin unsent; its stdin at EOF half-closes the
# socket. So `nc -l -p P < FILE` to a client with empty stdin sends only
# the first 2 KiB, and both exit 0. To send a file, let the server run
# `nc -l -p P -e cat FILE` and the client `nc $PEER_IP P </dev/null > FILE`.
# shellcheck shell=dash

# start_server (a server is let go once it listens) comes from pair.sh,
# which tests/guest/vmpair.sh puts beside this file.
. ./pair.sh

SYNC_PORT=${SYNC_PORT:-7400}
SYNC_TIMEOUT=${SYNC_TIMEOUT:-120}

fail() { echo "GUEST-FAIL: $*"; exit 1; }

sync_signal() {
    local tag=$1 limit=${2:-$SYNC_TIMEOUT} end left rc
    end=$(($(date +%s) + limit))
    while :; do
        left=$((end - $(date +%s)))
        [ "$left" -gt 0 ] ||
            fail "sync_signal $tag: the peer did not come within ${limit}s"
        # Status 3: the peer answered for another tag.
        rc=0
        # shellcheck disable=SC2016 # expanded by the handler's sh
        nc -l -p "$SYNC_PORT" -w "$left" -e sh -c '
            echo "$1"
            read -r -t 10 r || exit 1
            [ "$r" = "ok $1" ] && exit 0
            echo "sync: the peer answered \"$r\"" >&2
            exit 3' sync "$tag" || rc=$?
        case $rc in
        0) echo "sync: signalled $tag"; return 0 ;;
        3) fail "sync_signal $tag: the peer waits at another barrier" ;;
        esac
        # the peer went away mid-exchange, or the port was busy: again
        sleep 1
    done
}

sync_wait() {
    sync_wait_any "$1" "${3:-$SYNC_TIMEOUT}" "$2"
}

# sync_wait_any PEER LIMIT TAG...: sync_wait for whichever of the TAGs the
# peer signals; the one it signalled is left in $sync_got.
sync_wait_any() {
    local peer=$1 limit=$2 end got file=/tmp/sync.$3.got
    shift 2
    end=$(($(date +%s) + limit))
    while :; do
        rm -f "$file"
        # Answer only once the tag is here: a signaller that has the answer
        # knows we are through. Then give its close 5 s: the signaller
        # returns on our answer, and its guest may be gone before the FIN.
        # shellcheck disable=SC2016 # expanded by the handler's sh
        nc -w 5 "$peer" "$SYNC_PORT" -e sh -c '
            read -r -t 10 t || exit 1
            echo "$t" > "$1"
            shift
            # (another tag: answered with ours, the signaller fails too)
            a=$1
            for w; do [ "$t" = "$w" ] && a=$w; done
            echo "ok $a"
            read -r -t 5 t
            exit 0' sync "$file" "$@" 2>/tmp/sync.err
        got=$(cat "$file" 2>/dev/null)
        if [ -n "$got" ]; then
            for sync_got; do
                [ "$got" = "$sync_got" ] || continue
                echo "sync: $peer signalled $got"
                return 0
            done
            fail "sync_wait $*: $peer signalled \"$got\" instead"
        fi
        [ "$(date +%s)" -lt "$end" ] ||
            fail "sync_wait $*: no signal from $peer within ${limit}s" \
                "(last: $(cat /tmp/sync.err))"
        sleep 1
    done
}

# _sync_running PID: is our child PID still running (not exited, not a
# zombie waiting to be reaped)?
_sync_running() {
    local st
    st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    st=${st##*) }
    [ "${st%% *}" != Z ]
}

xpair_server() {
    local name=$1 limit=$2 cmd=$3 spid src how verdict=
    [ -n "${PEER_IP:-}" ] || fail "xpair_server $name: PEER_IP is not set"
    while :; do
        echo "=== $name (server here, client on the peer)"
        echo "server: $cmd"
        start_server "$name" "$limit" "$cmd"     # (pair.sh)
        # A server that already stopped (say, could not bind) is reported
        # now, without a signal, rather than after the client's attempts.
        if ! _sync_running "$spid"; then
            how=early
        elif (sync_signal "$name" "$limit"); then
            how=signalled
        else
            how=nopeer
            kill "$spid" 2>/dev/null
        fi
        # With AGAIN_RE (pair.sh) the client's verdict comes first: after
        # the tool's own race the server waits for a connection that will
        # not come, and the case runs again.
        if [ $how = signalled ] && [ -n "${AGAIN_RE:-}" ]; then
            sync_wait_any "$PEER_IP" "$limit" "$name-done" "$name-again"
            verdict=$sync_got
            [ "$verdict" = "$name-again" ] && kill "$spid" 2>/dev/null
        fi
        src=0
        wait "$spid" || src=$?
        sed "s/^/[$name server] /" "/tmp/$name.srv"
        [ "$verdict" = "$name-again" ] || break
        verdict=
    done
    case $how in
    early) fail "$name: server exited with $src before the client came" ;;
    nopeer) fail "$name: the client did not come" ;;
    esac
    [ "$src" -eq 0 ] || fail "$name: server exited with $src"
    [ -n "$verdict" ] || sync_wait "$PEER_IP" "$name-done" "$limit"
    echo "=== $name: server OK"
}

xpair_client() {
    local name=$1 limit=$2 cmd=$3 crc try=0
    [ -n "${PEER_IP:-}" ] || fail "xpair_client $name: PEER_IP is not set"
    while :; do
        try=$((try + 1))
        echo "=== $name (client here, server on $PEER_IP)"
        echo "client: $cmd"
        sync_wait "$PEER_IP" "$name" "$limit"
        crc=0
        timeout "$limit" sh -c "$cmd" > "/tmp/$name.cli" 2>&1 || crc=$?
        sed "s/^/[$name client] /" "/tmp/$name.cli"
        again "$name" $try $crc || break      # (pair.sh)
        sync_signal "$name-again" "$limit"
    done
    [ "$crc" -eq 0 ] || fail "$name: client exited with $crc"
    sync_signal "$name-done" "$limit"
    echo "=== $name: client OK"
}
