#!/usr/bin/env bash
# Where the time of an event-mode ping-pong goes (a benchmark, not a test:
# it asserts nothing).  Two processes of one guest run ibv_rc_pingpong -e
# on pvrdma0 (each waits in ibv_get_cq_event, i.e. in read() on the
# completion channel, for every completion) while
#   - QEMU traces every doorbell and interrupt of the device with host
#     timestamps (-d trace:pvrdma_doorbell,trace:pvrdma_irq), and
#   - the guest kernel traces the CQ interrupt, the wake-up of the waiting
#     process, its switch-in and the return of its read() (ftrace),
# then the same guest measures a plain round trip between two of its
# processes over a unix socket pair (tests/bench/ipc_rtt.c): the guest's
# own cost of waking a sleeping process, with no device involved.  Every
# round is run twice: as booted, and with the guest kernel's idle=poll
# (an idle vCPU spins instead of halting, so an interrupt or wake-up IPI
# never has to wake a sleeping vCPU thread on the host).
#
# One "hop" is one message of the ping-pong: from the SEND doorbell of one
# side to the SEND doorbell of the other side's reply.  Printed, medians
# over all hops of all rounds, in microseconds:
#   hop                 SEND doorbell to the peer's SEND doorbell (host)
#   device              SEND doorbell to the CQ interrupt sent (host;
#                       the device executes the SEND, writes both CQEs
#                       and the CQ notifications, raises MSI-X vector 2)
#   guest ISR           CQ interrupt handler entry to exit (guest: the
#                       driver drains the notification ring and calls the
#                       completion handlers, ib_uverbs wakes the reader)
#   ISR to wake-up      handler entry to the waiter's sched_wakeup
#   wake-up to run      sched_wakeup to sched_switch into the waiter
#   run to user         switch-in to the return of read() (guest)
# and the share of CQ interrupts that found their vCPU idle (halted: the
# host must wake that vCPU's thread first).
#
#   tests/bench/events.sh [-r ROUNDS] [-n ITERS]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
rounds=3 iters=3000
while [ $# -gt 0 ]; do
    case $1 in
    -r) rounds=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    *) echo "usage: $0 [-r ROUNDS] [-n ITERS]" >&2; exit 2 ;;
    esac
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
gcc -O2 -static -Wall -Wextra -Werror -o "$out/ipc_rtt" \
    "$top/tests/bench/ipc_rtt.c"

cat > "$out/guest.sh" <<GUEST
T=/sys/kernel/tracing
mount -t tracefs nodev \$T
ibv_rc_pingpong -d pvrdma0 -g 1 -n $iters -e > /tmp/s 2>&1 & sleep 1
echo 16384 > \$T/buffer_size_kb
for e in irq/irq_handler_entry irq/irq_handler_exit sched/sched_wakeup \\
         sched/sched_switch raw_syscalls/sys_exit; do
    echo 1 > \$T/events/\$e/enable
done
echo 'id == 0' > \$T/events/raw_syscalls/sys_exit/filter
echo 1 > \$T/tracing_on
ibv_rc_pingpong -d pvrdma0 -g 1 -n $iters -e 127.0.0.1 > /tmp/c 2>&1; wait
echo 0 > \$T/tracing_on
echo "PE \$(sed -n 's/.*= \([0-9.]*\) usec\/iter.*/\1/p' /tmp/c)"
echo "IPC \$(./ipc_rtt $iters)"
echo FTRACE-BEGIN
grep -v '^#' \$T/trace
echo FTRACE-END
GUEST

for r in $(seq "$rounds"); do
    for v in halt poll; do
        k=()
        [ $v = poll ] && k=(-k idle=poll)
        PVRDMA_IOTHREAD= "$top/scripts/vm.sh" --name "bench-events-$v" \
            --smp 2 --timeout 900 "${k[@]}" \
            -q -msg -q timestamp=on \
            -q -d -q trace:pvrdma_doorbell,trace:pvrdma_irq \
            -q -D -q "$out/host-$v-$r.log" \
            --add "$out/guest.sh" --add "$out/ipc_rtt" -- sh ./guest.sh \
            > "$out/guest-$v-$r.log"
        grep -E '^(PE|IPC) ' "$out/guest-$v-$r.log" | sed "s/^/$v /" \
            >> "$out/all"
        echo "round $r $v: $(grep "^$v " "$out/all" | tail -2 | tr '\n' ' ')"
    done
done

python3 - "$out" "$rounds" <<'PY'
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])

def med(xs):
    return statistics.median(xs) if xs else float('nan')

