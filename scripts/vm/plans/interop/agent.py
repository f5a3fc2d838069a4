#!/usr/bin/env python3
"""Guest-side client of scripts/vm/hostagent.py (the host end of the tap link).

  agent.py start ID CMD [ARG]...   start CMD on the host
  agent.py wait ID SECONDS         wait for it; print its output; exit with its status
  agent.py ping                    exit 0 once the agent answers (retries ~30 s)
"""
import json
import socket
import sys
import time

ADDR = ("10.0.3.1", 7000)


def call(req):
    with socket.create_connection(ADDR, timeout=300) as s:
        s.sendall((json.dumps(req) + "\n").encode())
        f = s.makefile("rb")
        return json.loads(f.readline())


def main():
    op = sys.argv[1]
    if op == "ping":
        for _ in range(60):
            try:
                with socket.create_connection(ADDR, timeout=2):
                    return 0
            except OSError:
                time.sleep(0.5)
        print("host agent at 10.0.3.1:7000 unreachable")
        return 1
    if op == "start":
        r = call({"op": "start", "id": sys.argv[2], "argv": sys.argv[3:]})
        if not r.get("ok"):
            print(f"host start failed: {r}")
            return 1
        return 0
    if op == "wait":
        r = call({"op": "wait", "id": sys.argv[2], "timeout": float(sys.argv[3])})
        if "rc" not in r:
            print(f"host wait failed: {r}")
            return 1
        sys.stdout.write(r["out"])
        return r["rc"]
    print(f"unknown op {op}")
    return 2


sys.exit(main())
