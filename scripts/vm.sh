#!/usr/bin/env bash
# Boot a test guest under TCG with -device pvrdma, run a command in it and
# return the command's output (on stdout, also saved as the console log) and
# its exit status.
#
#   scripts/vm.sh [options] [--] [COMMAND...]
#
# Without COMMAND the guest starts a shell on the console (interactive use;
# leave with `poweroff -f`). Options:
#   -n, --name NAME        guest name, used for the log (default: guest)
#   -t, --timeout SECONDS  hard limit for the whole run (default: 600)
#   -s, --smp N            vCPUs (default: 2)
#   -m, --mem MB           guest RAM (default: 1024)
#   -a, --add SRC[:DST]    copy a host file or directory into the guest;
#                          DST defaults to /run/files/<name of SRC>, which is
#                          also the command's working directory. A *.ko file
#                          can then be loaded with insmod. Repeatable.
#   -d, --device OPTS      append OPTS to every -device pvrdma (",max-qp=64")
#       --pvrdma N         number of pvrdma devices (default: 1)
#       --iothread         run the devices' doorbells and fabric links in
#                          an IOThread (-object iothread, iothread=); the
#                          default when PVRDMA_IOTHREAD=1 is set
#       --noload           do not load pvrdma.ko at boot
#       --net SPEC         back the NIC with -netdev SPEC,id=net0 instead of
#                          the default user-mode network, e.g. two guests on
#                          one link: dgram,local.type=unix,local.path=/x/a,
#                          remote.type=unix,remote.path=/x/b (and the mirror
#                          image for the other guest)
#       --ip A.B.C.D/N     address of the guest's eth0 (default 10.0.2.15/24)
#       --mac MAC          MAC address of the NIC (default: QEMU's), needed
#                          when guests share a link
#   -q, --qemu-arg ARG     extra QEMU argument, repeatable
#   -k, --kernel-arg ARG   extra guest kernel command-line argument
#                          ("idle=poll"), repeatable
#   -l, --log FILE         console log (default: build/vm/NAME.log)
# A bzImage kernel boots as its ELF vmlinux (PVH) and a .cpio.gz image
# uncompressed, made once in the cache (PVRDMA_FAST_BOOT=0: as given).
# Exit status: the command's, 124 if the hard timeout expired, 125 if the
# guest stopped without reporting a status (crash, panic).
. "$(dirname "$0")/lib.sh"

name=guest timeout=600 smp=2 mem=1024 ndev=1 devopts= noload= log=
iothread=${PVRDMA_IOTHREAD:-}
net=user ip='' mac=''
adds=() qargs=() kargs=()
while [ $# -gt 0 ]; do
    case "$1" in
    -n|--name) name=$2; shift 2 ;;
    -t|--timeout) timeout=$2; shift 2 ;;
    -s|--smp) smp=$2; shift 2 ;;
    -m|--mem) mem=$2; shift 2 ;;
    -a|--add) adds+=("$2"); shift 2 ;;
    -d|--device) devopts=$2; shift 2 ;;
    --pvrdma) ndev=$2; shift 2 ;;
    --iothread) iothread=1; shift ;;
    --noload) noload=1; shift ;;
    --net) net=$2; shift 2 ;;
    --ip) ip=$2; shift 2 ;;
    --mac) mac=$2; shift 2 ;;
    -q|--qemu-arg) qargs+=("$2"); shift 2 ;;
    -k|--kernel-arg) kargs+=("$2"); shift 2 ;;
    -l|--log) log=$2; shift 2 ;;
    -h|--help) sed -n '2,/^\. /p' "$0" | sed 's/^# \{0,1\}//; /^\. /d'; exit 0 ;;
    --) shift; break ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) break ;;
    esac
done
# --ip goes on the kernel command line: no spaces or other surprises
[ -z "$ip" ] || [[ $ip =~ ^[0-9]+(\.[0-9]+){3}/[0-9]+$ ]] ||
    die "--ip $ip: want A.B.C.D/N"

qemu=${PVRDMA_QEMU:-$PVRDMA_OUT/qemu-system-x86_64}
kernel=${PVRDMA_KERNEL:-$PVRDMA_OUT/vmlinuz}
initrd=${PVRDMA_INITRD:-$PVRDMA_OUT/initrd.cpio.gz}
for f in "$qemu" "$kernel" "$initrd"; do
    [ -e "$f" ] || die "$f is missing: run 'make' first"
done
# The same kernel and image in the forms that boot fastest (lib.sh,
# boot_kernel); PVRDMA_FAST_BOOT=0 boots them as they are.
if [ "${PVRDMA_FAST_BOOT:-1}" = 1 ]; then
    kernel=$(boot_kernel "$kernel")
    initrd=$(boot_initrd "$initrd")
fi
log=${log:-$PVRDMA_OUT/vm/$name.log}
mkdir -p "$(dirname "$log")"

work=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-vm.XXXXXX")
trap 'rm -rf "$work"' EXIT
interactive=
[ $# -gt 0 ] || interactive=1
# A small uncompressed cpio archive put before the image: the kernel
# unpacks both, so the base image never needs rebuilding for a run.
guest_files_cpio "$work/extra.cpio" "$*" "${adds[@]}"
cat "$work/extra.cpio" "$initrd" > "$work/initrd"

append="console=ttyS0 panic=-1 quiet loglevel=4"
[ -n "$noload" ] && append+=" pvrdma.noload"
# eth0's address, set by scripts/guest/init
[ -n "$ip" ] && append+=" pvrdma.ip=$ip"
for k in "${kargs[@]}"; do
    [[ $k =~ ^[A-Za-z0-9_.,=:-]+$ ]] || die "--kernel-arg '$k': one word, no quoting"
    append+=" $k"
done
nic=virtio-net-pci,netdev=net0,romfile=
[ -n "$mac" ] && nic+=",mac=$mac"
args=(-M pc -accel tcg -smp "$smp" -m "$mem" -no-reboot -display none
      -L /usr/share/qemu -L /usr/share/seabios
      -kernel "$kernel" -initrd "$work/initrd" -append "$append"
      -netdev "$net,id=net0" -device "$nic")
if [ "$iothread" = 1 ] && [ "$ndev" -gt 0 ]; then
    args+=(-object iothread,id=pvrdma-io)
    devopts+=",iothread=pvrdma-io"
fi
for ((i = 0; i < ndev; i++)); do
    args+=(-device "pvrdma$devopts")
done
args+=("${qargs[@]}")

log "booting '$name' (log: $log, timeout: ${timeout}s)"
if [ -n "$interactive" ]; then
    exec timeout -k 5 "$timeout" "$qemu" "${args[@]}" -serial mon:stdio
fi
set +e
timeout -k 5 "$timeout" "$qemu" "${args[@]}" -serial stdio </dev/null |
    stdbuf -oL tr -d '\r' | tee "$log"
st=("${PIPESTATUS[@]}")
set -e
if [ "${st[0]}" -eq 124 ] || [ "${st[0]}" -eq 137 ]; then
    log "'$name' hit the hard timeout of ${timeout}s (log: $log)"
    exit 124
fi
rc=$(sed -n 's/^PVRDMA-GUEST-EXIT-STATUS=\([0-9]*\)$/\1/p' "$log" | tail -n 1)
if [ -z "$rc" ]; then
    log "'$name' stopped without reporting a status (QEMU status ${st[0]}; log: $log)"
    exit 125
fi
exit "$rc"
