#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The device's stats property and `info pvrdma`, sampled while a test runs.

    stats.py sample SOCKET OUT PID
                                 connect to a QEMU's QMP socket (waiting
                                 for it to appear while process PID, the
                                 test, lives), find its pvrdma
                                 device, and append one JSON line per
                                 second to OUT (the stats property; every
                                 fifth also `info pvrdma`) until QEMU
                                 closes the socket
    stats.py check KIND OUT...   check the samples of guests whose one
                                 link is of KIND (shm, tcp or tls); print a
                                 summary, exit 1 with the reason if wrong

tests/guest/test-xvm.sh and test-xhost.sh run it beside their two guests.
"""
import json
import os
import socket
import sys
import time


class Qmp:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.f = self.s.makefile("rw")
        self.reply()                    # greeting
        self.call("qmp_capabilities")

    def reply(self):
        line = self.f.readline()
        if not line:
            raise EOFError
        return json.loads(line)

    def call(self, name, **args):
        msg = {"execute": name}
        if args:
            msg["arguments"] = args
        self.f.write(json.dumps(msg) + "\n")
        self.f.flush()
        while True:
            r = self.reply()
            if "return" in r:
                return r["return"]
            if "error" in r:
                raise RuntimeError(f"{name}: {r['error'].get('desc')}")


def device_path(q):
    for parent in ("/machine/peripheral", "/machine/peripheral-anon"):
        for child in q.call("qom-list", path=parent):
            if child["type"] == "child<pvrdma>":
                return f"{parent}/{child['name']}"
    raise RuntimeError("no pvrdma device in /machine/peripheral*")


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def sample(path, out, test_pid):
    while True:                         # QEMU is starting: its socket comes
        try:
            q = Qmp(path)
            break
        except (FileNotFoundError, ConnectionRefusedError, EOFError):
            if not alive(test_pid):
                return                  # the test failed before QEMU ran
            time.sleep(0.2)
    dev = device_path(q)
    n = 0
    with open(out, "a") as f:
        try:
            while True:
                rec = {"t": time.time(),
                       "stats": q.call("qom-get", path=dev, property="stats")}
                if n % 5 == 0:
                    rec["info"] = q.call("human-monitor-command",
                                         **{"command-line": "info pvrdma"})
                f.write(json.dumps(rec) + "\n")
                f.flush()
                n += 1
                time.sleep(1)
        except (EOFError, OSError):
            pass                        # QEMU went: the run is over


COUNTERS = ("frames-out", "frames-in", "bytes-out", "bytes-in",
            "kicks-out", "kicks-in", "shrinks")
# A shm link's memfd: 4 MiB data ring, 256 KiB frame ring, counters page.
RING_MAP = (4 << 20) + (256 << 10) + 4096
KINDS = ("uc", "pd", "mr", "cq", "qp", "srq", "pinned-pages")


def check(kind, out):
    recs = [json.loads(x) for x in open(out) if x.strip()]
    name = os.path.basename(out)
    if len(recs) < 3:
        raise AssertionError(f"{name}: {len(recs)} samples (QEMU never "
                             "answered the stats property?)")
    for r in recs:
        st = r["stats"]
        for k in KINDS:
            u = st[k]
            if not 0 <= u["used"] <= u["max"] or u["max"] == 0:
                raise AssertionError(f"{name}: {k} used {u['used']} of "
                                     f"max {u['max']}")
        # Honest peers: no link turned away, no message held back.
        for k in ("messages-suppressed", "links-closed-half-open",
                  "links-hello-timeout", "links-refused-uid",
                  "links-refused-tls", "frames-dropped-unowned",
                  "gids-refused"):
            if st[k]:
                raise AssertionError(f"{name}: {k} is {st[k]} between "
                                     "honest peers")
        # (a second link to the same peer lives only until HELLO)
        st["links"] = [x for x in st["links"] if x["up"]]
        if len(st["links"]) > 1:
            raise AssertionError(f"{name}: {len(st['links'])} links up, "
                                 "one peer")
    up = [r for r in recs if r["stats"]["links"]]
    if len(up) < 3:
        raise AssertionError(f"{name}: the link was up in {len(up)} samples")
    for r in up:
        link = r["stats"]["links"][0]
        if link["kind"] != kind:
            raise AssertionError(f"{name}: link {link['name']} is "
                                 f"{link['kind']}, not {kind}")
        # Our rings hold at most their memfd; a TCP link has none.
        limit = RING_MAP if kind == "shm" else 0
        if not 0 <= link["ring-bytes"] <= limit:
            raise AssertionError(f"{name}: ring-bytes {link['ring-bytes']}"
                                 f" on a {kind} link (at most {limit})")
    # One link's counters never go back, and the traffic moved them.
    first, last = up[0]["stats"]["links"][0], up[-1]["stats"]["links"][0]
    for a, b in zip(up, up[1:]):
        la, lb = a["stats"]["links"][0], b["stats"]["links"][0]
        if la["name"] == lb["name"]:
            for c in COUNTERS:
                if lb[c] < la[c]:
                    raise AssertionError(f"{name}: {c} went back from "
                                         f"{la[c]} to {lb[c]}")
    if first["name"] == last["name"]:
        for c in ("frames-out", "frames-in", "bytes-out", "bytes-in"):
            if last[c] - first[c] < (1 << 20 if c.startswith("bytes") else
                                     1000):
                raise AssertionError(f"{name}: {c} moved from {first[c]} "
                                     f"to {last[c]} only")
    qps = [r["stats"]["qp"]["used"] for r in recs]
    if max(qps) == min(qps):
        raise AssertionError(f"{name}: QPs in use always {qps[0]}")
    info = [r["info"] for r in up if "info" in r]
    if not any(f"{kind}, up, frames out" in i and "in use: uc " in i
               for i in info):
        raise AssertionError(f"{name}: `info pvrdma` never showed the "
                             f"link up: {info[:1]}")
    return (f"{name}: {len(recs)} samples, QPs in use {min(qps)}-"
            f"{max(qps)}, link {last['name']} ({kind}) "
            f"{last['bytes-out']} B out / {last['bytes-in']} B in, "
            f"{last['frames-out']} frames out, {last['kicks-out']} kicks out"
            f", rings {min(r['stats']['links'][0]['ring-bytes'] for r in up) >> 10}"
            f"-{max(r['stats']['links'][0]['ring-bytes'] for r in up) >> 10} KiB,"
            f" {last['shrinks']} shrinks")


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "sample":
        sample(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif len(sys.argv) >= 4 and sys.argv[1] == "check":
        try:
            for out in sys.argv[3:]:
                print("  stats " + check(sys.argv[2], out))
        except AssertionError as e:
            sys.exit(f"stats: {e}")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
