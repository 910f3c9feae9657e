# shellcheck shell=bash
# Host-side helper for tests that boot a group of guests at once, all on
# one Ethernet segment. Sourced after tests/guest/lib.sh:
#
#   vmgroup_run NAME TIMEOUT N SCRIPT [OPTION]...
#
# boots N guests (2 to 9; roles a, b, c, ...; guest I has eth0 10.9.0.I/24,
# MAC 52:54:00:0a:09:0I and -uuid ...0a090I, so distinct pvrdma node
# GUIDs) concurrently with scripts/vm.sh, each running `sh ./SCRIPT` (a
# host file copied in) with tests/guest/group.sh (group_barrier ...),
# sync.sh, pair.sh and nvmeof.sh beside it and VMGROUP_ROLE (a, b, ...),
# VMGROUP_INDEX (1, 2, ...), VMGROUP_N, VMGROUP_LIFE (below) and SELF_IP
# in its environment.
#
# The segment: the group gets a network namespace of its own (made here,
# removed at the end; needs root), every guest's QEMU runs in it (ip netns
# exec) and their NICs share one multicast group on its loopback
# (-netdev socket,mcast=...,localaddr=127.0.0.1): every guest reaches
# every other, and nothing else is on it. A fabric directory
# (fabric-path=) is reached from there as from anywhere: its sockets live
# in the file system.
#
# Waits for all; when one fails or is still up 30 s past TIMEOUT (each
# guest's hard limit, vm.sh --timeout, per boot), stops all the others at
# once (SIGTERM to all their processes, SIGKILL 10 s later, as vmpair.sh
# does). Fails, naming the logs, unless every guest exited 0. The consoles
# are shown prefixed [NAME-a], [NAME-b], ... and kept in
# $PVRDMA_OUT/vm/NAME-a.log, ... Options:
#   --arg ARG          one more scripts/vm.sh argument for every guest
#                      (one word, repeatable; after the group's own, so
#                      they can override them): --arg -d --arg ,fabric-path=DIR
#   --ROLE-arg ARG     the same for guest ROLE only (--c-arg ...)
#   --lives ROLE K     boot guest ROLE K times in a row: each time its
#                      vm.sh exits 0, a new QEMU boots it again with the
#                      same arguments (addresses, MAC, fabric) while the
#                      others go on; VMGROUP_LIFE is 1, 2, ... K, and life
#                      L > 1 logs to $PVRDMA_OUT/vm/NAME-ROLEL.log
# vmgroup.sh reuses vmpair.sh's way of starting and stopping a guest.

. "$TESTS_TOP/tests/guest/vmpair.sh"

VMGROUP_ROLES=(a b c d e f g h i)

