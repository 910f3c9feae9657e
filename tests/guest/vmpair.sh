# shellcheck shell=bash
# Host-side helper for tests that boot two guests at once, joined by a
# private Ethernet link. Sourced after tests/guest/lib.sh:
#
#   vmpair_run NAME TIMEOUT GUEST_A_SCRIPT GUEST_B_SCRIPT [OPTION]...
#
# boots guest A (eth0 10.9.0.1/24) and guest B (10.9.0.2/24) concurrently
# with scripts/vm.sh, each running `sh ./SCRIPT` (a host file copied in)
# with tests/guest/sync.sh (barriers, xpair_server/xpair_client),
# pair.sh, nvmeof.sh and nfs.sh beside it and PEER_IP, SELF_IP and VMPAIR_ROLE (a or b) in its
# environment. Their NICs are joined by QEMU's -netdev dgram over two unix
# datagram sockets in a temporary directory: each QEMU binds its own and
# sends to the other's, so neither has to start first. The guests get
# distinct MACs and -uuid (so distinct pvrdma node GUIDs). Waits for both;
# when one fails or hits TIMEOUT, stops the other at once (SIGTERM to all
# its processes: QEMU quits, vm.sh cleans up; SIGKILL 10 s later). Fails,
# naming the logs, unless both exit 0. The consoles are shown prefixed
# [NAME-a] and [NAME-b] and kept in $PVRDMA_OUT/vm/NAME-a.log and
# NAME-b.log. Options:
#   --a-arg ARG, --b-arg ARG   one more scripts/vm.sh argument for guest A
#                              (B), repeatable; they come after vmpair's
#                              own, so they can override them. One word
#                              each, as vm.sh's -q takes one QEMU word:
#                              --a-arg -d --a-arg ,fabric-path=DIR
#                              --b-arg -q --b-arg -trace --b-arg -q --b-arg 'pvrdma_*'
#   --arg ARG                  the same for both guests
#   --a-wrap CMD, --b-wrap CMD run that guest's vm.sh under the command CMD
#                              (words split at spaces; put anything fancier
#                              in a script), e.g. --a-wrap 'ip netns exec nsA'
# TIMEOUT is each guest's hard limit (vm.sh --timeout), from its start.

VMPAIR_A_IP=10.9.0.1 VMPAIR_B_IP=10.9.0.2