# Host trace: "TID@SEC.USEC:pvrdma_doorbell offset 0xO val 0xV" and
# "TID@SEC.USEC:pvrdma_irq vector N".  UAR page offset 0 is the QP
# doorbell (bit 30 SEND), the low 24 bits of the value the QP handle.
line = re.compile(r'^(\d+)@(\d+\.\d+):pvrdma_(doorbell|irq) (.*)$')
def host(path):
    hops, dev, last_send, pending = [], [], None, {}
    for l in open(path):
        m = line.match(l)
        if not m:
            continue
        tid, t, kind, rest = m.group(1), float(m.group(2)) * 1e6, \
            m.group(3), m.group(4)
        if kind == 'doorbell':
            off, val = (int(x, 16) for x in
                        re.findall(r'0x([0-9a-f]+)', rest)[:2])
            if off & 0xfff == 0 and val & (1 << 30):
                qp = val & 0xffffff
                if last_send and last_send[1] != qp:
                    hops.append(t - last_send[0])
                last_send = (t, qp)
                pending[tid] = t
        elif rest == 'vector 2' and tid in pending:
            dev.append(t - pending.pop(tid))
    return hops, dev

# Guest ftrace: "COMM-PID [CPU] FLAGS TIME: EVENT: ARGS"
ev = re.compile(r'^\s*(.+)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+): (.*)$')
def guest(path):
    isr, to_wake, to_run, to_user = [], [], [], []
    idle = total = 0
    entry = {}          # cpu -> entry time of a CQ interrupt in progress
    last_irq = None     # entry time of the latest CQ interrupt
    woken = {}          # pid -> wake-up time
    running = {}        # pid -> switch-in time
    inside = False
    for l in open(path):
        if l.startswith('FTRACE-BEGIN'):
            inside = True
            continue
        if l.startswith('FTRACE-END'):
            break
        m = ev.match(l) if inside else None
        if not m:
            continue
        comm, pid, cpu, t, name, args = m.groups()
        t = float(t) * 1e6
        if name == 'irq_handler_entry' and 'pvrdma-cq' in args:
            entry[cpu] = last_irq = t
            total += 1
            idle += comm.strip() == '<idle>'
        elif name == 'irq_handler_exit' and cpu in entry:
            isr.append(t - entry.pop(cpu))
        elif name == 'sched_wakeup' and 'comm=ibv_rc_pingpong' in args:
            p = re.search(r'pid=(\d+)', args).group(1)
            woken[p] = t
            if last_irq is not None:
                to_wake.append(t - last_irq)
                last_irq = None
        elif name == 'sched_switch':
            p = re.search(r'next_pid=(\d+)', args).group(1)
            if p in woken:
                to_run.append(t - woken.pop(p))
                running[p] = t
        elif name == 'sys_exit' and pid in running:
            to_user.append(t - running.pop(pid))
    return isr, to_wake, to_run, to_user, idle, total

figs = {}
for v in ('halt', 'poll'):
    acc = {k: [] for k in ('hop', 'device', 'isr', 'wake', 'run', 'user')}
    idle = total = 0
    for r in range(1, rounds + 1):
        h, d = host(f'{out}/host-{v}-{r}.log')
        acc['hop'] += h
        acc['device'] += d
        i, w, rn, u, idl, tot = guest(f'{out}/guest-{v}-{r}.log')
        acc['isr'] += i
        acc['wake'] += w
        acc['run'] += rn
        acc['user'] += u
        idle += idl
        total += tot
    vals = {}
    for l in open(f'{out}/all'):
        w = l.split()
        if w[0] == v:
            vals.setdefault(w[1], []).append(float(w[2]))
    figs[v] = {k: med(x) for k, x in acc.items()}
    figs[v]['pe'] = med(vals.get('PE', []))
    figs[v]['ipc'] = med(vals.get('IPC', []))
    figs[v]['idle'] = 100.0 * idle / total if total else float('nan')

rows = [('ibv_rc_pingpong -e, usec/iter', 'pe'),
        ('guest socketpair round trip', 'ipc'),
        ('hop (doorbell to reply doorbell)', 'hop'),
        ('  device: doorbell to MSI-X', 'device'),
        ('  guest ISR, entry to exit', 'isr'),
        ('  ISR entry to wake-up', 'wake'),
        ('  wake-up to run', 'run'),
        ('  run to read() return', 'user'),
        ('CQ interrupts on an idle vCPU, %', 'idle')]
print(f'{"medians, usec":36s} {"as booted":>10s} {"idle=poll":>10s}')
for name, k in rows:
    print(f'{name:36s} {figs["halt"][k]:10.1f} {figs["poll"][k]:10.1f}')
PY
