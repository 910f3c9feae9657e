# shellcheck shell=bash
# Host-side helpers of the migration tests (sourced after lib.sh; QMP
# sockets are $d/qmp-NAME.sock):
#   qmp SOCK CMD [ARGS-JSON]   one QMP command (tests/guest/qmp.py)
#   free_port [SOCK_DGRAM]     a free TCP (or UDP) port on 127.0.0.1
#   migrate_wait NAME          the status NAME's migration ended with
#   migrate_info NAME          its total time and downtime, for the log
#   wait_running NAME          until NAME's guest runs (false after 60 s)
# Two VMs, M (10.9.0.1, the one that moves) and P (10.9.0.2), on one
# fabric and one Ethernet link (QEMU's UDP multicast socket netdev on the
# loopback, which every QEMU M moves to hears too), each running
# ROLE=m|p PEER_IP=... SELF_IP=... sh ./guest.sh:
#   xmig_setup LINK FILE...    LINK shm (a fabric directory), tcp (P
#                              listens, M's QEMUs name it as fabric-peer)
#                              or netns (as tcp, but M's QEMUs run in two
#                              network namespaces in turn, each joined to
#                              P's by a veth pair: a move between hosts;
#                              the guests' Ethernet is then a unix
#                              datagram link whose M end each new QEMU
#                              takes over); FILEs are copied into both
#                              guests
#   xmig_start_p [ARGS...]     boot P (its vm.sh's PID in $pid)
#   xmig_start_m NAME HOSTPORT [ARGS...]
#                              boot a QEMU of M (or, with -incoming, one
#                              to move it to): the same command line each
#                              time, a QMP socket, return-path on, and a
#                              second NIC for the host (hostfwd HOSTPORT
#                              to the guest's port 7000)
#   xmig_tell HOSTPORT [WORD]  tell the guest of the newest M QEMU WORD
#                              (go) on its port 7000, through HOSTPORT
#   xmig_seen NAME RE COUNT    until NAME's console has COUNT lines
#                              matching RE ($ppid and $mpid must live)
#   xmig_cleanup               kill what is left of the guests
qmp() { python3 "$TESTS_TOP/tests/guest/qmp.py" "$@"; }

free_port() {
    python3 -c 'import socket, sys; s = socket.socket(type=getattr(socket, sys.argv[1])); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' "${1:-SOCK_STREAM}"
}

migrate_wait() {
    local st
    while :; do
        st=$(qmp "$d/qmp-$1.sock" query-migrate |
             python3 -c 'import json, sys; print(json.load(sys.stdin).get("status", "none"))')
        case $st in
        completed|failed|cancelled) echo "$st"; return ;;
        esac
        sleep 0.2
    done
}

migrate_info() {
    qmp "$d/qmp-$1.sock" query-migrate | python3 -c 'import json, sys; r = json.load(sys.stdin); print("total", r.get("total-time"), "ms, downtime", r.get("downtime"), "ms")'
}

# wait_running NAME: true once NAME's guest runs again (within 60 s).
# A source learns that its migration failed (query-migrate) a moment
# before it restarts its guest: one look at query-status could come in
# between.
wait_running() {
    local i
    for i in $(seq 600); do
        qmp "$d/qmp-$1.sock" query-status | grep -q '"running"' && return 0
        sleep 0.1
    done
    return 1
}

xmig_pids=() xmig_ns=()
xmig_cleanup() {
    local p
    for p in "${xmig_pids[@]}"; do
        pkill -KILL -s "$p" 2> /dev/null || true
    done
    for p in "${xmig_ns[@]}"; do
        ip netns del "$p" 2> /dev/null || true
    done
}

xmig_setup() {
    local link=$1 mport fport f
    shift
    trap xmig_cleanup EXIT
    xmig_adds=()
    for f in "$@"; do
        xmig_adds+=(--add "$f")
    done
    mport=$(free_port SOCK_DGRAM)
    rm -rf "$d/fab"
    mkdir -p "$d/fab"
    case $link in
    shm) xmig_fab_p=",fabric-path=$d/fab" xmig_fab_m=$xmig_fab_p ;;
    tcp) fport=$(free_port)
         xmig_fab_p=",fabric-listen=127.0.0.1:$fport"
         xmig_fab_m=",fabric-peer=127.0.0.1:$fport" ;;
    netns) fport=$(free_port)
         xmig_fab_p=",fabric-listen=0.0.0.0:$fport" xmig_fab_m=
         _xmig_netns 1 "$fport" && _xmig_netns 2 "$fport" ||
             fail "cannot make network namespaces and veth pairs (needs root)" ;;
    *) fail "fabric link: shm, tcp or netns, not $link" ;;
    esac
    xmig_link=$link xmig_next_ns=1
    xmig_lan="socket,mcast=239.255.9.$((RANDOM % 250 + 1)):$mport,localaddr=127.0.0.1"
}