vmpair_run() {
    local name=$1 limit=$2 script_a=$3 script_b=$4 dir sock_a sock_b
    local -a args_a=() args_b=() wrap_a=() wrap_b=() common=()
    [ $# -ge 4 ] || die "usage: vmpair_run NAME TIMEOUT SCRIPT_A SCRIPT_B [OPTION]..."
    shift 4
    while [ $# -gt 0 ]; do
        [ $# -ge 2 ] || die "vmpair_run: $1 wants a value"
        case "$1" in
        --a-arg) args_a+=("$2") ;;
        --b-arg) args_b+=("$2") ;;
        --arg) common+=("$2") ;;
        --a-wrap) read -ra wrap_a <<< "$2" ;;
        --b-wrap) read -ra wrap_b <<< "$2" ;;
        *) die "vmpair_run: unknown option $1" ;;
        esac
        shift 2
    done
    [ -f "$script_a" ] || die "vmpair_run: no guest script $script_a"
    [ -f "$script_b" ] || die "vmpair_run: no guest script $script_b"

    dir=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-pair.XXXXXX")
    sock_a=$dir/a.sock sock_b=$dir/b.sock
    _vmpair_args "$name" a "$limit" "$VMPAIR_A_IP" "$VMPAIR_B_IP" \
        "$sock_a" "$sock_b" "$script_a" "${common[@]}" "${args_a[@]}"
    args_a=("${_vmpair_argv[@]}")
    _vmpair_args "$name" b "$limit" "$VMPAIR_B_IP" "$VMPAIR_A_IP" \
        "$sock_b" "$sock_a" "$script_b" "${common[@]}" "${args_b[@]}"
    args_b=("${_vmpair_argv[@]}")

    # Each guest runs in a session of its own (setsid), so that stopping
    # it reaches every process of it: vm.sh's `timeout` puts QEMU in a
    # process group of its own, and a wrapper may add more. setsid execs
    # in place (the job is not a group leader with job control off), so
    # the job's PID is also its session's ID.
    local had_m=
    [[ $- == *m* ]] && had_m=1 && set +m
    # An interrupt or an early exit stops both guests; the caller's own
    # traps are put back afterwards (its EXIT trap also runs on such an
    # early exit).
    local t
    _vmpair_traps=$(trap -p INT TERM HUP EXIT)
    t=$(trap -p EXIT)
    _vmpair_exit=
    [ -z "$t" ] || _vmpair_exit=$(eval "set -- $t"; printf '%s' "$3")
    _vmpair_sids=() _vmpair_dir=$dir
    trap '_vmpair_cleanup; exit 130' INT TERM HUP
    trap '_vmpair_cleanup; eval "$_vmpair_exit"' EXIT
    local start=$SECONDS pid_a pid_b
    _vmpair_start "$name-a" "$dir/a.status" "${wrap_a[@]}" \
        "$PVRDMA_TOP/scripts/vm.sh" "${args_a[@]}"
    pid_a=$!
    _vmpair_start "$name-b" "$dir/b.status" "${wrap_b[@]}" \
        "$PVRDMA_TOP/scripts/vm.sh" "${args_b[@]}"
    pid_b=$!
    _vmpair_sids=("$pid_a" "$pid_b")
    [ -z "$had_m" ] || set -m

    # Poll both (bash's `wait -n` loses jobs that ended while the shell ran
    # something else); the first failure stops the other. vm.sh enforces
    # TIMEOUT itself: the watchdog is for a wrapper that hangs.
    local -A rc=() note=()
    local live=(a b) rest r failed
    while [ ${#live[@]} -gt 0 ]; do
        sleep 0.5
        rest=() failed=
        for r in "${live[@]}"; do
            if [ -e "$dir/$r.status" ]; then
                rc[$r]=$(cat "$dir/$r.status")
                [ "${rc[$r]}" -eq 0 ] || failed=$r
            else
                rest+=("$r")
            fi
        done
        live=("${rest[@]}")
        if [ ${#live[@]} -gt 0 ] &&
           { [ -n "$failed" ] || [ $((SECONDS - start)) -gt $((limit + 30)) ]; }; then
            if [ -n "$failed" ]; then
                log "'$name-$failed' failed (status ${rc[$failed]}): stopping the other guest"
                note[${live[0]}]="stopped after guest ${failed^^} failed"
            else
                log "'$name': guests still up after $((limit + 30))s: stopping them"
                for r in "${live[@]}"; do note[$r]="stopped by the watchdog"; done
            fi
            for r in "${live[@]}"; do
                _vmpair_stop "$([ "$r" = a ] && echo "$pid_a" || echo "$pid_b")"
                rc[$r]=$(cat "$dir/$r.status" 2>/dev/null || echo 137)
            done
            live=()
        fi
    done
    wait "$pid_a" "$pid_b" 2>/dev/null || true

    _vmpair_sids=()
    _vmpair_cleanup

    if [ "${rc[a]}" -eq 0 ] && [ "${rc[b]}" -eq 0 ]; then
        log "'$name': both guests passed ($((SECONDS - start))s)"
        return 0
    fi
    fail "$name after $((SECONDS - start))s:" \
        "guest A $(_vmpair_status "${rc[a]}" "${note[a]:-}")," \
        "log $PVRDMA_OUT/vm/$name-a.log;" \
        "guest B $(_vmpair_status "${rc[b]}" "${note[b]:-}")," \
        "log $PVRDMA_OUT/vm/$name-b.log"
}

# _vmpair_args NAME ROLE TIMEOUT SELF_IP PEER_IP OWN_SOCK PEER_SOCK SCRIPT
# [ARG...]: one guest's vm.sh arguments, into the array _vmpair_argv
_vmpair_args() {
    local name=$1 role=$2 limit=$3 self=$4 peer=$5 own=$6 remote=$7
    local script=$8 n
    shift 8
    n=$([ "$role" = a ] && echo 1 || echo 2)
    _vmpair_argv=(--name "$name-$role" --timeout "$limit"
        --log "$PVRDMA_OUT/vm/$name-$role.log"
        --ip "$self/24" --mac "52:54:00:0a:09:0$n"
        --net "dgram,local.type=unix,local.path=$own,remote.type=unix,remote.path=$remote"
        -q -uuid -q "00000000-0000-4000-8000-0000000a090$n"
        --add "$TESTS_TOP/tests/guest/sync.sh"
        --add "$TESTS_TOP/tests/guest/pair.sh"
        --add "$TESTS_TOP/tests/guest/nvmeof.sh"
        --add "$TESTS_TOP/tests/guest/nfs.sh"
        --add "$script"
        "$@"
        -- "VMPAIR_ROLE=$role SELF_IP=$self PEER_IP=$peer sh ./${script##*/}")
}

# _vmpair_start LABEL STATUS_FILE COMMAND...: run COMMAND in the
# background in a session of its own, its output prefixed [LABEL]; its exit
# status goes to STATUS_FILE when it ends, also when stopped (the trap
# holds SIGTERM off this shell until COMMAND ends); $! is the session's ID
_vmpair_start() {
    # shellcheck disable=SC2016 # expanded by the inner bash
    setsid bash -c 'trap : TERM INT HUP; set -o pipefail
        "${@:3}" | sed -u "s/^/[$1] /"; echo "$?" > "$2.new"; mv "$2.new" "$2"' \
        vmpair "$@" </dev/null &
}

# _vmpair_status STATUS [NOTE]: what a guest's vm.sh exit status means
_vmpair_status() {
    if [ -n "${2:-}" ]; then
        echo "$2"
        return
    fi
    case "$1" in
    0) echo "passed" ;;
    124) echo "hit its timeout (124)" ;;
    125) echo "stopped without a status (125: crash or panic)" ;;
    *) echo "failed ($1)" ;;
    esac
}

