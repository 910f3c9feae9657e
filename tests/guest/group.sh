# Guest-side helpers (busybox sh) for tests that run in a group of guests
# at once (tests/guest/vmgroup.sh), sourced by their guest scripts:
#   group_roles                  the roles of the group, "a b c ..."
#   group_ip ROLE                that guest's eth0 address (10.9.0.I)
#   group_barrier TAG [TIMEOUT]  wait until every guest of the group came
#                                to its `group_barrier TAG`
# vmgroup.sh puts VMGROUP_ROLE, VMGROUP_INDEX (1 for a, 2 for b, ...),
# VMGROUP_N, VMGROUP_LIFE and SELF_IP in the environment.
#
# A barrier is a star of sync.sh's barriers, on its port: guest a waits
# for each other guest's `sync_signal TAG` in turn, then lets each of
# them through with `sync_signal TAG-go` (one connection each, whoever
# comes first); the others signal TAG and wait for TAG-go from a. So all
# guests must run the same barriers in the same order, and none may use
# sync.sh's pairwise barriers (xpair_server ...) on $SYNC_PORT meanwhile.
# TIMEOUT (default $SYNC_TIMEOUT, 120 s) bounds each step: the longest
# any guest may take to come (a guest that boots again in between, or
# guest a busy with a long command, counts).
# shellcheck shell=dash

. ./sync.sh

group_roles() {
    echo "a b c d e f g h i" | cut -d ' ' -f "1-$VMGROUP_N"
}

group_ip() {
    local i
    i=$(group_index "$1")
    echo "10.9.0.$i"
}

group_index() {
    local r n=1
    for r in a b c d e f g h i; do
        [ "$r" = "$1" ] && echo $n && return 0
        n=$((n + 1))
    done
    fail "group_index: no guest $1"
}

group_barrier() {
    local tag=$1 limit=${2:-$SYNC_TIMEOUT} r n=0
    if [ "$VMGROUP_ROLE" = a ]; then
        for r in $(group_roles); do
            [ "$r" = a ] && continue
            sync_wait "$(group_ip "$r")" "$tag" "$limit"
            n=$((n + 1))
        done
        while [ $n -gt 0 ]; do
            sync_signal "$tag-go" "$limit"
            n=$((n - 1))
        done
    else
        sync_signal "$tag" "$limit"
        sync_wait "$(group_ip a)" "$tag-go" "$limit"
    fi
    echo "group: all $VMGROUP_N guests at $tag"
}
