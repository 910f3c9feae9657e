# Guest-side helper (busybox sh), sourced by guest test scripts:
#   pair NAME TIMEOUT "SERVER CMD" "CLIENT CMD"
# starts the server in the background, waits until it listens, runs
# the client, then waits for the server; both must exit 0 within TIMEOUT
# seconds. Output of both is printed, prefixed.
fail() { echo "GUEST-FAIL: $*"; exit 1; }

# The endpoints listening now, one a line: TCP sockets (perftest's and
# the ping-pongs' out-of-band exchange, qperf, UCX) and RDMA CM ids
# (rping, cmatose, perftest -R), which a client's connection request
# finds or is rejected by (REJ "invalid service ID").
listeners() {
    echo none
    cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
        awk '$4 == "0A" { print "tcp", $2 }'
    rdma resource show cm_id 2>/dev/null |
        awk '/state LISTEN/ { for (i = 1; i < NF; i++)
                                  if ($i == "src-addr") print "cm", $(i + 1) }'
}

# wait_listening PID BEFORE: until a listener not in the file BEFORE (what
# listeners printed before the server started) appears, the server PID
# exits, or 60 s go by (a server that listens on nothing: it goes on).
# A fixed pause was too short for perftest -R between two QEMU guests
# on a loaded host: the client's REQ came first and was rejected.
wait_listening() {
    local pid=$1 before=$2 i=0
    while [ $i -lt 600 ] && kill -0 "$pid" 2>/dev/null; do
        listeners | grep -qvxFf "$before" && return 0
        sleep 0.1
        i=$((i + 1))
    done
    kill -0 "$pid" 2>/dev/null &&
        echo "(server $pid: no new listener after 60 s; going on)"
    return 0
}

# wait_for SECS CMD [ARGS]: until CMD (a command or a shell function)
# succeeds, polled every 0.1 s; false if SECS go by first. For state the
# kernel or a daemon reaches a little later (a port, a GID, a mapped
# library): a fixed pause loses that race on a loaded host.
wait_for() {
    local i=0 n=$(($1 * 10))
    shift
    until "$@"; do
        [ $i -lt $n ] || return 1
        sleep 0.1
        i=$((i + 1))
    done
}

# not CMD [ARGS]: CMD's status inverted (for wait_for).
not() { ! "$@"; }

# start_server NAME LIMIT CMD: CMD in the background (output in
# /tmp/NAME.srv), its pid in $spid once it listens, and no sooner than
# 2 s (what every pair was given before: a server may listen before it
# has posted its receives).
start_server() {
    listeners > "/tmp/$1.before"
    timeout "$2" sh -c "$3" > "/tmp/$1.srv" 2>&1 &
    spid=$!
    sleep 2
    wait_listening "$spid" "/tmp/$1.before"
}

# perftest 4.5 with -R (Debian 12's 4.5-0.17) connects twice: an RDMA CM
# connection for its parameter exchange, then, right after the exchange,
# the test's own; the server listens for the second only once its side of
# the exchange is done, so the client's REQ can come first and be rejected
# with "invalid service ID" (IB CM reason 8). perftest means to retry that
# (ten tries), but its retry reuses the destroyed ids and crashes (fixed
# upstream in perftest 26.04, commit "Fix crashes and logical flaws in
# RDMA CM connection retry"). The race is the tool's: a pair with
# AGAIN_RE=$CM_RACE_RE runs again (three tries in all) when the client
# failed that way; any other failure fails at once.
# shellcheck disable=SC2034 # (used by the scripts that source this)
CM_RACE_RE='Event: RDMA_CM_EVENT_REJECTED; error: 8\.'
AGAIN_TRIES=3

# again NAME TRY CRC: should a failed client (status CRC, output in
# /tmp/NAME.cli) of try TRY run again?
again() {
    [ "$3" -ne 0 ] && [ -n "${AGAIN_RE:-}" ] && [ "$2" -lt "$AGAIN_TRIES" ] &&
        grep -qE "$AGAIN_RE" "/tmp/$1.cli" || return 1
    echo "=== $1: the client met the tool's own race ($AGAIN_RE); again"
}

pair() {
    local name=$1 limit=$2 srv=$3 cli=$4 spid crc src try=0
    while :; do
        try=$((try + 1))
        echo "=== $name"
        echo "server: $srv"
        echo "client: $cli"
        start_server "$name" "$limit" "$srv"
        timeout "$limit" sh -c "$cli" > "/tmp/$name.cli" 2>&1
        crc=$?
        if again "$name" $try $crc; then
            # its server waits for a connection that will not come
            kill "$spid" 2>/dev/null
            wait "$spid"
            sed "s/^/[$name server] /" "/tmp/$name.srv"
            sed "s/^/[$name client] /" "/tmp/$name.cli"
            continue
        fi
        wait "$spid"
        src=$?
        sed "s/^/[$name server] /" "/tmp/$name.srv"
        sed "s/^/[$name client] /" "/tmp/$name.cli"
        [ $src -eq 0 ] || fail "$name: server exited with $src"
        [ $crc -eq 0 ] || fail "$name: client exited with $crc"
        echo "=== $name: OK"
        return 0
    done
}
