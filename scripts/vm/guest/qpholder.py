#!/usr/bin/env python3
"""Holds RDMA objects the way a leaking application does (ctypes over rdma-core's
libibverbs, no compiler needed): opens DEVICE, allocates a PD and a CQ, then creates
RC QPs until N exist or ibv_create_qp fails, forks a child that inherits the uverbs
descriptor (it only sleeps), and sleeps.

Prints one line once everything exists, then sleeps until killed:
  HOLDER parent=<pid> child=<pid> qps=<created> stop=<errno name or "none">
When the parent is killed with SIGKILL, the kernel keeps its objects (the child still
has the device file open) and stops naming an owner for them.

Usage: qpholder.py DEVICE N
"""
import ctypes
import errno
import os
import sys
import time

dev_name = sys.argv[1].encode()
want = int(sys.argv[2])
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
    sys.exit(f"qpholder: {what} failed: {os.strerror(ctypes.get_errno())}")


count = ctypes.c_int(0)
devs = lib.ibv_get_device_list(ctypes.byref(count))
dev = next((devs[i] for i in range(count.value)
            if lib.ibv_get_device_name(devs[i]) == dev_name), None)
if dev is None:
    sys.exit(f"qpholder: no device {dev_name.decode()}")
ctx = lib.ibv_open_device(dev) or die("ibv_open_device")
pd = lib.ibv_alloc_pd(ctx) or die("ibv_alloc_pd")
cq = lib.ibv_create_cq(ctx, 16, None, None, 0) or die("ibv_create_cq")
qps = []
stop = "none"
while len(qps) < want:
    a = QpInitAttr(send_cq=cq, recv_cq=cq, cap=QpCap(4, 4, 1, 1, 0), qp_type=2)  # IBV_QPT_RC
    q = lib.ibv_create_qp(pd, ctypes.byref(a))
    if not q:
        stop = errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
        break
    qps.append(q)
child = os.fork()
if child == 0:
    while True:
        time.sleep(3600)
print(f"HOLDER parent={os.getpid()} child={child} qps={len(qps)} stop={stop}", flush=True)
while True:
    time.sleep(3600)
