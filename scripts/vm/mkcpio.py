#!/usr/bin/env python3
"""Write a newc cpio archive (the initramfs format) to stdout.

mkcpio.py [--dev PATH:c|b:MAJOR:MINOR:MODE]... DIR[=PREFIX]...

Every entry is owned by root (uid/gid 0) with mtime 0, so the same tree gives the same
bytes. Device nodes are written from --dev without needing mknod on the host, which
is how /dev/console exists before devtmpfs is mounted. Later archives concatenated
after this one override entries of the same name (the kernel extracts in order).
"""
import os
import stat
import sys

out = sys.stdout.buffer
ino = [1]


def entry(name, mode, data=b"", nlink=1, rdev=(0, 0)):
    name_b = name.encode() + b"\0"
    hdr = "070701" + "".join(
        "%08X" % v
        for v in (
            ino[0], mode, 0, 0, nlink, 0, len(data), 0, 0, rdev[0], rdev[1],
            len(name_b), 0,
        )
    )
    ino[0] += 1
    out.write(hdr.encode() + name_b)
    out.write(b"\0" * ((4 - (110 + len(name_b)) % 4) % 4))
    out.write(data)
    out.write(b"\0" * ((4 - len(data) % 4) % 4))


def add_tree(top, prefix):
    if prefix:
        # parent directories of the prefix
        parts = prefix.split("/")
        for i in range(1, len(parts) + 1):
            entry("/".join(parts[:i]), stat.S_IFDIR | 0o755, nlink=2)
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        rel = os.path.relpath(dirpath, top)
        for n in sorted(dirnames) + sorted(filenames):
            p = os.path.join(dirpath, n)
            r = os.path.normpath(os.path.join(prefix, rel, n)) if prefix else os.path.normpath(os.path.join(rel, n))
            st = os.lstat(p)
            m = st.st_mode
            if stat.S_ISDIR(m):
                entry(r, m, nlink=2)
            elif stat.S_ISLNK(m):
                entry(r, m, os.readlink(p).encode())
            elif stat.S_ISREG(m):
                with open(p, "rb") as f:
                    entry(r, m, f.read())
            elif stat.S_ISCHR(m) or stat.S_ISBLK(m):
                entry(r, m, rdev=(os.major(st.st_rdev), os.minor(st.st_rdev)))
            # sockets and fifos are skipped


args = sys.argv[1:]
devs = []
while args and args[0] == "--dev":
    devs.append(args[1])
    args = args[2:]
for a in args:
    top, _, prefix = a.partition("=")
    add_tree(top, prefix.strip("/"))
for d in devs:
    path, kind, major, minor, mode = d.split(":")
    t = stat.S_IFCHR if kind == "c" else stat.S_IFBLK
    entry(path.strip("/"), t | int(mode, 8), rdev=(int(major), int(minor)))
entry("TRAILER!!!", 0)
out.write(b"\0" * ((512 - out.tell() % 512) % 512) if out.seekable() else b"")
out.flush()
