"""The frames of a classic pcap file (what the fuzz seed scripts and the
capture tools read): one reader instead of a copy in each script."""
import struct


def frames(path):
    """Yields each captured frame of the pcap file at `path`, in order."""
    d = open(path, "rb").read()
    off = 24
    while off + 16 <= len(d):
        incl = struct.unpack("<I", d[off + 8:off + 12])[0]
        yield d[off + 16:off + 16 + incl]
        off += 16 + incl
