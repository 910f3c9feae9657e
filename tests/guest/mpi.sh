# Guest-side helper (busybox sh) for Open MPI (Debian 12's openmpi-bin)
# across two guests. mpirun starts its remote daemon (orted) through a
# remote shell; the image has no ssh, so a tiny one stands in, good for a
# private test link only: the remote guest runs a listener on TCP port
# $MPI_RSH_PORT that reads one command line and runs it with sh, its
# stdin and stdout on the connection (as `ssh host CMD` would), and
# mpirun's "ssh" is a script that sends its arguments as that line.
#   mpi_rshd            (remote guest) serve commands until the guest ends
#   mpi_run NP HOSTS PROG [ARG...]
#                       (launching guest) mpirun over the UCX PML on
#                       pvrdma0:1 with rc_verbs and ud_verbs as UCX's only
#                       transports and no MPI byte transfer layer but
#                       "self", so ranks on two guests can talk only
#                       through the device; within $MPI_TIMEOUT seconds
# Both guests need distinct host names (Open MPI names nodes by them):
# mpi_hosts sets vm-a or vm-b (by VMPAIR_ROLE) and maps both names.
MPI_RSH_PORT=2222
MPI_TIMEOUT=${MPI_TIMEOUT:-300}

mpi_hosts() {
    hostname "vm-$VMPAIR_ROLE"
    if [ "$VMPAIR_ROLE" = a ]; then
        printf '%s vm-a\n%s vm-b\n' "$SELF_IP" "$PEER_IP"
    else
        printf '%s vm-a\n%s vm-b\n' "$PEER_IP" "$SELF_IP"
    fi >> /etc/hosts
}

# mpirun's "ssh" (the remote daemon checks for it too)
_mpi_agent() {
    cat > /tmp/mpi_rsh <<EOF
#!/bin/sh
host=\$1
shift
{ echo "\$*"; cat; } | nc "\$host" $MPI_RSH_PORT
EOF
    chmod +x /tmp/mpi_rsh
}

mpi_rshd() {
    _mpi_agent
    cat > /tmp/mpi_rshd_conn <<'EOF'
#!/bin/sh
read -r cmd
exec sh -c "$cmd"
EOF
    chmod +x /tmp/mpi_rshd_conn
    (while :; do nc -l -p $MPI_RSH_PORT -e /tmp/mpi_rshd_conn; done) \
        > /tmp/mpi_rshd.log 2>&1 &
    echo "mpi: remote shell listening on port $MPI_RSH_PORT"
}

mpi_run() {
    local np=$1 hosts=$2
    shift 2
    _mpi_agent
    timeout "$MPI_TIMEOUT" mpirun.openmpi --allow-run-as-root -np "$np" --host "$hosts" \
        --mca plm_rsh_agent /tmp/mpi_rsh --mca plm_rsh_no_tree_spawn 1 \
        --mca oob_tcp_if_include eth0 \
        --mca pml ucx --mca btl self --mca osc ucx \
        -x UCX_NET_DEVICES=pvrdma0:1 -x UCX_TLS=rc_verbs,ud_verbs,self \
        "$@"
}