# _xmig_netns I FPORT: namespace pvrdma-mI-PID, a veth to it from here
# (10.77.I.1 here, 10.77.I.2 there).
_xmig_netns() {
    local ns=pvrdma-m$1-$$ here=pvm$1h$$ there=pvm$1t$$
    xmig_ns+=("$ns")
    ip netns add "$ns" &&
        ip link add "$here" type veth peer name "$there" &&
        ip link set "$there" netns "$ns" &&
        ip addr add "10.77.$1.1/24" dev "$here" &&
        ip -n "$ns" addr add "10.77.$1.2/24" dev "$there" &&
        ip link set "$here" up && ip -n "$ns" link set "$there" up &&
        ip -n "$ns" link set lo up
}

# _xmig_start NAME ROLE IP MAC [vm.sh args...]: a guest in its own session.
_xmig_start() {
    local name=$1 role=$2 ip=$3 mac=$4 peer=10.9.0.1 fab=$xmig_fab_p
    local lan=$xmig_lan i
    local -a wrap=()
    shift 4
    [ "$ip" = 10.9.0.1 ] && peer=10.9.0.2 fab=$xmig_fab_m
    if [ "$xmig_link" = netns ]; then
        # A unix datagram link: each side binds its own path, sends to
        # the other's; a new M takes its path over (the old one's frames
        # are lost meanwhile, which TCP in the guests retransmits).
        if [ "$role" = m ]; then
            i=$xmig_next_ns
            xmig_next_ns=$((3 - i)) xmig_cur_ns=pvrdma-m$i-$$
            fab=",fabric-peer=10.77.$i.1:${xmig_fab_p##*:}"
            wrap=(ip netns exec "$xmig_cur_ns")
            rm -f "$d/lan-m.sock"
            lan="dgram,local.type=unix,local.path=$d/lan-m.sock,remote.type=unix,remote.path=$d/lan-p.sock"
        else
            lan="dgram,local.type=unix,local.path=$d/lan-p.sock,remote.type=unix,remote.path=$d/lan-m.sock"
        fi
    fi
    "${wrap[@]}" setsid "$PVRDMA_TOP/scripts/vm.sh" --name "xmig-$name" --timeout 900 \
        --ip "$ip/24" --mac "$mac" --net "$lan" -d "$fab" \
        "${xmig_adds[@]}" "$@" \
        -- "ROLE=$role PEER_IP=$peer SELF_IP=$ip sh ./guest.sh" \
        > "$d/$name.out" 2> "$d/$name.err" < /dev/null &
    pid=$!
    xmig_pids+=("$pid")
}

xmig_start_p() {
    _xmig_start p p 10.9.0.2 52:54:00:09:00:02 \
        -q -uuid -q 00000000-0000-4000-8000-0000000a0902 "$@"
}

xmig_start_m() {
    local name=$1 hport=$2
    shift 2
    rm -f "$d/qmp-$name.sock"
    _xmig_start "$name" m 10.9.0.1 52:54:00:09:00:01 \
        -q -uuid -q 00000000-0000-4000-8000-0000000a0901 \
        -q -netdev -q "user,id=host0,net=10.0.2.0/24,hostfwd=tcp:127.0.0.1:$hport-:7000" \
        -q -device -q virtio-net-pci,netdev=host0,romfile= \
        -q -qmp -q "unix:$d/qmp-$name.sock,server=on,wait=off" "$@"
    until [ -S "$d/qmp-$name.sock" ]; do
        kill -0 "$pid" 2> /dev/null || fail "QEMU $name did not start ($d/$name.err)"
        sleep 0.1
    done
    qmp "$d/qmp-$name.sock" migrate-set-capabilities \
        '{"capabilities": [{"capability": "return-path", "state": true}]}' \
        > /dev/null
}

xmig_tell() {
    local port=$1 word=${2:-go}
    local -a wrap=()
    [ "$xmig_link" = netns ] && wrap=(ip netns exec "$xmig_cur_ns")
    until "${wrap[@]}" bash -c "{ echo $word >&3; } 3<> /dev/tcp/127.0.0.1/$port" 2> /dev/null; do
        kill -0 "$mpid" 2> /dev/null || fail "guest M's QEMU stopped"
        sleep 0.1
    done
}

xmig_seen() {
    local log=$PVRDMA_OUT/vm/xmig-$1.log
    until [ "$(grep -cE "$2" "$log" 2> /dev/null)" -ge "$3" ]; do
        kill -0 "$ppid" 2> /dev/null || fail "guest P stopped (log: $PVRDMA_OUT/vm/xmig-p.log)"
        kill -0 "$mpid" 2> /dev/null || fail "guest M stopped (log: $log)"
        sleep 0.2
    done
}
