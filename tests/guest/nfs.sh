# Guest-side helper (busybox sh) for NFS over RDMA with the kernel's nfsd
# and Debian 12's nfs-utils (exportfs, rpc.mountd, rpc.nfsd, mount.nfs),
# NFS version 4.2 only, so no rpcbind, statd or lockd:
#   nfs_server IP      export a tmpfs as the NFSv4 root, nfsd listening for
#                      RDMA on IP:20049 (and TCP on 2049)
#   nfs_server_md5     MD5 of the file the client wrote, read on the server
#   nfs_server_down    stop nfsd and rpc.mountd
#   nfs_client IP      mount IP:/ with proto=rdma, write $NFS_MB MiB (16) of
#                      random data, unmount, mount again (cold page cache), read
#                      it back and compare; check the mount's transport was
#                      RDMA and the data came back in RDMA READs; unmount
# Each calls fail() (pair.sh or sync.sh) on any error. The kernel log is
# checked with dmesg_mark / dmesg_clean from nvmeof.sh.
NFS_EXPORT=/srv/nfs
NFS_PORT=20049

nfs_server() {
    modprobe nfsd && modprobe rpcrdma || fail "modprobe nfsd rpcrdma"
    mkdir -p /proc/fs/nfsd /var/lib/nfs/v4recovery $NFS_EXPORT
    grep -q " /proc/fs/nfsd " /proc/mounts ||
        mount -t nfsd nfsd /proc/fs/nfsd || fail "cannot mount nfsd"
    mount -t tmpfs -o size=64m tmpfs $NFS_EXPORT ||
        fail "cannot mount the tmpfs to export"
    : > /var/lib/nfs/etab
    echo "$NFS_EXPORT *(rw,sync,no_root_squash,insecure,fsid=0)" > /etc/exports
    exportfs -ra || fail "exportfs failed"
    rpc.mountd -N 2 -N 3 --no-udp || fail "rpc.mountd failed"
    # Shortest grace period after start (10 s), so no OPEN waits long.
    echo 10 > /proc/fs/nfsd/nfsv4gracetime &&
        echo 10 > /proc/fs/nfsd/nfsv4leasetime || fail "nfsd: grace time"
    rpc.nfsd -N 3 --no-udp --port 2049 --rdma=$NFS_PORT 4 || fail "rpc.nfsd failed"
    grep -qx "rdma $NFS_PORT" /proc/fs/nfsd/portlist ||
        fail "nfsd does not listen for RDMA ($(cat /proc/fs/nfsd/portlist))"
    echo "nfsd: $NFS_EXPORT exported, listening on rdma $NFS_PORT ($1)"
}

nfs_server_md5() {
    md5sum < $NFS_EXPORT/data | cut -c1-32
}

nfs_server_down() {
    rpc.nfsd 0 || fail "rpc.nfsd 0 failed"
    killall rpc.mountd
    exportfs -ua || fail "exportfs -ua failed"
    # nfsd's file cache closes the files it held from a workqueue, after
    # nfsd has stopped: the tmpfs stays busy until that has run.
    local i=0
    until umount $NFS_EXPORT 2>/dev/null; do
        i=$((i + 1))
        [ $i -lt 60 ] || fail "cannot unmount the export: $(umount $NFS_EXPORT 2>&1)"
        sleep 1
    done
    echo "nfsd: stopped"
}

# _nfs_mount IP: mount the server's root over RDMA on /mnt/nfs
_nfs_mount() {
    mkdir -p /mnt/nfs
    mount -t nfs4 -o vers=4.2,proto=rdma,port=$NFS_PORT "$1:/" /mnt/nfs ||
        fail "mount of $1:/ over RDMA failed"
    grep -q " /mnt/nfs nfs4 .*proto=rdma" /proc/mounts ||
        fail "the mount does not use proto=rdma"
}

# _nfs_span FROM TO: TO - FROM, in seconds to a tenth
_nfs_span() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# _nfs_now: seconds since boot (for the phase times nfs_client prints)
_nfs_now() { cut -d' ' -f1 /proc/uptime; }

nfs_client() {
    local reads t0 t1 t2 t3
    t0=$(_nfs_now)
    modprobe nfsv4 && modprobe rpcrdma || fail "modprobe nfsv4 rpcrdma"
    t1=$(_nfs_now)
    _nfs_mount "$1"
    t2=$(_nfs_now)
    dd if=/dev/urandom of=/tmp/nfs.data bs=65536 count=$((${NFS_MB:-16} * 16)) 2>/dev/null ||
        fail "cannot make the data"
    cp /tmp/nfs.data /mnt/nfs/data && sync || fail "NFS write failed"
    umount /mnt/nfs || fail "umount failed"
    t3=$(_nfs_now)
    _nfs_mount "$1"
    cmp /tmp/nfs.data /mnt/nfs/data || fail "the file read back differs"
    # mountstats: the transport line, and READ: ops, bytes received...
    grep -q "xprt:[[:space:]]*rdma " /proc/self/mountstats ||
        fail "mountstats shows no RDMA transport"
    reads=$(awk '$1 == "READ:" { print $2 }' /proc/self/mountstats)
    [ "${reads:-0}" -gt 0 ] || fail "the file was not read over NFS"
    umount /mnt/nfs || fail "umount failed"
    echo "nfs-rdma: ${NFS_MB:-16} MiB written and read back equal in $reads READs ($(md5sum < /tmp/nfs.data | cut -c1-32))"
    echo "nfs-rdma: seconds: modprobe $(_nfs_span "$t0" "$t1"), mount $(_nfs_span "$t1" "$t2"), write and unmount $(_nfs_span "$t2" "$t3"), mount, read and unmount $(_nfs_span "$t3" "$(_nfs_now)")"
}
