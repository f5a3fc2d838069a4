# Guest-side plan helpers (POSIX sh, sourced by /init; plans use them).
#
#   step NAME CMD [ARG]...  run CMD, output to /results/steps/NAME.log (and the console
#                           on failure), record "NAME<TAB>rc<TAB>seconds" in steps.tsv
#   wait_port_active DEV PORT SECONDS
#   rxe_v4_gid_index        rxe0's RoCE v2 IPv4 GID index
#
# A plan is /rdk/plans/<name>/guest.sh, sourced with PLAN and PLAN_DIR set; it calls
# step for each test. Steps keep running after one fails; the host reports every
# failed step with its output and exits 1.

R=/results

uptime_s() { cut -d' ' -f1 /proc/uptime; }

step_record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >> $R/steps.tsv; }

step() {
  _name="$1"; shift
  _t0=$(cut -d. -f1 /proc/uptime)
  _log=$R/steps/$_name.log
  mkdir -p "$(dirname "$_log")"
  ( "$@" ) > "$_log" 2>&1
  _rc=$?
  _t1=$(cut -d. -f1 /proc/uptime)
  step_record "$_name" "$_rc" "$((_t1 - _t0))"
  if [ "$_rc" -eq 0 ]; then
    echo "RDK-VM: ok   $_name ($((_t1 - _t0))s)"
  else
    echo "RDK-VM: FAIL $_name (exit $_rc)"
    tail -n 40 "$_log" | sed 's/^/    | /'
  fi
  return $_rc
}

wait_port_active() {
  _i=0
  while [ $_i -lt $(($3 * 5)) ]; do
    case "$(cat /sys/class/infiniband/$1/ports/$2/state 2>/dev/null)" in
      *ACTIVE*) return 0 ;;
    esac
    sleep 0.2; _i=$((_i + 1))
  done
  echo "$1 port $2 not ACTIVE after $3 s: $(cat /sys/class/infiniband/$1/ports/$2/state 2>&1)"
  return 1
}

# rxe_v4_gid_index: the index of rxe0's RoCE v2 IPv4-mapped GID (10.0.2.15) on
# port 1; fails when there is none.
rxe_v4_gid_index() {
  for _gid in /sys/class/infiniband/rxe0/ports/1/gids/*; do
    _ix=${_gid##*/}
    case "$(cat $_gid)" in
      0000:0000:0000:0000:0000:ffff:*)
        case "$(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/$_ix 2>/dev/null)" in
          *v2*) echo $_ix; return 0 ;;
        esac ;;
    esac
  done
  return 1
}

# wait_gids DEV PORT N SECONDS: until GID indexes 0..N-1 are all set (not zero). With
# qemu's user network, rxe0 gets fe80:: (link-local), ::ffff:10.0.2.15 and, after the
# router advertisement, fec0:: (SLAAC): tests that compare two reads of the host must
# not start while the table is still filling. Not fatal: prints what is missing.
wait_gids() {
  _i=0
  while [ $_i -lt $(($4 * 5)) ]; do
    _n=0 _k=0
    while [ $_k -lt "$3" ]; do
      case "$(cat /sys/class/infiniband/$1/ports/$2/gids/$_k 2>/dev/null)" in
        ""|0000:0000:0000:0000:0000:0000:0000:0000) ;;
        *) _n=$((_n + 1)) ;;
      esac
      _k=$((_k + 1))
    done
    [ $_n -eq "$3" ] && return 0
    sleep 0.2; _i=$((_i + 1))
  done
  echo "$1 port $2: only $_n of $3 GIDs set after $4 s"
  return 0
}
