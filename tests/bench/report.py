#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The report of `make bench` (tests/bench/bench.sh).

    report.py DIR MACHINE

reads DIR/results.txt (lines "R SETUP TRANSPORT TEST SIZE REP VALUE UNIT")
and writes DIR/results.json (median, min and max of every series point),
DIR/results.md (tables, ratios of this device to Soft-RoCE, TCP and the
host's memcpy, all from this one run) and DIR/plots.gp with its data files
(gnuplot makes latency.png and bandwidth.png from them).
"""
import json
import os
import statistics
import sys

SETUPS = [("vm", "one VM"), ("2vm", "two VMs"),
          ("2tcp", "two VMs over TCP (veth)")]
TRANSPORTS = [("pvrdma", "pvrdma"), ("rxe", "Soft-RoCE"), ("tcp", "TCP")]
UNITS = {}
BY_REP = {}     # (setup, transport, test, size) -> {round: value}


def load(path):
    data = {}
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) != 8 or w[0] != "R":
                continue
            _, setup, tr, test, size, _rep, value, unit = w
            try:
                v = float(value)
            except ValueError:
                sys.exit(f"report.py: not a number in: {line.strip()}")
            data.setdefault((setup, tr, test, int(size)), []).append(v)
            BY_REP.setdefault((setup, tr, test, int(size)), {})[_rep] = v
            UNITS[test] = unit
    return data


def stats(vals):
    return {"median": statistics.median(vals), "min": min(vals),
            "max": max(vals), "n": len(vals)}


def size_str(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def fmt(v):
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}" if v >= 0.1 else f"{v:.3f}"


def main():
    out, machine = sys.argv[1], sys.argv[2]
    data = load(os.path.join(out, "results.txt"))
    if not data:
        sys.exit("report.py: no results")
    summary = {f"{s}/{t}/{x}/{n}": dict(stats(v), unit=UNITS[x])
               for (s, t, x, n), v in sorted(data.items())}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"machine": machine, "results": summary}, f, indent=1,
                  sort_keys=True)

    def med(setup, tr, test, size):
        v = data.get((setup, tr, test, size))
        return statistics.median(v) if v else None

    def spread(setup, tr, test, size):
        v = data.get((setup, tr, test, size))
        if not v or len(v) < 2:
            return ""
        m = statistics.median(v)
        return f" ±{100 * (max(v) - min(v)) / 2 / m:.0f}%" if m else ""

    def sizes(test):
        return sorted({k[3] for k in data if k[2] == test})

    md = [f"Measured by `make bench` on {machine}; every figure is the "
          "median of the rounds of this one run (± half the spread between "
          "the fastest and slowest round, in % of the median). Ratios "
          "compare within this run only. Where the host's memcpy was "
          "measured right after each round (one VM, two VMs), pvrdma / "
          "memcpy is "
          "the median of the rounds' ratios (slowest-fastest round in "
          "brackets) and the memcpy column the median of those memcpys.",
          ""]
    present = [(s, sl) for s, sl in SETUPS
               if any(k[0] == s for k in data)]

    def ratio(a, b):
        return f"{fmt(a / b)}x" if a and b else "-"

    def of_memcpy(s, test, n):
        """pvrdma / memcpy: the median of each round's ratio to the
        memcpy measured right after it (guest-bench.sh), with the
        spread; else the one memcpy measured before the guests."""
        own = BY_REP.get((s, "host", f"memcpy_{test}", n), {})
        runs = BY_REP.get((s, "pvrdma", test, n), {})
        r = [runs[k] / own[k] for k in runs if own.get(k)]
        if r:
            pct = f"{100 * statistics.median(r):.1f}%"
            if len(r) > 1:
                pct += f" ({100 * min(r):.0f}-{100 * max(r):.0f}%)"
            return statistics.median(own.values()), pct
        p, mc = med(s, "pvrdma", test, n), med("host", "memcpy", "memcpy", n)
        return mc, f"{100 * p / mc:.1f}%" if p and mc else "-"

    for s, sl in present:
        # Latency: lower is better; the ratios say how much lower ours is.
        md += [f"### Latency, {sl} (usec, lower is better)", "",
               "| test | size | pvrdma | Soft-RoCE | TCP (qperf) |"
               " Soft-RoCE / pvrdma | TCP / pvrdma |",
               "|---|---|---|---|---|---|---|"]
        for test in ("send_lat", "write_lat", "read_lat"):
            for n in sizes(test):
                p = med(s, "pvrdma", test, n)
                r = med(s, "rxe", test, n)
                t = med(s, "tcp", "tcp_lat", n) if test == "send_lat" else None
                md.append(f"| {test} | {size_str(n)} |"
                          f" {fmt(p)}{spread(s, 'pvrdma', test, n)} |"
                          f" {fmt(r)} | {fmt(t)} | {ratio(r, p)} |"
                          f" {ratio(t, p)} |")
        md.append("")
        # Bandwidth: higher is better; ours over theirs, and of memcpy.
        md += [f"### Bandwidth, {sl} (MB/s = 10^6 B/s, higher is better)",
               "",
               "| test | size | pvrdma | Soft-RoCE | TCP (qperf) |"
               " host memcpy | pvrdma / Soft-RoCE | pvrdma / TCP |"
               " pvrdma / memcpy |",
               "|---|---|---|---|---|---|---|---|---|"]
        for test in ("write_bw", "send_bw", "read_bw"):
            for n in sizes(test):
                mc, pct = of_memcpy(s, test, n)
                p = med(s, "pvrdma", test, n)
                r = med(s, "rxe", test, n)
                t = med(s, "tcp", "tcp_bw", n) if test == "send_bw" else None
                md.append(f"| {test} | {size_str(n)} |"
                          f" {fmt(p)}{spread(s, 'pvrdma', test, n)} |"
                          f" {fmt(r)} | {fmt(t)} | {fmt(mc)} |"
                          f" {ratio(p, r)} | {ratio(p, t)} |"
                          f" {pct} |")
        md.append("")

    # Two VMs against the two-copy limit (bench.sh, pipe_bw).
    pipes = [(n, med("host", "pipe", "pipe", n)) for n in (1 << 20, 4 << 20)]
    if any(v for _, v in pipes) and any(k[0] == "2vm" for k in data):
        md += ["### Two VMs against the host's two-copy limit", "",
               "The two-copy limit: two host threads moving messages "
               "through a 4 MiB ring in 1 MiB steps, as the fabric's "
               "shared-memory link does (tests/bench/pipe_bw.c).", "",
               "| test | size | pvrdma two VMs | two-copy limit | host memcpy |"
               " pvrdma / limit | pvrdma / memcpy |",
               "|---|---|---|---|---|---|---|"]
        for test in ("write_bw", "send_bw", "read_bw"):
            for n, lim in pipes:
                p = med("2vm", "pvrdma", test, n)
                if p is None:
                    continue
                mc, pct = of_memcpy("2vm", test, n)
                md.append(f"| {test} | {size_str(n)} | {fmt(p)} |"
                          f" {fmt(lim)} | {fmt(mc)} | {ratio(p, lim)} |"
                          f" {pct} |")
        md.append("")

    # The TCP link against plain TCP between two host processes over the
    # same veth pair (bench.sh, host_tcp).
    stream = med("2tcp", "host", "tcp_stream", 1 << 20)
    rtt = med("2tcp", "host", "tcp_rtt", 2)
    rtt_spin = med("2tcp", "host", "tcp_rtt_spin", 2)
    if stream or rtt:
        md += ["### The fabric's TCP link against plain TCP over the same "
               "veth pair", "",
               "Plain TCP: two host processes in the two namespaces "
               "(tests/bench/tcp_host.c), a stream of 1 MiB writes and a "
               "2-byte round trip, both sides asleep in read() or both "
               "spinning on the socket (as perftest polls its CQ). "
               "ib_send_lat prints half its round trip.", "",
               "| measure | pvrdma over the TCP link | plain TCP |"
               " pvrdma / plain TCP |",
               "|---|---|---|---|"]
        for label, test, n, t, tl in (
                ("ib_write_bw 1 MiB (MB/s) / TCP stream",
                 "write_bw", 1 << 20, stream, "tcp_stream"),
                ("ib_read_bw 1 MiB (MB/s) / TCP stream",
                 "read_bw", 1 << 20, stream, "tcp_stream"),
                ("ib_send_lat 2 B (usec, one way) / TCP round trip",
                 "send_lat", 2, rtt, "tcp_rtt"),
                ("ib_send_lat 2 B / TCP round trip, spinning",
                 "send_lat", 2, rtt_spin, "tcp_rtt_spin")):
            p = med("2tcp", "pvrdma", test, n)
            tn = 1 << 20 if tl == "tcp_stream" else 2
            md.append(f"| {label} | {fmt(p)}{spread('2tcp', 'pvrdma', test, n)}"
                      f" | {fmt(t)}{spread('2tcp', 'host', tl, tn)} |"
                      f" {ratio(p, t)} |")
        md.append("")

    # The same link in TLS, measured right after (bench.sh, bench-2tls):
    # 1 MiB and 2 B, or in a quick run the sizes both measured.
    def both(test, pick):
        n = [k[3] for k in data if k[:3] == ("2tls", "pvrdma", test)
             and ("2tcp", "pvrdma", test, k[3]) in data]
        return pick(n) if n else None

    bn, ln = both("write_bw", max), both("send_lat", min)
    if bn or ln:
        tls_bw = med("2tls", "pvrdma", "write_bw", bn)
        tls_lat = med("2tls", "pvrdma", "send_lat", ln)
        bw = med("2tcp", "pvrdma", "write_bw", bn)
        lat = med("2tcp", "pvrdma", "send_lat", ln)
        added = (f"{100 * (tls_lat - lat) / lat:+.0f}%" if tls_lat and lat
                 else "-")
        md += ["### The TCP link in TLS against the plain TCP link", "",
               "The same two VMs over the same veth pair, booted again with "
               "fabric-tls-creds (x509 certificates, with fabric-tls-authz) on both QEMUs "
               "(docs/fabric.md, \"TLS on TCP links\").", "",
               "| measure | plain TCP link | TLS link | TLS / plain |",
               "|---|---|---|---|",
               f"| ib_write_bw {size_str(bn or 0)} (MB/s) | {fmt(bw)}"
               f"{spread('2tcp', 'pvrdma', 'write_bw', bn)} |"
               f" {fmt(tls_bw)}"
               f"{spread('2tls', 'pvrdma', 'write_bw', bn)} |"
               f" {ratio(tls_bw, bw)} |",
               f"| ib_send_lat {size_str(ln or 0)} (usec) | {fmt(lat)}"
               f"{spread('2tcp', 'pvrdma', 'send_lat', ln)} |"
               f" {fmt(tls_lat)}{spread('2tls', 'pvrdma', 'send_lat', ln)} |"
               f" {ratio(tls_lat, lat)} ({added}) |", ""]

    # Devices on one fabric directory (bench.sh, fabric_scale).
    ns = sorted({k[3] for k in data if k[:3] == ("scale", "fabric", "join")})
    if ns:
        md += ["### Devices on one fabric directory", "",
               "N processes, each the device core with a fake guest "
               "(tests/bench/fabric_scale.c), start together and join one "
               "directory: the time until every one is linked to every "
               "other, the descriptors its fabric then holds, the host "
               "memory its outgoing rings hold per link once joined; then "
               "all-to-all 64-byte RDMA WRITEs for 2 s (8 outstanding per "
               "QP, one QP to each other process, sleeping on an armed CQ "
               "when it is empty; all processes share the machine's cores) "
               "and the rings' memory per link 1.5 s after.", "",
               "| devices | all linked after (ms) | fds per process |"
               " ring memory per link, joined (KiB) |"
               " all-to-all (M msg/s) | ring memory per link after (KiB) |",
               "|---|---|---|---|---|---|"]
        for n in ns:
            md.append(f"| {n} | {fmt(med('scale', 'fabric', 'join', n))} |"
                      f" {fmt(med('scale', 'fabric', 'fds', n))} |"
                      f" {fmt(med('scale', 'fabric', 'ring_link', n))} |"
                      f" {fmt(med('scale', 'fabric', 'alltoall', n))} |"
                      f" {fmt(med('scale', 'fabric', 'ring_after', n))} |")
        md.append("")

    # Many QPs between two VMs (guest-bench.sh bench_many_qps, qp_mem).
    many = sorted(k[3] for k in data
                  if k[:3] == ("2vm", "pvrdma", "write_rate_qps") and k[3] > 1)
    if many:
        n = many[-1]
        one = med("2vm", "pvrdma", "write_rate_qps", 1)
        lots = med("2vm", "pvrdma", "write_rate_qps", n)
        heap = med("scale", "device", "qp_heap", n)
        rings = med("scale", "device", "qp_rings", n)
        md += [f"### {n} connected QPs between two VMs", "",
               "ib_write_bw 64 B, tx-depth 32, the same number of "
               f"messages on one QP and spread over {n} QPs at once "
               "(guest B to guest A on one fabric directory). The "
               "device's host memory per connected QP is measured "
               "without QEMU (tests/bench/qp_mem.c: heap in use after "
               f"{n} connected pairs, each having carried a WRITE); its "
               "rings are guest memory the device maps.", "",
               "| | M msg/s | ratio to one QP |", "|---|---|---|",
               f"| one QP | {fmt(one)}"
               f"{spread('2vm', 'pvrdma', 'write_rate_qps', 1)} | 1.00x |",
               f"| {n} QPs | {fmt(lots)}"
               f"{spread('2vm', 'pvrdma', 'write_rate_qps', n)} |"
               f" {ratio(lots, one)} |", "",
               f"Host memory per QP: {fmt(heap)} bytes of heap; its send "
               f"and receive rings (32 WRs of one SGE) {fmt(rings)} bytes "
               "of guest memory.", ""]

    md += ["### Message rate (million messages/s)", ""]
    head = "| test | size |" + "".join(
        f" pvrdma {sl} | Soft-RoCE {sl} |" for _, sl in present)
    md += [head, "|---|---|" + "---|---|" * len(present)]
    for test in ("write_rate", "send_rate", "read_rate"):
        for n in sizes(test):
            md.append(f"| {test} | {size_str(n)} |" + "".join(
                f" {fmt(med(s, 'pvrdma', test, n))} |"
                f" {fmt(med(s, 'rxe', test, n))} |" for s, _ in present))
    md.append("")

    md += ["### ibv_rc_pingpong, 64 B (usec per round trip)", ""]
    head = "| mode |" + "".join(
        f" pvrdma {sl} | Soft-RoCE {sl} |" for _, sl in present)
    md += [head, "|---|" + "---|---|" * len(present)]
    for test, name in (("pingpong", "polling"),
                       ("pingpong_event", "completion events (-e)")):
        md.append(f"| {name} |" + "".join(
            f" {fmt(med(s, 'pvrdma', test, 64))}{spread(s, 'pvrdma', test, 64)} |"
            f" {fmt(med(s, 'rxe', test, 64))} |" for s, _ in present))
    md.append("")
    md += ["### Streaming 64 KiB: completion events against polling (MB/s)",
           "",
           "`ib_send_bw -e` against `ib_send_bw`; WRITE with "
           "tests/guest/progs/ev_bw.c `-e` against the same tool polling "
           "(Debian 12's perftest has no -e for WRITE).", ""]
    head = "| test |" + "".join(
        f" pvrdma {sl} | events / polling | Soft-RoCE {sl} |"
        for _, sl in present)
    md += [head, "|---|" + "---|---|---|" * len(present)]
    for name, ev, poll in (("SEND, events", "send_bw_event", "send_bw"),
                           ("WRITE, events", "write_bw_event",
                            "write_bw_evpoll"),
                           ("WRITE, polling", "write_bw_evpoll", None)):
        row = f"| {name} |"
        for s, _ in present:
            p = med(s, "pvrdma", ev, 65536)
            q = med(s, "pvrdma", poll, 65536) if poll else None
            pct = f"{100 * p / q:.0f}%" if p and q else "-"
            row += (f" {fmt(p)}{spread(s, 'pvrdma', ev, 65536)} | {pct} |"
                    f" {fmt(med(s, 'rxe', ev, 65536))} |")
        md.append(row)
    md.append("")
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(md))

    # Plot data: one file per line, columns size median min max.
    gp = ["set terminal png size 1000,600 noenhanced",
          "set logscale xy", "set grid", "set key outside right",
          "set xlabel 'message size (bytes)'"]
    lines = {"latency": [], "bandwidth": []}
    plots = [("latency", [(s, t, x) for s, _ in present
                          for t, x in (("pvrdma", "send_lat"),
                                       ("pvrdma", "write_lat"),
                                       ("pvrdma", "read_lat"),
                                       ("rxe", "send_lat"),
                                       ("tcp", "tcp_lat"))]),
             ("bandwidth", [("host", "memcpy", "memcpy")] +
              [(s, t, x) for s, _ in present
               for t, x in (("pvrdma", "write_bw"), ("pvrdma", "read_bw"),
                            ("rxe", "write_bw"), ("tcp", "tcp_bw"))])]
    for plot, series in plots:
        for s, t, x in series:
            pts = sorted(k[3] for k in data if k[:3] == (s, t, x))
            if not pts:
                continue
            name = f"{plot}-{s}-{t}-{x}.dat"
            with open(os.path.join(out, name), "w") as f:
                for n in pts:
                    v = data[(s, t, x, n)]
                    f.write(f"{n} {statistics.median(v)} {min(v)} {max(v)}\n")
            label = ("host memcpy (one core)" if s == "host" else
                     f"{dict(TRANSPORTS)[t]} {x}, {dict(SETUPS)[s]}")
            lines[plot].append(f"'{name}' using 1:2:3:4 with yerrorlines "
                               f"title '{label}'")
    gp += ["set output 'latency.png'",
           "set ylabel 'latency (usec, typical)'",
           f"set title 'Latency ({machine})' noenhanced",
           "plot " + ", \\\n     ".join(lines["latency"]),
           "set output 'bandwidth.png'",
           "set ylabel 'bandwidth (MB/s)'",
           f"set title 'Bandwidth ({machine})' noenhanced",
           "plot " + ", \\\n     ".join(lines["bandwidth"]), ""]
    ns = sorted({k[3] for k in data if k[:3] == ("scale", "fabric", "join")})
    if ns:
        with open(os.path.join(out, "scale.dat"), "w") as f:
            for n in ns:
                f.write(f"{n} {med('scale', 'fabric', 'join', n)}"
                        f" {med('scale', 'fabric', 'fds', n)}"
                        f" {med('scale', 'fabric', 'ring_link', n)}"
                        f" {1000 * (med('scale', 'fabric', 'alltoall', n) or 0)}"
                        f"\n")
        gp += ["set output 'scale.png'", "set logscale xy",
               "set xlabel 'devices on one fabric directory'",
               "set ylabel 'ms / count / KiB / k msg/s'",
               f"set title 'One fabric, N devices ({machine})' noenhanced",
               "plot 'scale.dat' using 1:2 with linespoints title "
               "'all linked to all after (ms)', \\",
               "     'scale.dat' using 1:3 with linespoints title "
               "'fds per process', \\",
               "     'scale.dat' using 1:4 with linespoints title "
               "'ring KiB per link, joined', \\",
               "     'scale.dat' using 1:5 with linespoints title "
               "'all-to-all k msg/s'", ""]
    with open(os.path.join(out, "plots.gp"), "w") as f:
        f.write("\n".join(gp))


if __name__ == "__main__":
    main()
