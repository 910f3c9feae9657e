#!/usr/bin/env bash
# Four VMs on one fabric made of two directories joined over TCP, as two
# hosts would be: A and B share one fabric directory, C and D another
# (-device pvrdma,fabric-path=DIR), every QEMU listens on a TCP port of its
# own (fabric-listen=127.0.0.1:PORT, in the group's network namespace) and
# only C names a peer (fabric-peer=A's port). The fabric makes the rest
# (docs/fabric.md, "Many hosts: the mesh"): A-B and C-D link through their
# directories (shared memory), and C tells D of A and B, A tells B of C
# and D (PEERS), so every pair across links over TCP: B and D, whom no one
# named to the other, reach each other only that way. The guests A, B, C
# and D (1 vCPU each) share one
# Ethernet segment (tests/guest/vmgroup.sh: a network namespace of their
# own, the NICs on one multicast group) for barriers, MPI's bootstrap and
# RDMA CM's address resolution. Shown, every byte checked:
#   1. all to all at once: each guest serves ibv_rc_pingpong -c (each side
#      checks the data it receives) and rping -V (the client checks what
#      it reads back) to each other guest and connects to each other
#      guest's servers for it: 12 ordered pairs, 24 exchanges together;
#   2. Open MPI over UCX (rc_verbs/ud_verbs only), one rank per guest:
#      tests/guest/progs/mpi_alltoall.c (MPI_Alltoall 1 B - 1 MiB per
#      pair, MPI_Alltoallv, MPI_Allreduce, every byte checked by its
#      receiver; the four ranks on four distinct hosts);
#   3. NVMe over RDMA: A exports a RAM disk, B, C and D connect at the same
#      time and each writes 1 MiB of random data at three places of its
#      own and reads them back; A's RAM disk must then hold what each one
#      wrote there (MD5s compared here);
#   4. D leaves and comes back: its guest powers off and a new QEMU boots
#      D again on the same fabric directory (same addresses) while A, B
#      and C stay up, C unloading and reloading pvrdma.ko meanwhile; the
#      new D (a new fabric member that only C's directory knows) and each
#      of them then run (1) again both ways.
# No guest kernel may log an oops, warning or hung task.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/vmgroup.sh"

fdir=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-fab.XXXXXX")
trap 'rm -rf "$fdir"' EXIT
mkdir "$fdir/ab" "$fdir/cd"
mpi_prog=$(build_mpi_prog mpi_alltoall)

cat > "$TEST_OUT/guest.sh" <<'GUEST'
. ./group.sh
me=$VMGROUP_ROLE
all=$(group_roles)
others=$(for r in $all; do [ "$r" = "$me" ] || echo "$r"; done)

# tcp_listening PORT, cm_listening PORT: a server listens there (a TCP
# socket, an RDMA CM id on our address)
tcp_listening() {
    awk '$4 == "0A" { print $2 }' /proc/net/tcp /proc/net/tcp6 |
        grep -q ":$(printf %04X "$1")\$"
}
cm_listening() {
    rdma resource show cm_id | grep "state LISTEN" |
        grep -q "src-addr $SELF_IP:$1 "
}

port_active() { ibv_devinfo -d pvrdma0 2> /dev/null | grep -q PORT_ACTIVE; }
gid_ready() {
    [ -n "$(grep -v '^0000:0000:0000:0000:0000:0000:0000:0000$' \
            /sys/class/infiniband/pvrdma0/ports/1/gids/1 2> /dev/null)" ]
}

# Before a guest ends: no oops, warning, hung task or leaked object.
kernel_clean() {
    if dmesg | grep -E "BUG|Oops|WARNING: |Call Trace|hung_task|blocked for more than|left at removal"; then
        fail "the kernel reported a problem (above)"
    fi
}

