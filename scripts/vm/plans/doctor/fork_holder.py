#!/usr/bin/env python3
"""Leaves RDMA objects behind the way the seed's leaked-QP case does on a real
kernel: a process opens DEVICE, creates a PD, a CQ and N RC QPs through
libibverbs (ctypes, no compiler needed), then forks a child that inherits the
uverbs file descriptor and sleeps. When the parent is killed with SIGKILL, the
kernel keeps its objects (the file is still open in the child) and stops naming
an owner PID for them (the creating task is gone).

Prints "PARENT <pid> CHILD <pid>" once everything exists, then sleeps.
Usage: fork_holder.py DEVICE N
"""
import ctypes
import os
import sys
import time

dev_name = sys.argv[1].encode()
n = int(sys.argv[2])
lib = ctypes.CDLL("libibverbs.so.1", use_errno=True)
vp = ctypes.c_void_p
lib.ibv_get_device_list.restype = ctypes.POINTER(vp)
lib.ibv_get_device_list.argtypes = [ctypes.POINTER(ctypes.c_int)]
lib.ibv_get_device_name.restype = ctypes.c_char_p
lib.ibv_get_device_name.argtypes = [vp]
lib.ibv_open_device.restype = vp
lib.ibv_open_device.argtypes = [vp]
lib.ibv_alloc_pd.restype = vp
lib.ibv_alloc_pd.argtypes = [vp]
lib.ibv_create_cq.restype = vp
lib.ibv_create_cq.argtypes = [vp, ctypes.c_int, vp, vp, ctypes.c_int]
lib.ibv_create_qp.restype = vp


class QpCap(ctypes.Structure):
    _fields_ = [(f, ctypes.c_uint32) for f in
                ("max_send_wr", "max_recv_wr", "max_send_sge", "max_recv_sge", "max_inline_data")]


class QpInitAttr(ctypes.Structure):
    _fields_ = [("qp_context", vp), ("send_cq", vp), ("recv_cq", vp), ("srq", vp),
                ("cap", QpCap), ("qp_type", ctypes.c_int), ("sq_sig_all", ctypes.c_int)]


lib.ibv_create_qp.argtypes = [vp, ctypes.POINTER(QpInitAttr)]


def die(what):
    sys.exit(f"fork_holder: {what} failed: {os.strerror(ctypes.get_errno())}")


count = ctypes.c_int(0)
devs = lib.ibv_get_device_list(ctypes.byref(count))
dev = next((devs[i] for i in range(count.value)
            if lib.ibv_get_device_name(devs[i]) == dev_name), None)
if dev is None:
    sys.exit(f"fork_holder: no device {dev_name.decode()}")
ctx = lib.ibv_open_device(dev) or die("ibv_open_device")
pd = lib.ibv_alloc_pd(ctx) or die("ibv_alloc_pd")
cq = lib.ibv_create_cq(ctx, 16, None, None, 0) or die("ibv_create_cq")
qps = []
for _ in range(n):
    a = QpInitAttr(send_cq=cq, recv_cq=cq, cap=QpCap(4, 4, 1, 1, 0), qp_type=2)  # IBV_QPT_RC
    qps.append(lib.ibv_create_qp(pd, ctypes.byref(a)) or die("ibv_create_qp"))
child = os.fork()
if child == 0:
    # The child only keeps the inherited uverbs descriptor open.
    while True:
        time.sleep(3600)
print(f"PARENT {os.getpid()} CHILD {child}", flush=True)
while True:
    time.sleep(3600)
