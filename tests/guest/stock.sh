# Guest-side helpers (busybox sh) for the tests of rdma-core's stock
# vmw_pvrdma provider and of the upstream vmw_pvrdma kernel driver
# (tests/guest/stockdrv.sh builds it); sourced after pair.sh:
#   stock_provider DEV GID   rdma-core's stock provider instead of ours in
#                            /etc/libibverbs.d; checked: a verbs server on
#                            DEV (GID index GID) maps libvmw_pvrdma, not
#                            ours, and a client reaches it
#   stock_driver_up IP [SECS]
#                            gives the vmxnet3 NIC (function 0 of the
#                            device's slot, which the upstream driver
#                            pairs with) IP/24, loads ./vmw_pvrdma.ko and
#                            waits up to SECS (60) for vmw_pvrdma0's port
#                            ACTIVE with IP's RoCE v2 GID; prints the port
#                            and its GIDs; sets $vmx (the netdev) and $gid
#                            (that GID's index), leaves ibv_devinfo -v in
#                            /tmp/devinfo; fails if any of it is missing
# shellcheck shell=dash

stock_provider() {
    local dev=$1 g=$2 probe
    mv /etc/libibverbs.d/pvrdma.driver /tmp/ || fail "no pvrdma.driver"
    cp /usr/share/pvrdma/stock-provider/vmw_pvrdma.driver /etc/libibverbs.d/ ||
        fail "no stock provider in the image"
    listeners > /tmp/probe.before
    ibv_rc_pingpong -d "$dev" -g "$g" -n 20 -p 18499 > /tmp/probe.log 2>&1 &
    probe=$!
    # It has loaded its provider once it listens for the client.
    wait_listening $probe /tmp/probe.before
    grep -q libvmw_pvrdma "/proc/$probe/maps" ||
        fail "the stock provider is not the one loaded"
    grep -q libpvrdma- "/proc/$probe/maps" &&
        fail "our provider was loaded too"
    ibv_rc_pingpong -d "$dev" -g "$g" -n 20 -p 18499 127.0.0.1 > /dev/null ||
        fail "probe client"
    wait $probe || { cat /tmp/probe.log; fail "probe server"; }
    echo "stock provider: libvmw_pvrdma loaded, ours not"
}

_stock_ready() {
    ibv_devinfo -v -d vmw_pvrdma0 > /tmp/devinfo 2>&1 &&
        grep -q PORT_ACTIVE /tmp/devinfo &&
        grep -q "::ffff:$_stock_ip, RoCE v2" /tmp/devinfo
}

stock_driver_up() {
    local n
    _stock_ip=$1
    vmx=
    for n in /sys/class/net/*; do
        [ "$(basename "$(readlink -f "$n/device/driver" 2>/dev/null)")" = vmxnet3 ] &&
            vmx=$(basename "$n")
    done
    [ -n "$vmx" ] || fail "no vmxnet3 netdev"
    ip addr add "$1/24" dev "$vmx" && ip link set "$vmx" up ||
        fail "cannot give $vmx $1"
    lsmod | grep -q '^pvrdma ' && fail "our driver is loaded"
    insmod ./vmw_pvrdma.ko || fail "insmod vmw_pvrdma.ko"
    # The port comes up and the address's GID is added after insmod
    # returns.
    wait_for "${2:-60}" _stock_ready ||
        echo "(vmw_pvrdma0 not ready after ${2:-60} s)"
    ibv_devinfo -v > /tmp/devinfo || fail "ibv_devinfo"
    grep -E "hca_id|state:|link_layer|fw_ver|GID" /tmp/devinfo
    grep -q "hca_id:	vmw_pvrdma0" /tmp/devinfo || fail "no vmw_pvrdma0"
    grep -q "PORT_ACTIVE" /tmp/devinfo || fail "port not ACTIVE"
    gid=$(grep "::ffff:$1, RoCE v2" /tmp/devinfo | head -n 1 |
          sed 's/.*GID\[ *\([0-9]*\)\].*/\1/')
    [ -n "$gid" ] || fail "no RoCE v2 GID for $1"
}
