# shellcheck shell=dash
# Guest side of `make bench` (tests/bench/bench.sh), busybox sh: measures
# one transport with perftest, rdma-core's ping-pong or qperf and prints
# one line per measurement,
#
#   R SETUP TRANSPORT TEST SIZE REP VALUE UNIT
#
# (latencies in usec, perftest's typical; bandwidths in MB/s = 10^6 B/s;
# message rates in Mmsg/s).  Sourced, then
#
#   bench_rdma SETUP TRANSPORT DEVICE GID_INDEX
#   bench_many_qps SETUP QPS
#   bench_tcp SETUP
#
# SETUP is "vm" (server and client in this guest, on 127.0.0.1), or "2vm",
# "2tcp" or "2tls" (tests/guest/vmpair.sh: guest A serves, guest B measures and
# prints; sync.sh pairs each run).  bench_rdma needs ev_bw
# (tests/guest/progs/ev_bw.c) in the current directory.  BENCH_REPS (3) rounds; BENCH_QUICK=1 keeps one
# size of each series and one round (a smoke run).  BENCH_MEMCPY_PORT (in
# "vm", and guest B of "2vm" once bench_host_nic has set up its second
# NIC): the host's memcpy server (tests/bench/memcpy_bw.c --serve),
# reached through the user-mode network's gateway, measures its memcpy of
# the same size right after each of this device's bandwidth runs, while
# the guests wait ("R SETUP host memcpy_write_bw SIZE REP VALUE MB/s").

BENCH_REPS=${BENCH_REPS:-3}
LAT_SIZES="2 64 1024 4096 65536"
BW_SIZES="64 4096 65536 1048576 4194304"
if [ "${BENCH_QUICK:-0}" = 1 ]; then
    BENCH_REPS=1
    LAT_SIZES=64
    BW_SIZES=65536
fi
# BENCH_LAT_SIZES / BENCH_BW_SIZES: these sizes only (a setup measured
# at a few points, as the TLS link beside the plain one).
LAT_SIZES=${BENCH_LAT_SIZES:-$LAT_SIZES}
BW_SIZES=${BENCH_BW_SIZES:-$BW_SIZES}
_bench_seq=0
# _bench_want SERIES: is it to be run?
_bench_want() {
    [ -z "${BENCH_SERIES:-}" ] && return 0
    case " $BENCH_SERIES " in *" $1 "*) return 0 ;; esac
    return 1
}

# What the pair running now said (xpair_client/xpair_server): shown if
# it fails the script (their fail exits from inside, its message in there).
_bench_said=
trap '[ -z "$_bench_said" ] || cat "$_bench_said"' EXIT

# _bench_run SETUP SERVER_CMD CLIENT_CMD OUT: the pair once (shell
# commands; @PEER@ in CLIENT_CMD is the server's address); the client's
# output in OUT.  Between two VMs only guest B's OUT is filled.
_bench_run() {
    local setup=$1 srv=$2 cli=$3 out=$4 pid
    _bench_seq=$((_bench_seq + 1))
    : > "$out"
    if [ "$setup" = vm ]; then
        cli=$(echo "$cli" | sed "s/@PEER@/127.0.0.1/g")
        sh -c "$srv" > /tmp/bench-srv.out 2>&1 &
        pid=$!
        sleep 1
        timeout 600 sh -c "$cli" > "$out" 2>&1 ||
            { cat "$out" /tmp/bench-srv.out; fail "bench: $cli failed"; }
        wait $pid || { cat /tmp/bench-srv.out; fail "bench: $srv failed"; }
    elif [ "$VMPAIR_ROLE" = a ]; then
        _bench_said=/tmp/bench-pair.out
        xpair_server "b$_bench_seq" 600 "$srv" > "$_bench_said"
        _bench_said=
    else
        cli=$(echo "$cli" | sed "s/@PEER@/$PEER_IP/g")
        # (it fails the script itself if the client fails)
        _bench_said=/tmp/bench-pair.out
        xpair_client "b$_bench_seq" 600 "$cli" > "$_bench_said"
        _bench_said=
        cp "/tmp/b$_bench_seq.cli" "$out"
    fi
}

# bench_host_nic MAC: give the NIC with that MAC (a user-mode network
# beside the pair's own link) the address that reaches the host's memcpy
# server through its gateway, 10.0.2.2.
bench_host_nic() {
    local i
    for i in /sys/class/net/*; do
        [ "$(cat "$i/address")" = "$1" ] || continue
        ip link set "${i##*/}" up &&
            ip addr add 10.0.2.15/24 dev "${i##*/}" && return 0
        fail "bench: cannot set up ${i##*/} for the host's memcpy server"
    done
    fail "bench: no NIC with MAC $1 (the user-mode network to the host)"
}

