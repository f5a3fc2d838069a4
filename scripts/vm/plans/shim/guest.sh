# Plan "shim": the drop-in libibverbs.so.1 (crates/ibverbs-shim) inside the
# real-kernel guest, next to rdma-core's own library and rxe.
#   shim_devinfo   Debian's ibv_devinfo on the shim sees soft0 (and not rxe0),
#                  on rdma-core it sees rxe0 — the same binary, two libraries.
#   p4_*           P4: ibv_rc_pingpong's own throughput on the soft NIC through
#                  the shim versus on rxe, same VM, same tool, same sizes, two
#                  processes each; the soft NIC with its default transport
#                  (auto: packets through same-host rings) and with
#                  RDMAKIT_SOFT_TRANSPORT=udp (every packet through the guest
#                  kernel's UDP); /results/shim/p4_rounds.tsv holds each
#                  round's rxe, soft and soft-udp Mbit/s (five rounds after
#                  an untimed warm-up run), p4.tsv their medians; host.sh
#                  prints the median of the per-round ratios.
#   yama_same_host The same-host copy under Yama, between two
#                  processes of an unprivileged user. ptrace_scope 1
#                  (Ubuntu's default): each requester declares the receiver
#                  of the ring it handed over its one ptracer (PR_SET_PTRACER
#                  pid; nothing declares PR_SET_PTRACER_ANY any more), so the
#                  64 KiB messages still go as one copy each; ptrace_scope 2
#                  (attach needs CAP_SYS_PTRACE): the copies decline and the
#                  messages go as their 16 packets each, the data intact
#                  (ibv_rc_pingpong -c checks it).
S=$R/shim
mkdir -p $S
SHIM=/usr/local/lib/rdmakit
# rxe listens on 0.0.0.0:4791 in this guest: the soft NIC takes another port.
export RDMAKIT_SOFT_UDP_PORT=14791

shim_devinfo() {
  LD_LIBRARY_PATH=$SHIM ibv_devinfo > $S/devinfo_shim.txt 2>&1 || { cat $S/devinfo_shim.txt; return 1; }
  ibv_devinfo > $S/devinfo_rdma_core.txt 2>&1 || { cat $S/devinfo_rdma_core.txt; return 1; }
  cat $S/devinfo_shim.txt
  grep -q "hca_id:	soft0" $S/devinfo_shim.txt || { echo "FAIL: the shim does not list soft0"; return 1; }
  grep -q "rxe0" $S/devinfo_shim.txt && { echo "FAIL: the shim lists rxe0"; return 1; }
  grep -q "hca_id:	rxe0" $S/devinfo_rdma_core.txt || { echo "FAIL: rdma-core does not list rxe0"; return 1; }
  return 0
}

# pingpong_rate LABEL ENV_LIBPATH GIDX SIZE ITERS [DEV] [TRANSPORT]: Mbit/s of the client.
pingpong_rate() {
  _l=$1 _lp=$2 _g=$3 _s=$4 _n=$5 _d=$6 _tr=$7
  _dev=""; [ -n "$_d" ] && _dev="-d $_d"
  env ${_lp:+LD_LIBRARY_PATH=$_lp} ${_tr:+RDMAKIT_SOFT_TRANSPORT=$_tr} timeout 120 ibv_rc_pingpong $_dev -g $_g -s $_s -n $_n -p 18700 > $S/p4_${_l}_${_s}_srv.txt 2>&1 &
  _sp=$!
  sleep 1
  env ${_lp:+LD_LIBRARY_PATH=$_lp} ${_tr:+RDMAKIT_SOFT_TRANSPORT=$_tr} timeout 120 ibv_rc_pingpong $_dev -g $_g -s $_s -n $_n -p 18700 127.0.0.1 > $S/p4_${_l}_${_s}_cli.txt 2>&1
  _rc=$?
  wait $_sp; _src=$?
  cat $S/p4_${_l}_${_s}_cli.txt >&2
  [ $_rc -eq 0 ] && [ $_src -eq 0 ] || { echo "FAIL: $_l size $_s: client $_rc server $_src" >&2; return 1; }
  sed -n 's/.* seconds = \([0-9.]*\) Mbit\/sec/\1/p' $S/p4_${_l}_${_s}_cli.txt | head -1
}

# The median of its arguments (an odd count).
median() { printf '%s\n' "$@" | sort -g | sed -n "$(( ($# + 1) / 2 ))p"; }

# Rounds per size. Each round runs rxe, the soft NIC and forced UDP back to
# back (the order flips every round), and host.sh takes the median of the
# per-round ratios: the guest's speed drifts between rounds (rxe 169-274
# Mbit/s at 1 KiB within one CI run), and a round's three runs share it.
P4_ROUNDS=5

