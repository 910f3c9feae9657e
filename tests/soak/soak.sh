#!/usr/bin/env bash
# The soak (make soak; not in CI): two guests, A and B, on one fabric
# directory exchange verified traffic for SOAK_MINUTES (30) while a third,
# C, joins the fabric and leaves it again and again.
#   - Rounds, A the client and B the server (tests/soak/soak-guest.sh):
#     ibv_rc_pingpong -c (4 KiB, 64 KiB or 1 MiB: MRs of every size),
#     ibv_ud_pingpong -c, ibv_srq_pingpong -c, rping -V (RDMA CM connect
#     and disconnect), every third round rc_verify (every RC opcode, byte
#     and completion field), and a ping-pong within A; every fifth round A
#     unloads and reloads pvrdma.ko first. New QPs, CQs, MRs and PDs for
#     every one of them.
#   - Every SOAK_C_EVERY seconds (240) a new QEMU C joins the directory,
#     runs ibv_rc_pingpong -c and rping -V with B, and quits.
#   - Every SOAK_INTERVAL seconds (10) the host samples A's and B's QEMU:
#     resident memory (all, and QEMU's own: without guest RAM and TCG's
#     code buffer), open fds, mappings, and what the
#     device holds (the x-objects property: user contexts, PDs, MRs, CQs,
#     QPs, SRQs, pinned guest pages).
# Passes when every round and every life of C passed, no guest kernel
# logged an oops, warning or hung task, and nothing grew: with every
# process of A and B ended, their devices hold exactly what they held
# before the first round, their QEMU has no more fds and at most 16 more
# mappings than then, and at most 32 MiB more resident memory of its
# own than at the end of the first tenth of the run (what the
# allocators settle at). Figures and plot in $PVRDMA_OUT/soak
# (soak.dat, soak-a.dat and soak-b.dat, soak.txt, soak.png).
. "$(dirname "$0")/../guest/lib.sh"
. "$TESTS_TOP/tests/guest/migrate.sh"      # qmp, free_port