vmgroup_run() {
    local name=$1 limit=$2 n=$3 script=$4 dir ns r i
    local -a common=() roles=()
    local -A extra=() lives=() life=() sid=() since=() rc=() note=()
    [ $# -ge 4 ] || die "usage: vmgroup_run NAME TIMEOUT N SCRIPT [OPTION]..."
    [[ $n =~ ^[2-9]$ ]] || die "vmgroup_run: N is $n, want 2 to 9"
    shift 4
    roles=("${VMGROUP_ROLES[@]:0:n}")
    while [ $# -gt 0 ]; do
        [ $# -ge 2 ] || die "vmgroup_run: $1 wants a value"
        case "$1" in
        --arg) common+=("$2") ;;
        --lives)
            [[ $# -ge 3 && $3 =~ ^[1-9][0-9]*$ ]] ||
                die "vmgroup_run: --lives ROLE K"
            lives[$2]=$3
            shift
            ;;
        --[a-i]-arg)
            r=${1:2:1}
            # (one word each, kept apart by \x1f)
            extra[$r]+="$2"$'\x1f'
            ;;
        *) die "vmgroup_run: unknown option $1" ;;
        esac
        shift 2
    done
    [ -f "$script" ] || die "vmgroup_run: no guest script $script"
    for r in "${!lives[@]}" "${!extra[@]}"; do
        [[ " ${roles[*]} " == *" $r "* ]] ||
            die "vmgroup_run: no guest $r among ${roles[*]}"
    done

    dir=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-group.XXXXXX")
    ns=pvrdma-group-$$
    ip netns add "$ns" ||
        { rm -rf "$dir"; fail "cannot create a network namespace (needs root)"; }
    ip -n "$ns" link set lo up

    local had_m=
    [[ $- == *m* ]] && had_m=1 && set +m
    # An interrupt or an early exit stops the guests and removes the
    # namespace; the caller's own traps are put back afterwards (its EXIT
    # trap also runs on such an early exit).
    local t
    _vmgroup_traps=$(trap -p INT TERM HUP EXIT)
    t=$(trap -p EXIT)
    _vmgroup_exit=
    [ -z "$t" ] || _vmgroup_exit=$(eval "set -- $t"; printf '%s' "$3")
    _vmgroup_sids=() _vmgroup_dir=$dir _vmgroup_ns=$ns
    trap '_vmgroup_cleanup; exit 130' INT TERM HUP
    trap '_vmgroup_cleanup; eval "$_vmgroup_exit"' EXIT

    local start=$SECONDS
    for ((i = 0; i < n; i++)); do
        r=${roles[i]}
        life[$r]=1
        _vmgroup_boot "$name" "$r" $((i + 1)) "$n" 1 "$limit" "$script" \
            "${common[@]}"
        sid[$r]=$!
        since[$r]=$SECONDS
        _vmgroup_sids+=("${sid[$r]}")
    done

    # Poll them all (as vmpair.sh does); the first failure stops the rest.
    local live=("${roles[@]}") rest failed over st
    while [ ${#live[@]} -gt 0 ]; do
        sleep 0.5
        rest=() failed='' over=''
        for r in "${live[@]}"; do
            st=$dir/$r.${life[$r]}.status
            if [ ! -e "$st" ]; then
                rest+=("$r")
                [ $((SECONDS - since[$r])) -le $((limit + 30)) ] || over=1
                continue
            fi
            rc[$r]=$(cat "$st")
            if [ "${rc[$r]}" -eq 0 ] && [ "${life[$r]}" -lt "${lives[$r]:-1}" ]; then
                wait "${sid[$r]}" 2>/dev/null || true
                life[$r]=$((life[$r] + 1))
                log "'$name-$r' passed; booting it again in a new QEMU (life ${life[$r]} of ${lives[$r]})"
                _vmgroup_boot "$name" "$r" "$(_vmgroup_index "$r")" "$n" \
                    "${life[$r]}" "$limit" "$script" "${common[@]}"
                sid[$r]=$!
                since[$r]=$SECONDS
                _vmgroup_sids+=("${sid[$r]}")
                rest+=("$r")
                continue
            fi
            [ "${rc[$r]}" -eq 0 ] || failed=$r
        done
        live=("${rest[@]}")
        if [ ${#live[@]} -gt 0 ] && { [ -n "$failed" ] || [ -n "$over" ]; }; then
            if [ -n "$failed" ]; then
                log "'$(_vmgroup_label "$name" "$failed" "${life[$failed]}")' failed (status ${rc[$failed]}): stopping the other guests"
            else
                log "'$name': a guest still up after $((limit + 30))s: stopping the guests"
            fi
            for r in "${live[@]}"; do
                if [ -n "$failed" ]; then
                    note[$r]="stopped after guest ${failed^^} failed"
                else
                    note[$r]="stopped by the watchdog"
                fi
                _vmpair_stop "${sid[$r]}"
                rc[$r]=$(cat "$dir/$r.${life[$r]}.status" 2>/dev/null || echo 137)
            done
            live=()
        fi
    done
    for r in "${roles[@]}"; do
        wait "${sid[$r]}" 2>/dev/null || true
    done
    [ -z "$had_m" ] || set -m

    _vmgroup_sids=()
    _vmgroup_cleanup

    local ok=1 msg=()
    for r in "${roles[@]}"; do
        [ "${rc[$r]}" -eq 0 ] && [ "${life[$r]}" -eq "${lives[$r]:-1}" ] ||
            ok=
        msg+=("guest ${r^^}$([ "${life[$r]}" -eq 1 ] || echo " (life ${life[$r]})")" \
              "$(_vmpair_status "${rc[$r]}" "${note[$r]:-}")," \
              "log $PVRDMA_OUT/vm/$(_vmgroup_label "$name" "$r" "${life[$r]}").log;")
    done
    msg[-1]=${msg[-1]%;}
    if [ -n "$ok" ]; then
        log "'$name': all $n guests passed ($((SECONDS - start))s)"
        return 0
    fi
    fail "$name after $((SECONDS - start))s:" "${msg[@]}"
}

# _vmgroup_label NAME ROLE LIFE: a guest's name in logs (NAME-d, NAME-d2)
_vmgroup_label() {
    echo "$1-$2$([ "$3" -eq 1 ] || echo "$3")"
}

_vmgroup_index() {
    local i
    for ((i = 0; i < ${#VMGROUP_ROLES[@]}; i++)); do
        [ "${VMGROUP_ROLES[i]}" = "$1" ] && echo $((i + 1)) && return
    done
}

# _vmgroup_boot NAME ROLE INDEX N LIFE TIMEOUT SCRIPT [ARG...]: boot one
# guest in the background (its session's ID in $!), with its own
# arguments from the caller's array extra after ARG...
_vmgroup_boot() {
    local name=$1 role=$2 i=$3 n=$4 nth=$5 limit=$6 script=$7 label
    local -a own=()
    shift 7
    label=$(_vmgroup_label "$name" "$role" "$nth")
    [ -z "${extra[$role]:-}" ] ||
        mapfile -t -d $'\x1f' own < <(printf '%s' "${extra[$role]}")
    rm -f "$_vmgroup_dir/$role.$nth.status"
    _vmpair_start "$label" "$_vmgroup_dir/$role.$nth.status" \
        ip netns exec "$_vmgroup_ns" \
        "$PVRDMA_TOP/scripts/vm.sh" --name "$label" --timeout "$limit" \
        --log "$PVRDMA_OUT/vm/$label.log" \
        --ip "10.9.0.$i/24" --mac "52:54:00:0a:09:0$i" \
        --net "socket,mcast=239.255.9.1:7409,localaddr=127.0.0.1" \
        -q -uuid -q "00000000-0000-4000-8000-0000000a090$i" \
        --add "$TESTS_TOP/tests/guest/group.sh" \
        --add "$TESTS_TOP/tests/guest/sync.sh" \
        --add "$TESTS_TOP/tests/guest/pair.sh" \
        --add "$TESTS_TOP/tests/guest/nvmeof.sh" \
        --add "$script" \
        "$@" "${own[@]}" \
        -- "VMGROUP_ROLE=$role VMGROUP_INDEX=$i VMGROUP_N=$n VMGROUP_LIFE=$nth SELF_IP=10.9.0.$i sh ./${script##*/}"
}

# _vmgroup_cleanup: stop the guests still listed, drop the namespace and
# the status files, put the caller's traps back
_vmgroup_cleanup() {
    local s
    for s in "${_vmgroup_sids[@]}"; do
        _vmpair_stop "$s"
    done
    _vmgroup_sids=()
    ip netns del "$_vmgroup_ns" 2>/dev/null || true
    rm -rf "$_vmgroup_dir"
    trap - INT TERM HUP EXIT
    eval "$_vmgroup_traps"
}
