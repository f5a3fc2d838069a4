#!/bin/sh
# Seed the registry_record corpus with records as the registry writes them
# (leaky or not, small and large numbers) and a few near misses.
# Usage: crates/soft/fuzz/seed.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out="$here/corpus/registry_record"
mkdir -p "$out"
n=0
for kind in qp cq mr pd srq ah; do
  for leaky in 0 1; do
    n=$((n + 1))
    printf 'kind=%s\nhandle=%d\npid=%d\nstart_time=%d\ninstance=%d\ncreated_at=%d\nlimit=%d\nleaky=%d\n' \
      "$kind" $((16401 * n)) $((4000 + n)) $((123456 * n)) "$n" 1796000000 16384 "$leaky" > "$out/$kind-$leaky"
  done
done
printf 'kind=qp\nhandle=4294967295\npid=4294967295\nstart_time=18446744073709551615\ninstance=4294967295\ncreated_at=0\nlimit=0\nleaky=1\n' > "$out/max"
printf 'pid=4242\nstart_time=1\ninstance=1\nleaky=0\n' > "$out/ctx"
printf 'qp-4242-123456-1-16401' > "$out/name"
printf 'ctx-4242-123456-1' > "$out/ctx-name"