# _vmpair_stop SID: stop every process of the guest's session SID, with
# SIGTERM (QEMU exits, vm.sh cleans up), then SIGKILL after 10 s.
_vmpair_stop() {
    local sid=$1 i
    [[ $sid =~ ^[1-9][0-9]*$ ]] && [ "$sid" != "$(ps -o sid= -p $$ | tr -d ' ')" ] ||
        return 0
    pkill -TERM -s "$sid" 2>/dev/null || return 0
    for ((i = 0; i < 50; i++)); do
        _vmpair_alive "$sid" || return 0
        sleep 0.2
    done
    log "session $sid ignored SIGTERM for 10s: SIGKILL"
    pkill -KILL -s "$sid" 2>/dev/null || true
}

# _vmpair_alive SID: does a process of session SID still run? (The leader,
# our child, stays a zombie until waited for.)
_vmpair_alive() {
    local p st
    for p in $(pgrep -s "$1"); do
        st=$(cat "/proc/$p/stat" 2>/dev/null) || continue
        st=${st##*) }
        [ "${st%% *}" = Z ] || return 0
    done
    return 1
}

# _vmpair_cleanup: stop the guests still listed, drop the sockets, put
# the caller's traps back
_vmpair_cleanup() {
    local sid
    for sid in "${_vmpair_sids[@]}"; do
        _vmpair_stop "$sid"
    done
    _vmpair_sids=()
    rm -rf "$_vmpair_dir"
    trap - INT TERM HUP EXIT
    eval "$_vmpair_traps"
}

# vmpair_netns PREFIX: two network namespaces, as two hosts, joined by a
# veth pair: VMPAIR_NS_A holds PREFIX.1/24, VMPAIR_NS_B PREFIX.2/24 (and
# each its loopback). Run the guests' QEMUs in them with --a-wrap
# "ip netns exec $VMPAIR_NS_A" (and --b-wrap). Needs root; fails the test
# without it. The caller deletes them with vmpair_netns_del (in its EXIT
# trap); deleting a namespace deletes its end of the veth, and so both.
vmpair_netns() {
    local prefix=$1 va=pvra$$ vb=pvrb$$
    VMPAIR_NS_A=pvrdma-a-$$ VMPAIR_NS_B=pvrdma-b-$$
    ip netns add "$VMPAIR_NS_A" && ip netns add "$VMPAIR_NS_B" ||
        fail "cannot create network namespaces (needs root)"
    ip link add "$va" type veth peer name "$vb" &&
        ip link set "$va" netns "$VMPAIR_NS_A" &&
        ip link set "$vb" netns "$VMPAIR_NS_B" &&
        ip -n "$VMPAIR_NS_A" addr add "$prefix.1/24" dev "$va" &&
        ip -n "$VMPAIR_NS_B" addr add "$prefix.2/24" dev "$vb" &&
        ip -n "$VMPAIR_NS_A" link set lo up &&
        ip -n "$VMPAIR_NS_B" link set lo up &&
        ip -n "$VMPAIR_NS_A" link set "$va" up &&
        ip -n "$VMPAIR_NS_B" link set "$vb" up ||
        fail "cannot join the namespaces by a veth pair"
}

vmpair_netns_del() {
    ip netns del "${VMPAIR_NS_A:-none}" 2>/dev/null || true
    ip netns del "${VMPAIR_NS_B:-none}" 2>/dev/null || true
}

# vmpair_nvme_check NAME: the pair's guest B (NVMe over RDMA host,
# nvmeof.sh) wrote what guest A's RAM disk holds: the MD5s both printed.
vmpair_nvme_check() {
    local name=$1 wrote held
    wrote=$(sed -n 's/.*nvme-rdma: 4 MiB written and read back equal (\([0-9a-f]*\)).*/\1/p' \
        "$PVRDMA_OUT/vm/$name-b.log")
    held=$(sed -n 's/.*nvmet: RAM disk holds \([0-9a-f]*\).*/\1/p' \
        "$PVRDMA_OUT/vm/$name-a.log")
    [ -n "$wrote" ] && [ "$wrote" = "$held" ] ||
        fail "$name: NVMe over RDMA: B wrote MD5 '$wrote', A's RAM disk holds '$held'"
    echo "  NVMe over RDMA: 4 MiB from B in A's RAM disk, MD5 $held"
}
