#!/usr/bin/python3
"""A FUSE file system of one file, `hang`, whose read answers nothing for SECONDS
(default 20) and then fails with EIO: what a sysfs read into a wedged driver does,
for longer than any deadline under test (the sweep's 10 s, the health check's 5 s).
The cluster tier's fleet plan bind-mounts it over a node's fw_ver (a FIFO no longer
stands in: every reader of a host tree refuses FIFOs without opening them).
Debian's python3-fusepy.

Why it ends at all: a FUSE read the daemon has taken cannot be interrupted, not even
by SIGKILL (the kernel waits for the answer), and a thread stuck there keeps its
process, and the pipes it holds (slurmd's, of HealthCheckProgram), alive. A real
wedged driver never lets go; rdmakit's deadlines answer in time, but the process
lingers until the read returns (docs/slurm.md).

Usage: hangfs.py MOUNTPOINT [SECONDS]   (foreground; unmount with fusermount3 -u)
"""
import errno
import stat
import sys
import time

from fusepy import FUSE, FuseOSError, Operations


class Hang(Operations):
    def getattr(self, path, fh=None):
        if path == "/":
            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2)
        if path == "/hang":
            return dict(st_mode=stat.S_IFREG | 0o444, st_nlink=1, st_size=16)
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        return [".", "..", "hang"]

    def read(self, path, size, offset, fh):
        time.sleep(HANG_SECONDS)
        raise FuseOSError(errno.EIO)


if __name__ == "__main__":
    HANG_SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 20.0
    FUSE(Hang(), sys.argv[1], foreground=True, nothreads=False, allow_other=True, ro=True)