minutes=${SOAK_MINUTES:-30}
every=${SOAK_C_EVERY:-240}
interval=${SOAK_INTERVAL:-10}
out=${SOAK_OUT:-$PVRDMA_OUT/soak}
secs=$((minutes * 60))
d=$TEST_OUT
mkdir -p "$out"
rm -f "$d"/*.sock "$out"/soak.*
rc_verify=$(build_prog rc_verify)
fdir=$(mktemp -d "${TMPDIR:-/tmp}/pvrdma-soak.XXXXXX")
pids=()
cleanup() {
    local p f
    # a guest that failed: the end of what its vm.sh and QEMU said
    for f in "$d"/*.status; do
        [ -e "$f" ] && [ "$(cat "$f")" != 0 ] && [ -s "${f%.status}.err" ] || continue
        printf '== %s (stderr of vm.sh and QEMU)\n' "${f%.status}.err" >&2
        tail -20 "${f%.status}.err" >&2
    done
    # a failed run still leaves its figures plotted (soak.png)
    if [ ! -s "$out/soak.png" ] && [ "$(wc -l < "$out/soak.dat" 2> /dev/null || echo 0)" -gt 3 ]; then
        plot > /dev/null 2>&1 || true
    fi
    for p in "${pids[@]}"; do
        pkill -KILL -s "$p" 2> /dev/null || true
    done
    rm -rf "$fdir"
}
trap cleanup EXIT
command -v gnuplot > /dev/null ||
    fail "gnuplot is missing: run scripts/install-deps.sh"

mport=$(free_port SOCK_DGRAM)
lan="socket,mcast=239.255.9.$((RANDOM % 250 + 1)):$mport,localaddr=127.0.0.1"
declare -A ip=([a]=10.9.0.1 [b]=10.9.0.2 [c]=10.9.0.3)
declare -A peer=([a]=10.9.0.2 [b]=10.9.0.1 [c]=10.9.0.2)
declare -A num=([a]=1 [b]=2 [c]=3)

# start ROLE NAME TIMEOUT: boot that guest in the background, in a
# session of its own; its log is $PVRDMA_OUT/vm/NAME.log, its vm.sh
# status in $d/NAME.status, what vm.sh and QEMU said on stderr in
# $d/NAME.err (printed if it fails).
start() {
    local r=$1 name=$2 limit=$3
    rm -f "$d/$name.status" "$d/$name.err" "$PVRDMA_OUT/vm/$name.log"
    setsid bash -c '"${@:2}" > /dev/null 2> "${1%.status}.err"; echo $? > "$1"' soak \
        "$d/$name.status" \
        "$PVRDMA_TOP/scripts/vm.sh" --name "$name" --timeout "$limit" \
        --net "$lan" --ip "${ip[$r]}/24" --mac "52:54:00:0a:09:0${num[$r]}" \
        -q -uuid -q "00000000-0000-4000-8000-0000000a090${num[$r]}" \
        -d ",id=p0,fabric-path=$fdir" \
        -q -qmp -q "unix:$d/qmp-$r.sock,server=on,wait=off" \
        -q -chardev -q "socket,id=ctl,path=$d/ctl-$r.sock,server=on,wait=off" \
        -q -device -q "isa-serial,chardev=ctl" \
        --add "$TESTS_TOP/tests/guest/sync.sh" \
        --add "$TESTS_TOP/tests/guest/pair.sh" \
        --add "$TESTS_TOP/tests/soak/soak-guest.sh" --add "$rc_verify" \
        -- "ROLE=$r SOAK_SECS=$secs SELF_IP=${ip[$r]} PEER_IP=${peer[$r]} C_IP=${ip[c]} sh ./soak-guest.sh" \
        < /dev/null &
    pids+=($!)
}
# await LOG LINE: until the guest printed LINE (its vm.sh still running).
await() {
    local name=$1 line=$2
    until grep -qx "$line" "$PVRDMA_OUT/vm/$name.log" 2> /dev/null; do
        [ ! -e "$d/$name.status" ] ||
            fail "$name ended before '$line' (status $(cat "$d/$name.status")), log $PVRDMA_OUT/vm/$name.log"
        sleep 0.5
    done
}
go() {
    python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"go\n")
s.close()' "$d/ctl-$1.sock"
}
qemu_pid() {
    local p
    for p in $(pgrep -f -- "unix:$d/qmp-$1.sock,server=on"); do
        [ "$(cat "/proc/$p/comm" 2> /dev/null)" = qemu-system-x86 ] && echo "$p"
    done | head -n 1
    return 0
}
# objects ROLE: the device's x-objects, as "uc pd mr cq qp srq pages".
objects() {
    qmp "$d/qmp-$1.sock" qom-get '{"path": "/machine/peripheral/p0", "property": "x-objects"}' |
        sed 's/"//g; s/[a-z-]*=//g'
}
status_kb() { sed -n "s/^$2:[[:space:]]*\([0-9]*\) kB/\1/p" "/proc/$1/status"; }
# own_kb PID: resident memory of QEMU's own mappings, without those of
# 256 MiB or more (guest RAM and TCG's code buffer: what the guest
# touches and translates is not QEMU growing).
own_kb() {
    awk '/^Size:/ { big = $2 >= 262144 } /^Rss:/ { if (!big) s += $2 }
         END { print s + 0 }' "/proc/$1/smaps"
}
# sample T ROLE: one line of soak.dat
sample() {
    local p=${pid[$2]}
    echo "$1 $2 $(status_kb "$p" VmRSS) $(own_kb "$p")" \
         "$(ls "/proc/$p/fd" | wc -l) $(wc -l < "/proc/$p/maps") $(objects "$2")"
}

# plot: soak.png from what was sampled (also after a failure).
plot() {
    for r in a b; do
        awk -v r="$r" '$2 == r' "$out/soak.dat" > "$out/soak-$r.dat"
    done
    cat > "$out/soak.gp" <<'GP'
set terminal pngcairo size 1200,900 font ",10"
set output "soak.png"
set multiplot layout 2,2 title "pvrdma soak: A's and B's QEMU (make soak)"
set xlabel "seconds"
set key top left
set title "QEMU's own resident memory, without guest RAM and TCG code (MiB)"
plot "soak-a.dat" using 1:($4/1024) with lines title "A", \
     "soak-b.dat" using 1:($4/1024) with lines title "B"
set title "open file descriptors"
plot "soak-a.dat" using 1:5 with lines title "A", \
     "soak-b.dat" using 1:5 with lines title "B"
set title "memory mappings"
plot "soak-a.dat" using 1:6 with lines title "A", \
     "soak-b.dat" using 1:6 with lines title "B"
set title "device objects and pinned pages / 100"
plot "soak-a.dat" using 1:11 with lines title "A QPs", \
     "soak-a.dat" using 1:9 with lines title "A MRs", \
     "soak-a.dat" using 1:($13/100) with lines title "A pinned pages / 100", \
     "soak-b.dat" using 1:11 with lines title "B QPs", \
     "soak-b.dat" using 1:9 with lines title "B MRs", \
     "soak-b.dat" using 1:($13/100) with lines title "B pinned pages / 100"
unset multiplot
GP
    (cd "$out" && gnuplot soak.gp)
}
log "soak: $minutes min, a new C every $every s, samples every $interval s (figures in $out)"
start a soak-a $((secs + 1800))
start b soak-b $((secs + 1800))
declare -A pid
for r in a b; do
    await "soak-$r" "SOAK-IDLE start"
    pid[$r]=$(qemu_pid "$r")
    [ -n "${pid[$r]}" ] || fail "cannot find $r's QEMU"
done
declare -A idle0
for r in a b; do
    idle0[$r]=$(objects "$r")
    log "$r before the first round: ${idle0[$r]} (uc pd mr cq qp srq pages)"
done
echo "# t role rss_kb own_kb fds maps uc pd mr cq qp srq pinned_pages" > "$out/soak.dat"
t0=$SECONDS
for r in a b; do sample 0 "$r" >> "$out/soak.dat"; go "$r"; done

lives=0 next_c=$((t0 + every / 2)) c_on=
while [ ! -e "$d/soak-a.status" ] && [ ! -e "$d/soak-b.status" ] &&
      ! { grep -qx "SOAK-IDLE end" "$PVRDMA_OUT/vm/soak-a.log" &&
          grep -qx "SOAK-IDLE end" "$PVRDMA_OUT/vm/soak-b.log"; }; do
    now=$SECONDS
    for r in a b; do sample $((now - t0)) "$r" >> "$out/soak.dat" || true; done
    # C: one life at a time, none started after the time is up.
    if [ -n "$c_on" ] && [ -e "$d/$c_on.status" ]; then
        st=$(cat "$d/$c_on.status")
        [ "$st" = 0 ] || fail "$c_on failed (status $st), log $PVRDMA_OUT/vm/$c_on.log"
        grep -qx SOAK-GUEST-OK "$PVRDMA_OUT/vm/$c_on.log" || fail "$c_on did not finish, log $PVRDMA_OUT/vm/$c_on.log"
        c_on=
    fi
    if [ -z "$c_on" ] && [ "$now" -ge "$next_c" ] && [ $((now - t0)) -lt $((secs - 120)) ]; then
        lives=$((lives + 1))
        c_on=soak-c$lives
        start c "$c_on" 900
        next_c=$((now + every))
    fi
    while [ $((SECONDS - now)) -lt "$interval" ]; do sleep 1; done
done
# The last C, if any, ends first (b serves it until then).
while [ -n "$c_on" ] && [ ! -e "$d/$c_on.status" ]; do sleep 1; done
[ -z "$c_on" ] || [ "$(cat "$d/$c_on.status")" = 0 ] ||
    fail "$c_on failed, log $PVRDMA_OUT/vm/$c_on.log"
for r in a b; do await "soak-$r" "SOAK-IDLE end"; done
declare -A idle1
for r in a b; do
    idle1[$r]=$(objects "$r")
    sample $((SECONDS - t0)) "$r" >> "$out/soak.dat"
    go "$r"
done
for r in a b; do
    while [ ! -e "$d/soak-$r.status" ]; do sleep 1; done
    [ "$(cat "$d/soak-$r.status")" = 0 ] ||
        fail "guest $r failed, log $PVRDMA_OUT/vm/soak-$r.log"
done

# What happened, and what grew.
rounds=$(sed -n 's/^SOAK-ROUNDS //p' "$PVRDMA_OUT/vm/soak-a.log")
reloads=$(grep -c "^SOAK-RELOAD " "$PVRDMA_OUT/vm/soak-a.log" || true)
served=$(grep -c "^SOAK-C-LIFE .* ok" "$PVRDMA_OUT/vm/soak-b.log" || true)
[ -n "$rounds" ] && [ "$rounds" -gt 0 ] || fail "A ran no round"
[ "$served" = "$lives" ] || fail "$lives lives of C, B served $served"
{
    echo "soak: $minutes min, $rounds rounds ($reloads module reloads in A), $lives lives of C"
    python3 - "$out/soak.dat" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if not l.startswith("#")]
end = max(int(r[0]) for r in rows)
for role in "ab":
    rs = [r for r in rows if r[1] == role]
    first = [r for r in rs if int(r[0]) <= end / 10] or rs[:1]
    zero, ref, last = rs[0], first[-1], rs[-1]
    print(f"{role.upper()}'s QEMU, {len(rs)} samples: RSS {int(ref[2]) // 1024} MiB"
          f" at {ref[0]} s, {int(last[2]) // 1024} MiB at the end ({last[0]} s);"
          f" QEMU's own (without guest RAM and TCG's code buffer)"
          f" {int(ref[3]) // 1024} / {int(last[3]) // 1024} MiB;"
          f" fds {zero[4]} before the first round / {last[4]} after the last;"
          f" mappings {zero[5]} / {last[5]}; most at once: QPs"
          f" {max(int(r[10]) for r in rs)}, MRs {max(int(r[8]) for r in rs)},"
          f" pinned pages {max(int(r[12]) for r in rs)}")
    print(f"GROWTH {role} {int(last[3]) - int(ref[3])} {int(last[4]) - int(zero[4])}"
          f" {int(last[5]) - int(zero[5])}")
PY
} > "$out/soak.txt" || fail "cannot summarise $out/soak.dat"
for r in a b; do
    echo "$r: device objects before the first round: ${idle0[$r]}; after the last: ${idle1[$r]} (uc pd mr cq qp srq pages)" >> "$out/soak.txt"
done
grep -v "^GROWTH" "$out/soak.txt"
plot || fail "gnuplot failed"
for r in a b; do
    [ "${idle0[$r]}" = "${idle1[$r]}" ] ||
        fail "$r's device held ${idle0[$r]} before the first round and ${idle1[$r]} after the last (uc pd mr cq qp srq pages)"
    read -r _ _ anon fds maps <<< "$(grep "^GROWTH $r " "$out/soak.txt")"
    [ "$fds" -le 0 ] && [ "$maps" -le 16 ] && [ "$anon" -le 32768 ] ||
        fail "$r's QEMU grew: $fds fds, $maps mappings, $anon kB resident memory of its own (figures in $out/soak.txt)"
done
pass "$minutes min: $rounds rounds, $reloads reloads, $lives lives of C; devices back to what they held, QEMU flat ($out/soak.png)"
