# Guest-side helper (busybox sh): Soft-RoCE on eth0, as a host RDMA device
# for the host verbs backend's tests (docs/ibverbs.md).
#   rxe_up            load rdma_rxe and create rxe0 on eth0 (port ACTIVE)
#   rxe_gid_index [A.B.C.D]
#                     the index of rxe0's RoCE v2 GID of that IPv4 address
#                     of eth0 (default: the first)
# Each calls fail() (pair.sh or sync.sh) on any error.
RXE_PORT=/sys/class/infiniband/rxe0/ports/1

rxe_up() {
    # crc32-pclmul refuses to load under TCG; rxe's ICRC needs a crc32.
    modprobe crc32_generic
    modprobe rdma_rxe || fail "modprobe rdma_rxe"
    rdma link add rxe0 type rxe netdev eth0 || fail "rdma link add rxe0"
    for i in 1 2 3 4 5 6 7 8 9 10; do
        [ "$(cat $RXE_PORT/state 2>/dev/null)" = "4: ACTIVE" ] &&
            [ -n "$(rxe_gid_index)" ] && return 0
        sleep 0.5
    done
    fail "rxe0 did not come up ($(cat $RXE_PORT/state 2>/dev/null))"
}

rxe_gid_index() {
    local t i want=0000:0000:0000:0000:0000:ffff:
    [ -z "$1" ] || want=$want$(echo "$1" | awk -F. '{ printf "%02x%02x:%02x%02x", $1, $2, $3, $4 }')
    for t in $RXE_PORT/gid_attrs/types/*; do
        i=${t##*/}
        [ "$(cat "$t" 2>/dev/null)" = "RoCE v2" ] &&
            grep -q "^$want" $RXE_PORT/gids/"$i" && echo "$i" && return 0
    done
    return 0
}
