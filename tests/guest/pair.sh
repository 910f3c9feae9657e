# Guest-side helper (busybox sh), sourced by guest test scripts:
#   pair NAME TIMEOUT "SERVER CMD" "CLIENT CMD"
# starts the server in the background, gives it a moment to listen, runs
# the client, then waits for the server; both must exit 0 within TIMEOUT
# seconds. Output of both is printed, prefixed.
fail() { echo "GUEST-FAIL: $*"; exit 1; }

pair() {
    local name=$1 limit=$2 srv=$3 cli=$4 spid crc src
    echo "=== $name"
    echo "server: $srv"
    echo "client: $cli"
    timeout "$limit" sh -c "$srv" > "/tmp/$name.srv" 2>&1 &
    spid=$!
    sleep 2
    timeout "$limit" sh -c "$cli" > "/tmp/$name.cli" 2>&1
    crc=$?
    wait $spid
    src=$?
    sed "s/^/[$name server] /" "/tmp/$name.srv"
    sed "s/^/[$name client] /" "/tmp/$name.cli"
    [ $src -eq 0 ] || fail "$name: server exited with $src"
    [ $crc -eq 0 ] || fail "$name: client exited with $crc"
    echo "=== $name: OK"
}