# _bench_emit SETUP TRANSPORT TEST SIZE REP VALUE UNIT (guest B or "vm").
# A pvrdma point without a result fails the run; another transport's is
# left out of that round (see _bench_cmd).
_bench_emit() {
    [ "$1" != vm ] && [ "$VMPAIR_ROLE" = a ] && return 0
    if [ -z "$6" ]; then
        [ "$2" != pvrdma ] || fail "bench: no result for $2 $3 $4"
        echo "bench: no result for $2 $3 $4 in round $5: left out"
        return 0
    fi
    echo "R $*"
}

# _bench_memcpy SETUP TEST SIZE REP: the host's memcpy beside a run (in
# one VM, or guest B of two, which prints the results).
_bench_memcpy() {
    local v
    [ -n "${BENCH_MEMCPY_PORT:-}" ] || return 0
    [ "$1" = vm ] || [ "${VMPAIR_ROLE:-}" = b ] || return 0
    v=$(echo "$3" | nc -w 60 10.0.2.2 "$BENCH_MEMCPY_PORT")
    case $v in
    [0-9]*) echo "R $1 host memcpy_$2 $3 $4 $v MB/s" ;;
    *) fail "bench: the host's memcpy server (port $BENCH_MEMCPY_PORT) answered '$v'" ;;
    esac
}

# _bench_cmd TRANSPORT CMD: CMD as the pair runs it.  Soft-RoCE between
# two VMs has hung a perftest pair for good (a message lost on the
# emulated link, never recovered): its commands get 120 s (its slowest
# point takes about 10) and always succeed, so that the point is only
# missing; pvrdma's commands are run as they are.
_bench_cmd() {
    if [ "$1" = pvrdma ]; then
        echo "$2"
    else
        echo "timeout 120 $2; true"
    fi
}

# Iterations for a run of SIZE bytes over TRANSPORT in SETUP.  Soft-RoCE:
# about 64 MiB, 20 to 1000 (it moves about 100 MB/s).  pvrdma: enough to
# leave TCG's start-up behind (the first messages run guest code not yet
# translated; 20000 64-byte messages gave 10-25% less than 10^6) and to
# last well over a host scheduler tick at 50 GB/s (2048 reads of 1 MiB,
# 40 ms, spread 44-54 GB/s in one boot where 32768 gave 53-55): about
# 32 GiB in one VM, 1000 to 10^6 iterations, and 8 GiB between two VMs,
# 1000 to 10^5 (up to about a second per run in one VM, three between
# two).
_bench_iters() {
    local size=$1 tr=$2 setup=$3 bytes=67108864 lo=20 hi=1000 n
    if [ "$tr" = pvrdma ]; then
        lo=1000 bytes=34359738368 hi=1000000
        [ "$setup" = vm ] || bytes=8589934592 hi=100000
    fi
    n=$((bytes / size))
    [ "$n" -gt "$hi" ] && n=$hi
    [ "$n" -lt "$lo" ] && n=$lo
    echo "$n"
}

bench_rdma() {
    local setup=$1 tr=$2 dev=$3 gidx=$4 o rep t s n out=/tmp/bench.out
    o="-d $dev -x $gidx -F"
    for rep in $(seq "$BENCH_REPS"); do
        for t in send_lat write_lat read_lat; do
            _bench_want "$t" || continue
            for s in $LAT_SIZES; do
                _bench_run "$setup" \
                    "$(_bench_cmd "$tr" "ib_$t $o -s $s -n 1000")" \
                    "$(_bench_cmd "$tr" "ib_$t $o -s $s -n 1000 @PEER@")" \
                    "$out"
                _bench_emit "$setup" "$tr" "$t" "$s" "$rep" \
                    "$(awk -v s="$s" '$1 == s && $2 == 1000 { print $5 }' "$out")" usec
            done
        done
        for t in write_bw send_bw read_bw; do
            _bench_want "$t" || continue
            for s in $BW_SIZES; do
                n=$(_bench_iters "$s" "$tr" "$setup")
                _bench_run "$setup" \
                    "$(_bench_cmd "$tr" "ib_$t $o -s $s -n $n")" \
                    "$(_bench_cmd "$tr" "ib_$t $o -s $s -n $n @PEER@")" \
                    "$out"
                _bench_emit "$setup" "$tr" "$t" "$s" "$rep" \
                    "$(awk -v s="$s" -v n="$n" '$1 == s && $2 == n { print $4 }' "$out")" MB/s
                _bench_emit "$setup" "$tr" "${t%_bw}_rate" "$s" "$rep" \
                    "$(awk -v s="$s" -v n="$n" '$1 == s && $2 == n { print $5 }' "$out")" Mmsg/s
                [ "$tr" != pvrdma ] || _bench_memcpy "$setup" "$t" "$s" "$rep"
            done
        done
        # Ping-pong of 64 bytes, polling and waiting for events.
        for t in pingpong pingpong_event; do
            _bench_want "$t" || continue
            o="-d $dev -g $gidx -s 64 -n 2000"
            [ "$t" = pingpong_event ] && o="$o -e"
            _bench_run "$setup" "$(_bench_cmd "$tr" "ibv_rc_pingpong $o")" \
                "$(_bench_cmd "$tr" "ibv_rc_pingpong $o @PEER@")" "$out"
            _bench_emit "$setup" "$tr" "$t" 64 "$rep" \
                "$(sed -n 's/.*= \([0-9.]*\) usec\/iter.*/\1/p' "$out")" usec
        done
        # Streaming 64 KiB, the completions waited for on a channel (-e)
        # and, for ev_bw's WRITE, by polling with the same tool
        # (perftest's send_bw polling is the series above).
        s=65536
        n=$(_bench_iters "$s" "$tr" "$setup")
        [ "$n" -gt 20000 ] && n=20000
        for t in send_bw_event write_bw_event write_bw_evpoll; do
            _bench_want "$t" || continue
            case $t in
            send_bw_event) c="ib_send_bw -d $dev -x $gidx -F -e -s $s -n $n" ;;
            write_bw_event) c="./ev_bw -d $dev -g $gidx -e -s $s -n $n" ;;
            write_bw_evpoll) c="./ev_bw -d $dev -g $gidx -s $s -n $n" ;;
            esac
            _bench_run "$setup" "$(_bench_cmd "$tr" "$c")" \
                "$(_bench_cmd "$tr" "$c @PEER@")" "$out"
            case $t in
            send_bw_event) v=$(awk -v s="$s" -v n="$n" '$1 == s && $2 == n { print $4 }' "$out") ;;
            *) v=$(sed -n 's/^ev_bw: .*: \([0-9.]*\) MB\/s$/\1/p' "$out") ;;
            esac
            _bench_emit "$setup" "$tr" "$t" "$s" "$rep" "$v" MB/s
        done
        o="-d $dev -x $gidx -F"
    done
}

