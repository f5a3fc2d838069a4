#!/usr/bin/env python3
"""The host side of plans that need a peer outside the guest (plan interop).

scripts/vm/run starts it on the host end of the tap link (10.0.3.1) before the
guest boots. The guest asks it, one JSON line per request over TCP, to start a
command on the host and later to wait for it:

  {"op": "start", "id": "x", "argv": ["ibv_rc_pingpong", ...]}  -> {"ok": true}
  {"op": "wait", "id": "x", "timeout": 60}  -> {"rc": 0, "out": "..."}

Only the rdma-core / perftest tools and rdmakit may be started; each runs with
the environment the agent was given (LD_LIBRARY_PATH = the drop-in
libibverbs, RDMAKIT_SOFT_ADDR = the tap address, ...), so Debian's unmodified
tools on the host drive the soft NIC. A command still running past its wait
timeout is killed (rc 124). Usage: hostagent.py ADDR PORT LOGDIR
"""
import json
import os
import socketserver
import subprocess
import sys
import threading

ALLOWED = {"ibv_rc_pingpong", "ibv_ud_pingpong", "ibv_uc_pingpong", "ibv_srq_pingpong",
           "rping", "ucmatose", "udaddy",
           "ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_atomic_bw", "ib_send_lat",
           "ib_write_lat", "ib_read_lat", "ibv_devinfo", "rdmakit"}
PROCS = {}
LOCK = threading.Lock()
LOGDIR = "."


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            try:
                req = json.loads(line)
                resp = self.serve(req)
            except Exception as e:  # a bad request gets an answer, never kills the agent
                resp = {"error": f"{type(e).__name__}: {e}"}
            self.wfile.write((json.dumps(resp) + "\n").encode())
            self.wfile.flush()

    def serve(self, req):
        op = req.get("op")
        if op == "start":
            argv = req["argv"]
            if os.path.basename(argv[0]) not in ALLOWED:
                return {"error": f"not allowed: {argv[0]}"}
            log = open(os.path.join(LOGDIR, f"host-{req['id']}.log"), "w+b")
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            with LOCK:
                PROCS[req["id"]] = (p, log)
            return {"ok": True, "pid": p.pid}
        if op == "wait":
            with LOCK:
                p, log = PROCS.pop(req["id"])
            try:
                rc = p.wait(timeout=req.get("timeout", 60))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                rc = 124
            log.seek(0)
            out = log.read().decode(errors="replace")
            log.close()
            return {"rc": rc, "out": out}
        return {"error": f"unknown op {op!r}"}


def main():
    global LOGDIR
    addr, port, LOGDIR = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    os.makedirs(LOGDIR, exist_ok=True)
    socketserver.ThreadingTCPServer.allow_reuse_address = True
    with socketserver.ThreadingTCPServer((addr, port), Handler) as srv:
        srv.daemon_threads = True
        print(f"hostagent listening on {addr}:{port}", flush=True)
        srv.serve_forever()


if __name__ == "__main__":
    main()
