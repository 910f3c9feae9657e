#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""One QMP command to a QEMU's monitor socket (tests that drive QEMU).

    qmp.py SOCKET COMMAND [JSON_ARGUMENTS]

prints the command's "return" as JSON; an error reply, or a QEMU that
closes the socket, exits 1 with QEMU's message. Events are skipped.
"""
import json
import socket
import sys


def main():
    path, cmd = sys.argv[1], sys.argv[2]
    args = json.loads(sys.argv[3]) if len(sys.argv) > 3 else None
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
    except OSError as e:
        sys.exit(f"qmp.py: {path}: {e}")
    f = s.makefile("rw")

    def reply():
        line = f.readline()
        if not line:
            sys.exit(f"qmp.py: QEMU closed {path}")
        return json.loads(line)

    def call(name, arguments=None):
        msg = {"execute": name}
        if arguments is not None:
            msg["arguments"] = arguments
        f.write(json.dumps(msg) + "\n")
        f.flush()
        while True:
            r = reply()
            if "return" in r:
                return r["return"]
            if "error" in r:
                sys.exit(f"qmp.py: {name}: {r['error'].get('desc', r)}")

    reply()                     # the greeting
    call("qmp_capabilities")
    if cmd == "quit":
        # QEMU may close the socket before or after it answers.
        f.write(json.dumps({"execute": "quit"}) + "\n")
        f.flush()
        f.readline()
        print("{}")
        return
    print(json.dumps(call(cmd, args)))


if __name__ == "__main__":
    main()