p4() {
  gi=$(rxe_v4_gid_index) || { echo "no RoCE v2 IPv4 GID on rxe0"; return 1; }
  printf 'size\titers\trxe_mbit_s\tsoft_mbit_s\tsoft_udp_mbit_s\n' > $S/p4.tsv
  printf 'size\titers\tround\trxe_mbit_s\tsoft_mbit_s\tsoft_udp_mbit_s\n' > $S/p4_rounds.tsv
  for sz in 1024 4096 65536; do
    # ibv_rc_pingpong's own default count (1,000) below 64 KiB: the
    # 500 used before left a 1 KiB run ~50 ms, short enough that one
    # scheduling stall of the 2-vCPU guest moved it by half.
    n=1000; [ $sz -ge 65536 ] && n=200
    # One untimed run of each first: TCG translates code on its first
    # execution, and a fresh process's first iterations would otherwise
    # measure qemu's translator (tens of ms in a 500-iteration run of the
    # soft NIC's userspace code; rxe's kernel paths are warm from boot).
    pingpong_rate warm_rxe "" "$gi" $sz 100 rxe0 >/dev/null 2>&1 || return 1
    pingpong_rate warm_soft "$SHIM" 0 $sz 100 >/dev/null 2>&1 || return 1
    pingpong_rate warm_udp "$SHIM" 0 $sz 100 "" udp >/dev/null 2>&1 || return 1
    rxe=""; soft=""; udp=""
    k=1
    while [ $k -le $P4_ROUNDS ]; do
      if [ $((k % 2)) -eq 1 ]; then
        x=$(pingpong_rate rxe "" "$gi" $sz $n rxe0) || return 1
        y=$(pingpong_rate soft "$SHIM" 0 $sz $n) || return 1
        z=$(pingpong_rate soft_udp "$SHIM" 0 $sz $n "" udp) || return 1
      else
        z=$(pingpong_rate soft_udp "$SHIM" 0 $sz $n "" udp) || return 1
        y=$(pingpong_rate soft "$SHIM" 0 $sz $n) || return 1
        x=$(pingpong_rate rxe "" "$gi" $sz $n rxe0) || return 1
      fi
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' $sz $n $k "$x" "$y" "$z" >> $S/p4_rounds.tsv
      rxe="$rxe $x"; soft="$soft $y"; udp="$udp $z"
      k=$((k + 1))
    done
    echo "size $sz rounds (Mbit/s): rxe$rxe; soft$soft; soft_udp$udp"
    printf '%s\t%s\t%s\t%s\t%s\n' $sz $n "$(median $rxe)" "$(median $soft)" "$(median $udp)" >> $S/p4.tsv
  done
  cat $S/p4.tsv
}

# yama_pingpong SCOPE: the client's packets sent, for 50 64 KiB round trips
# between two processes of uid 65534 under ptrace_scope SCOPE.
yama_pingpong() {
  echo "$1" > /proc/sys/kernel/yama/ptrace_scope || return 1
  _as="setpriv --reuid=65534 --regid=65534 --clear-groups env LD_LIBRARY_PATH=$SHIM RDMAKIT_SHIM_DEBUG=1"
  $_as timeout 60 ibv_rc_pingpong -g 0 -s 65536 -n 50 -c -p 18710 > $S/yama$1_srv.txt 2>&1 &
  _sp=$!
  sleep 1
  $_as timeout 60 ibv_rc_pingpong -g 0 -s 65536 -n 50 -c -p 18710 127.0.0.1 > $S/yama$1_cli.txt 2>&1
  _rc=$?
  wait $_sp; _src=$?
  cat $S/yama$1_cli.txt >&2
  [ $_rc -eq 0 ] && [ $_src -eq 0 ] || { echo "FAIL: ptrace_scope $1: client $_rc server $_src" >&2; return 1; }
  sed -n 's/.*ibv_close_device soft0 (auto): \([0-9]*\) packets sent, \([0-9]*\) through.*/\1 \2/p' $S/yama$1_cli.txt | head -1
}

yama_same_host() {
  y=/proc/sys/kernel/yama/ptrace_scope
  [ -w $y ] || { echo "FAIL: this kernel has no Yama ($y)"; return 1; }
  was=$(cat $y)
  one=$(yama_pingpong 1); r1=$?
  two=$(yama_pingpong 2); r2=$?
  echo "$was" > $y
  [ $r1 -eq 0 ] && [ $r2 -eq 0 ] || return 1
  set -- $one; sent1=$1 ring1=$2
  set -- $two; sent2=$1 ring2=$2
  echo "ptrace_scope 1: $sent1 packets sent ($ring1 through rings); ptrace_scope 2: $sent2 ($ring2)"
  [ -n "$sent1" ] && [ -n "$sent2" ] || { echo "FAIL: no closing line"; return 1; }
  [ "$ring1" -eq "$sent1" ] && [ "$ring2" -eq "$sent2" ] || { echo "FAIL: packets left the rings"; return 1; }
  # Copied: a request (and the ACKs of the server's) per message; declined:
  # 16 packets per message after the first decline.
  [ "$sent1" -le 200 ] || { echo "FAIL: ptrace_scope 1 declined the copies ($sent1 packets)"; return 1; }
  [ "$sent2" -ge 700 ] || { echo "FAIL: ptrace_scope 2 still copied ($sent2 packets)"; return 1; }
}

step shim_devinfo shim_devinfo
step p4_rc_pingpong p4
step yama_same_host yama_same_host
