#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""A hostile client of a fabric-listen port (docs/fabric.md, "Hostile input").

    fabric_flood.py HOST:PORT flood N
        N connections one after the other, each sending a valid HELLO of
        this wire version and then a frame of an unknown type (the fabric
        closes the link), as fast as they go; prints the seconds it took.
    fabric_flood.py HOST:PORT silent N SECONDS
        N connections that send nothing, and one more that sends a HELLO's
        header a byte a second; holds them SECONDS, then exits.
"""
import os
import re
import socket
import struct
import sys
import time

MAGIC = 0x46525650          # "PVRF"


def link_version():
    """PVRDMA_LINK_VERSION, read from the header it is defined in."""
    h = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                     "../../hw/pvrdma/pvrdma_link.h")
    with open(h) as f:
        return int(re.search(r"#define PVRDMA_LINK_VERSION\s+(\d+)",
                             f.read()).group(1))


VERSION = link_version()
HELLO = 1
HELLO_SIZE = 24


def header(kind, length):
    return struct.pack("<IBBHII", MAGIC, VERSION, kind, 0, length, 0)


def connect(host, port):
    return socket.create_connection((host, port), timeout=30)


def flood(host, port, n):
    start = time.monotonic()
    for i in range(n):
        s = connect(host, port)
        # instance (not 0, one per connection), ring 0 (TCP), zero, serial
        hello = struct.pack("<QIIQ", 0x7000 + i, 0, 0, 1)
        s.sendall(header(HELLO, HELLO_SIZE) + hello + header(99, 0))
        s.close()
    print(f"{time.monotonic() - start:.3f}")


def silent(host, port, n, seconds):
    socks = [connect(host, port) for _ in range(n)]
    trickle = connect(host, port)
    hdr = header(HELLO, HELLO_SIZE)
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        if i < len(hdr):
            try:
                trickle.send(hdr[i:i + 1])
            except OSError:
                pass            # closed by the fabric: what is tested
            i += 1
        time.sleep(1)
    for s in socks + [trickle]:
        s.close()


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    what, n = sys.argv[2], int(sys.argv[3])
    if what == "flood":
        flood(host, int(port), n)
    elif what == "silent":
        silent(host, int(port), n, float(sys.argv[4]))
    else:
        sys.exit(f"fabric_flood.py: unknown mode {what}")


if __name__ == "__main__":
    main()