# xchg TAG BASE PEER...: with every PEER both ways, all at once. This
# guest serves ibv_rc_pingpong -c -e (port BASE + 10 x server + client)
# and rping -V (that + 500) to each PEER; once every guest's servers
# listen (barrier TAG-up), it runs the clients against each PEER's
# servers for it. Every server and client must exit 0.
xchg() {
    local tag=$1 base=$2 p rcp cmp w what rc bad= pids=
    shift 2
    echo "=== $tag: ibv_rc_pingpong -c and rping -V with $* both ways, all at once"
    for p; do
        rcp=$((base + 10 * VMGROUP_INDEX + $(group_index "$p")))
        cmp=$((rcp + 500))
        timeout 300 ibv_rc_pingpong -d pvrdma0 -g 1 -c -e -n 100 -p $rcp \
            > "/tmp/$tag.rc.$me-$p" 2>&1 &
        pids="$pids $!:rc.$me-$p"
        timeout 300 rping -s -a "$SELF_IP" -p $cmp -C 10 -V \
            > "/tmp/$tag.rping.$me-$p" 2>&1 &
        pids="$pids $!:rping.$me-$p"
        wait_for 120 tcp_listening $rcp ||
            fail "$tag: ibv_rc_pingpong for $p does not listen on $rcp"
        wait_for 120 cm_listening $cmp ||
            fail "$tag: rping for $p does not listen on $cmp"
    done
    group_barrier "$tag-up" 300
    for p; do
        rcp=$((base + 10 * $(group_index "$p") + VMGROUP_INDEX))
        cmp=$((rcp + 500))
        timeout 300 ibv_rc_pingpong -d pvrdma0 -g 1 -c -e -n 100 -p $rcp \
            "$(group_ip "$p")" > "/tmp/$tag.rc.$p-$me" 2>&1 &
        pids="$pids $!:rc.$p-$me"
        timeout 300 rping -c -a "$(group_ip "$p")" -p $cmp -C 10 -V -v \
            > "/tmp/$tag.rping.$p-$me" 2>&1 &
        pids="$pids $!:rping.$p-$me"
    done
    # (the names: TOOL.SERVER-CLIENT)
    for w in $pids; do
        rc=0
        wait "${w%%:*}" || rc=$?
        what=${w#*:}
        sed "s/^/[$tag $what] /" "/tmp/$tag.$what"
        [ $rc -eq 0 ] || { echo "=== $tag $what: exit status $rc"; bad="$bad $what"; }
    done
    [ -z "$bad" ] || fail "$tag: failed:$bad"
    for p; do
        grep -q "^100 iters in" "/tmp/$tag.rc.$p-$me" ||
            fail "$tag: ibv_rc_pingpong to $p did not report 100 iterations"
        grep -q "rdma-ping-9: " "/tmp/$tag.rping.$p-$me" ||
            fail "$tag: rping to $p: 10 pings not seen"
        echo "fabric4: $tag: $me -> $p: ibv_rc_pingpong -c and rping -V verified"
    done
    group_barrier "$tag-done" 300
}

if [ "$VMGROUP_LIFE" -gt 1 ]; then
    # D again, in a new QEMU on the same fabric directory
    echo "fabric4: $me is back (life $VMGROUP_LIFE)"
    xchg back 20000 $others
    kernel_clean
    echo GUEST-OK
    exit 0
fi

xchg a2a 18000 $others

# Open MPI over UCX, one rank per guest, A launching (mpi.sh's remote
# shell starts the other daemons).
. ./mpi.sh
hostname "vm-$me"
for r in $all; do echo "$(group_ip "$r") vm-$r"; done >> /etc/hosts
if [ "$me" = a ]; then
    group_barrier mpi-up
    hosts=$(for r in $all; do printf 'vm-%s:1,' "$r"; done)
    mpi_run "$VMGROUP_N" "${hosts%,}" ./mpi_alltoall 3 > /tmp/mpi.out 2>&1 ||
        { cat /tmp/mpi.out; fail "mpirun failed"; }
    cat /tmp/mpi.out
    grep -q "^mpi_alltoall: OK, $VMGROUP_N ranks" /tmp/mpi.out ||
        fail "mpi_alltoall: no OK line for $VMGROUP_N ranks"
    group_barrier mpi-done
else
    mpi_rshd
    group_barrier mpi-up
    group_barrier mpi-done $((MPI_TIMEOUT + 60))
fi

# NVMe over RDMA: A the target, the others initiators, connected at once;
# each writes and reads back its own three places of the namespace.
. ./nvmeof.sh
dmesg_mark
if [ "$me" = a ]; then
    nvmeof_target "$SELF_IP"
    group_barrier nvme-up
    group_barrier nvme-on 300
    group_barrier nvme-io 300
    echo 3 > /proc/sys/vm/drop_caches
    p=1
    while [ $p -le $((3 * (VMGROUP_N - 1))) ]; do
        echo "fabric4: nvmet place $p holds $(dd if=/dev/ram0 bs=65536 \
            count=16 skip=$((p * 16)) 2> /dev/null | md5sum | cut -c1-32)"
        p=$((p + 1))
    done
    nvmeof_target_down
else
    group_barrier nvme-up
    nvmeof_connect "$(group_ip a)"
    dev=$NVME_DEV
    echo "nvme-rdma: $dev connected, $(cat "/sys/block/${dev}n1/size") sectors"
    group_barrier nvme-on 300
    for k in 0 1 2; do
        p=$((VMGROUP_INDEX - 1 + (VMGROUP_N - 1) * k))
        nvme_io "$dev" $p ||
            fail "nvme-rdma: 1 MiB at place $p: write or read failed, or the data read back differs"
        echo "fabric4: nvme place $p written and read back equal ($(md5sum < /tmp/nvme.data | cut -c1-32))"
    done
    echo 1 > "/sys/class/nvme/$dev/delete_controller" ||
        fail "nvme-rdma: disconnect failed"
    group_barrier nvme-io 300
fi
dmesg_clean

if [ "$me" = d ]; then
    echo "fabric4: $me leaves (its QEMU ends; a new one boots it again)"
    kernel_clean
    echo GUEST-OK
    exit 0
fi
# D boots again in a new QEMU meanwhile (the barrier waits for it), and
# C unloads and reloads pvrdma.ko.
if [ "$me" = c ]; then
    rmmod pvrdma || fail "rmmod pvrdma"
    modprobe pvrdma || fail "modprobe pvrdma"
    wait_for 60 port_active || fail "pvrdma0 not ACTIVE after the reload"
    wait_for 60 gid_ready || fail "pvrdma0 has no RoCE v2 GID after the reload"
    echo "fabric4: $me reloaded pvrdma.ko"
fi
xchg back 20000 d
kernel_clean
echo GUEST-OK
GUEST

start=$SECONDS
vmgroup_run "$TEST_NAME" 600 4 "$TEST_OUT/guest.sh" --lives d 2 \
    --arg --smp --arg 1 \
    --a-arg -d --a-arg ",fabric-path=$fdir/ab,fabric-listen=127.0.0.1:7471" \
    --b-arg -d --b-arg ",fabric-path=$fdir/ab,fabric-listen=127.0.0.1:7472" \
    --c-arg -d --c-arg ",fabric-path=$fdir/cd,fabric-listen=127.0.0.1:7473,fabric-peer=127.0.0.1:7471" \
    --d-arg -d --d-arg ",fabric-path=$fdir/cd,fabric-listen=127.0.0.1:7474" \
    --arg --add --arg "$TESTS_TOP/tests/guest/mpi.sh" \
    --arg --add --arg "$mpi_prog"

# What the guests said they verified, each ordered pair in its client's
# log; the MPI job; each place of the namespace as its writer left it.
vmlog() { echo "$PVRDMA_OUT/vm/$TEST_NAME-$1.log"; }
said() { # LOG-ROLE TAG CLIENT SERVER
    grep -q "^fabric4: $2: $3 -> $4: ibv_rc_pingpong -c and rping -V verified" \
        "$(vmlog "$1")" ||
        fail "$2: no verified exchange of ${3^^} with ${4^^} in $(vmlog "$1")"
}
for x in a b c d; do
    for y in a b c d; do
        [ "$x" = "$y" ] || said "$x" a2a "$x" "$y"
    done
done
for x in a b c; do
    said d2 back d "$x"
    said "$x" back "$x" d
done
grep -q "^fabric4: c reloaded pvrdma.ko" "$(vmlog c)" ||
    fail "C did not reload pvrdma.ko, see $(vmlog c)"
grep -q "^mpi_alltoall: 4 ranks on vm-a vm-b vm-c vm-d" "$(vmlog a)" ||
    fail "Open MPI: the ranks were not on the four guests, see $(vmlog a)"
grep -q "^mpi_alltoall: OK, 4 ranks" "$(vmlog a)" ||
    fail "Open MPI: no verified all-to-all in $(vmlog a)"
for x in b c d; do
    n=0
    while read -r p sum; do
        held=$(sed -n "s/^fabric4: nvmet place $p holds \([0-9a-f]*\).*/\1/p" "$(vmlog a)")
        [[ -n $sum && $sum == "$held" ]] ||
            fail "NVMe over RDMA: ${x^^} wrote MD5 '$sum' at place $p, A's RAM disk holds '$held'"
        n=$((n + 1))
    done < <(sed -n 's/^fabric4: nvme place \([0-9]*\) written and read back equal (\([0-9a-f]*\)).*/\1 \2/p' "$(vmlog "$x")")
    [ $n -eq 3 ] || fail "NVMe over RDMA: ${x^^} reported $n places, not 3"
done
grep -h "^mpi_alltoall: " "$(vmlog a)" | sed 's/^/  /'
pass "4 VMs on one fabric of two directories joined over TCP (A, B | C, D; only C names a peer): ibv_rc_pingpong -c and rping -V between all 12 ordered pairs at once, Open MPI over UCX all-to-all with 4 ranks, NVMe over RDMA to A from B, C and D at once (data checked in A's RAM disk), D in a new QEMU verified again with A, B and C (C's driver reloaded) ($((SECONDS - start)) s)"
