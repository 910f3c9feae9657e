# shellcheck shell=dash
# The soak's guest side (tests/soak/soak.sh), busybox sh. ROLE (a, b or
# c), SOAK_SECS, PEER_IP and SELF_IP come from the command line.
#   a: the client of every round with b until SOAK_SECS are over; every
#      5th round it unloads and reloads pvrdma.ko first;
#   b: serves a's rounds and, in a loop of its own (SYNC_PORT 7401), each
#      life of c;
#   c: boots, runs a verified ping-pong and rping -V with b, and ends.
# a and b wait on ttyS1 (the host's control socket) at the start and at
# the end, with nothing of theirs running, while the host reads what
# their devices hold (the idle counts must be the same at both ends).
. ./sync.sh

# A client that found no server yet (a listener of the other loop in b
# let start_server go early) runs again (pair.sh, again()).
AGAIN_RE="Couldn't connect to|REJECTED|UNREACHABLE|connect error"
SYNC_TIMEOUT=600
ROUNDS_LOG=/tmp/soak.rounds

port_active() { ibv_devinfo -d pvrdma0 2> /dev/null | grep -q PORT_ACTIVE; }
gid_ready() {
    [ -n "$(cat /sys/class/infiniband/pvrdma0/ports/1/gids/1 2> /dev/null |
            grep -v '^0000:0000:0000:0000:0000:0000:0000:0000$')" ]
}
ready() {
    wait_for 60 port_active || fail "pvrdma0 never became ACTIVE"
    wait_for 60 gid_ready || fail "pvrdma0 has no RoCE v2 GID"
}
# host_go WHAT: tell the host we are idle (it reads the device) and wait
# for its "go" on ttyS1.
host_go() {
    local line
    echo "SOAK-IDLE $1"
    read -r line <&3 || fail "the host's control channel closed"
    case $line in go*) ;; *) fail "control channel: '$line'" ;; esac
}
check_dmesg() {
    if dmesg | grep -E "BUG|Oops|WARNING: |Call Trace|hung_task|blocked for more than|left at removal"; then
        fail "the kernel reported a problem (above)"
    fi
}

case $ROLE in
a|b)
    exec 3< /dev/ttyS1
    stty -F /dev/ttyS1 raw -echo || fail "stty ttyS1"
    ready
    host_go start ;;
c)
    ready ;;
esac

sizes="4096 65536 1048576"
case $ROLE in
a)
    i=0 start=$(cut -d. -f1 /proc/uptime)
    while [ $(($(cut -d. -f1 /proc/uptime) - start)) -lt "$SOAK_SECS" ]; do
        i=$((i + 1))
        if [ $((i % 5)) = 0 ]; then
            rmmod pvrdma || fail "round $i: rmmod pvrdma"
            modprobe pvrdma || fail "round $i: modprobe pvrdma"
            ready
            echo "SOAK-RELOAD $i"
        fi
        s=$(echo $sizes | cut -d' ' -f$((i % 3 + 1)))
        sync_signal "round-$i"
        xpair_client "pp-$i" 300 "ibv_rc_pingpong -d pvrdma0 -g 1 -s $s -n 300 -c $PEER_IP"
        xpair_client "ud-$i" 300 "ibv_ud_pingpong -d pvrdma0 -g 1 -s 1024 -n 300 -c $PEER_IP"
        xpair_client "srq-$i" 300 "ibv_srq_pingpong -d pvrdma0 -g 1 -q 4 -n 100 -c $PEER_IP"
        xpair_client "rping-$i" 300 "rping -c -a $PEER_IP -C 100 -S 4000 -V -v > /tmp/rping.out && [ \$(grep -c '^ping data: ' /tmp/rping.out) = 100 ]"
        if [ $((i % 3)) = 1 ]; then
            xpair_client "rcv-$i" 600 "./rc_verify -d pvrdma0 -g 1 -G 1 -P -c $PEER_IP > /tmp/rcv.out; r=\$?; tail -n 3 /tmp/rcv.out; [ \$r = 0 ] && grep -q 'RESULT passed=[1-9][0-9]* failed=0' /tmp/rcv.out"
        fi
        # Loopback within this VM: MRs of another size, new QPs.
        pair "lo-$i" 300 "ibv_rc_pingpong -d pvrdma0 -g 1 -s $s -n 200 -c -p 18530" \
            "ibv_rc_pingpong -d pvrdma0 -g 1 -s $s -n 200 -c -p 18530 127.0.0.1"
        echo "SOAK-ROUND $i ok"
        check_dmesg
    done
    sync_signal end
    echo "SOAK-ROUNDS $i"
    host_go end ;;
b)
    # c's lives, one after another, each from its hello to its bye.
    (
        SYNC_PORT=7401 PEER_IP=$C_IP
        k=0
        while :; do
            sync_wait "$C_IP" hello 100000
            k=$((k + 1))
            xpair_server "c-pp" 300 "ibv_rc_pingpong -d pvrdma0 -g 1 -s 65536 -n 300 -c -p 18600"
            xpair_server "c-rping" 300 "rping -s -a $SELF_IP -p 18601 -C 50 -S 4000 -v"
            echo "SOAK-C-LIFE $k ok"
        done
    ) > /tmp/c-loop.out 2>&1 &
    cloop=$!
    i=0
    while :; do
        i=$((i + 1))
        sync_wait_any "$PEER_IP" 600 "round-$i" end
        [ "$sync_got" = end ] && break
        s=$(echo $sizes | cut -d' ' -f$((i % 3 + 1)))
        xpair_server "pp-$i" 300 "ibv_rc_pingpong -d pvrdma0 -g 1 -s $s -n 300 -c"
        xpair_server "ud-$i" 300 "ibv_ud_pingpong -d pvrdma0 -g 1 -s 1024 -n 300 -c"
        xpair_server "srq-$i" 300 "ibv_srq_pingpong -d pvrdma0 -g 1 -q 4 -n 100 -c"
        xpair_server "rping-$i" 300 "rping -s -a $SELF_IP -C 100 -S 4000 -v"
        if [ $((i % 3)) = 1 ]; then
            xpair_server "rcv-$i" 600 "./rc_verify -s"
        fi
        check_dmesg
        # c's loop must not have failed meanwhile
        kill -0 $cloop 2> /dev/null || { cat /tmp/c-loop.out; fail "the loop serving c ended"; }
    done
    # The host starts no c after the time is up and waits for the last
    # one: its loop is back at its hello.
    kill $cloop 2> /dev/null
    pkill -f "nc -w 5 $C_IP" 2> /dev/null
    wait $cloop 2> /dev/null
    grep -q GUEST-FAIL /tmp/c-loop.out && { cat /tmp/c-loop.out; fail "the loop serving c failed"; }
    grep "^SOAK-C-LIFE" /tmp/c-loop.out
    check_dmesg
    host_go end ;;
c)
    SYNC_PORT=7401
    sync_signal hello 300
    xpair_client "c-pp" 300 "ibv_rc_pingpong -d pvrdma0 -g 1 -s 65536 -n 300 -c -p 18600 $PEER_IP"
    xpair_client "c-rping" 300 "rping -c -a $PEER_IP -p 18601 -C 50 -S 4000 -V -v > /tmp/rping.out && [ \$(grep -c '^ping data: ' /tmp/rping.out) = 50 ]"
    check_dmesg ;;
esac
echo SOAK-GUEST-OK