# Many connected QPs against one (guest B or "vm"): ib_write_bw 64 B
# with tx-depth 32 (perftest's CQ is tx-depth x QPs: the device needs
# max-qp above QPS and max-cqe of 32 x QPS), on one QP and on QPS QPs at
# once, the same number of messages; -N: perftest's peak figure costs
# time quadratic in the messages of all QPs (minutes under TCG).
#
#   bench_many_qps SETUP QPS
bench_many_qps() {
    local setup=$1 qps=$2 rep q n out=/tmp/bench.out o="-d pvrdma0 -x 1 -F -N"
    _bench_want write_rate_qps || return 0
    for rep in $(seq "$BENCH_REPS"); do
        for q in 1 "$qps"; do
            # (-n is per QP: 100 each on QPS QPs, as many on one)
            n=$((100 * qps / q))
            [ "${BENCH_QUICK:-0}" != 1 ] || n=$((n / 4))
            _bench_run "$setup" "ib_write_bw $o -s 64 -t 32 -q $q -n $n" \
                "ib_write_bw $o -s 64 -t 32 -q $q -n $n @PEER@" "$out"
            _bench_emit "$setup" pvrdma write_rate_qps "$q" "$rep" \
                "$(awk '$1 == 64 && $2 ~ /^[0-9]+$/ { print $5 }' "$out")" Mmsg/s
        done
    done
}

# qperf's "  latency  =  25.3 us" / "  bw  =  1.2 GB/sec" in usec, MB/s.
_bench_qperf() {
    awk -v want="$1" '
        $1 == want && $2 == "=" {
            v = $3; u = $4
            if (want == "latency") {
                if (u == "ns") v /= 1000; else if (u == "ms") v *= 1000;
                else if (u == "sec") v *= 1000000
            } else {
                if (u ~ /^KB/) v /= 1000; else if (u ~ /^GB/) v *= 1000;
                else if (u ~ /^bytes/) v /= 1000000
            }
            print v
        }'
}

# TCP over the guests' network (or this guest's loopback in "vm"): qperf
# tcp_lat and tcp_bw for every size; the server goes when the client
# says so on port 19766.
bench_tcp() {
    local setup=$1 rep s cli out=/tmp/bench.out sizes
    sizes=$(echo $LAT_SIZES $BW_SIZES | tr ' ' '\n' | sort -n | uniq | tr '\n' ' ')
    for rep in $(seq "$BENCH_REPS"); do
        cli=""
        for s in $sizes; do
            cli="$cli echo SIZE $s; qperf -lp 19765 -m $s @PEER@ tcp_lat tcp_bw || exit 1;"
        done
        cli="$cli echo done | nc @PEER@ 19766"
        _bench_run "$setup" \
            "qperf -lp 19765 & q=\$!; nc -l -p 19766 > /dev/null; kill \$q; true" \
            "$cli" "$out"
        for s in $sizes; do
            _bench_emit "$setup" tcp tcp_lat "$s" "$rep" \
                "$(awk -v s="$s" '$1 == "SIZE" { on = ($2 == s) } on' "$out" | _bench_qperf latency)" usec
            _bench_emit "$setup" tcp tcp_bw "$s" "$rep" \
                "$(awk -v s="$s" '$1 == "SIZE" { on = ($2 == s) } on' "$out" | _bench_qperf bw)" MB/s
        done
    done
}
