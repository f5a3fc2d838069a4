# Plan "perfcmp": rdmakit perf (through the rdma-core provider) versus perftest on
# rxe0, same test, same size, same iteration count, server and client in this
# guest. TCG makes perftest's cycle clock unreliable, so both are compared by
# wall-clock message rate: iterations / the client's wall time, measured here
# around each client run. /results/perfcmp/rates.tsv: test, size, iters,
# perftest msg/s, rdmakit msg/s (host.sh prints the ratios).
P=$R/perfcmp
mkdir -p $P

now() { cut -d' ' -f1 /proc/uptime; }

# rate NAME PORT CMD...: server CMD, client CMD 127.0.0.1; prints msg/s of the client.
rate() {
  _n=$1 _port=$2; shift 2
  timeout 180 "$@" -p $_port > $P/$_n.server.txt 2>&1 &
  _sp=$!
  sleep 2
  _t0=$(now)
  timeout 180 "$@" -p $_port 127.0.0.1 > $P/$_n.client.txt 2>&1
  _rc=$?
  _t1=$(now)
  wait $_sp; _src=$?
  if [ $_rc -ne 0 ] || [ $_src -ne 0 ]; then
    echo "FAIL: $_n client $_rc server $_src" >&2
    tail -n 15 $P/$_n.client.txt $P/$_n.server.txt >&2
    return 1
  fi
  python3 -c "import sys; print(f'{$ITERS / ($_t1 - $_t0):.1f}')"
}

cmp_one() { # TEST SIZE ITERS PERFTEST_TOOL RDMAKIT_TEST
  _t=$1 _s=$2; ITERS=$3
  gi=$(rxe_v4_gid_index) || { echo "no IPv4 RoCE v2 GID on rxe0"; return 1; }
  # -F: without it perftest exits 1 when its clock calibration fails under TCG
  # (r^2 < 0.9); its own figures are not used here.
  pt=$(rate pt_$_t 18801 $4 -d rxe0 -x $gi -s $_s -n $ITERS -F) || return 1
  rk=$(rate rk_$_t 18802 rdmakit --provider ibverbs perf $5 -d rxe0 -x $gi -s $_s -n $ITERS -m 1024) || return 1
  printf '%s\t%s\t%s\t%s\t%s\n' $_t $_s $ITERS $pt $rk >> $P/rates.tsv
  echo "$_t ${_s}B x $ITERS: perftest $pt msg/s, rdmakit perf $rk msg/s"
}

printf 'test\tsize\titers\tperftest_msg_s\trdmakit_msg_s\n' > $P/rates.tsv
step perf_write_bw cmp_one write_bw 4096 2000 ib_write_bw write-bw
step perf_send_lat cmp_one send_lat 8 1000 ib_send_lat send-lat
