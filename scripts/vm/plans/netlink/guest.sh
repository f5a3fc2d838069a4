# Plan "netlink": rdmakit's native NETLINK_RDMA client against iproute2's `rdma -j`
# on live rxe0, with a process holding a QP/CQ/MR/PD (an ibv_rc_pingpong server
# waiting for its client): every object and every field iproute2 prints must be
# in rdmakit's --json output with the same value (jsoncmp.py). Outputs in
# /results/netlink/.
N=$R/netlink
mkdir -p $N
CMP="python3 $PLAN_DIR/jsoncmp.py"

holder_up() {
  ibv_rc_pingpong -d rxe0 -g 1 -p 18901 > $N/holder.txt 2>&1 &
  echo $! > $N/holder.pid
  _i=0
  while [ $_i -lt 50 ]; do
    rdma -j res show qp 2>/dev/null | grep -q '"lqpn"' && { rdma res show qp; return 0; }
    sleep 0.2; _i=$((_i + 1))
  done
  echo "no QP appeared in rdma res show qp"; return 1
}

cmp_pair() { # NAME KEYS RDMA_ARGS -- RDMAKIT_ARGS
  _n=$1 _k=$2; shift 2
  _a=""; while [ "$1" != "--" ]; do _a="$_a $1"; shift; done; shift
  rdma -j $_a > $N/$_n.rdma.json 2> $N/$_n.rdma.err || { cat $N/$_n.rdma.err; return 1; }
  rdmakit "$@" --json > $N/$_n.rdmakit.json 2> $N/$_n.rdmakit.err || { cat $N/$_n.rdmakit.err; return 1; }
  $CMP $N/$_n.rdma.json $N/$_n.rdmakit.json $_k
}

# Debian 12's 6.1 kernel does not announce device events to the monitor group:
# `rdmakit monitor` must say so (its SYS reply lacks MONITOR_MODE) and keep
# waiting, not exit or crash.
monitor_notice() {
  rdma sys > $N/sys.txt 2>&1
  timeout 3 rdmakit monitor > $N/monitor.out 2> $N/monitor.err
  _rc=$?
  cat $N/sys.txt $N/monitor.err
  [ $_rc = 124 ] || { echo "FAIL: rdmakit monitor exited $_rc before the timeout"; return 1; }
  grep -q "does not announce RDMA device events" $N/monitor.err \
    || { echo "FAIL: no notice that this kernel sends no events"; return 1; }
}

step holder_up holder_up
step dev_json cmp_pair dev ifindex dev -- dev
step link_json cmp_pair link ifindex,port link -- link
step res_json cmp_pair res ifindex res -- res
step res_qp_json cmp_pair res_qp ifname,lqpn res show qp -- res qp
step res_cq_json cmp_pair res_cq ifname,cqn res show cq -- res cq
step res_pd_json cmp_pair res_pd ifname,pdn res show pd -- res pd
step res_mr_json cmp_pair res_mr ifname,mrn res show mr -- res mr
step monitor_notice monitor_notice
kill $(cat $N/holder.pid) 2>/dev/null
