# Plan "ethernet": the Ethernet layer beneath RoCE, read live from a kernel driver
# that answers ethtool. qemu's emulated Intel 82574 (e1000e, the guest's third NIC,
# whose driver only this plan loads) carries a Soft-RoCE port (rxe9), so rdmakit
# collects that netdev's Ethernet facts as beneath any RoCE port. Its pause answer
# (SIOCETHTOOL GPAUSEPARAM, as rdmakit renders it) must be byte for byte what
# ethtool prints, before and after `ethtool -A` changes it; its statistics must be
# ethtool's names in ethtool's order; FEC and the module EEPROM, which e1000e does
# not implement, must be errnos (the checks "not applicable"; optics "not checked"
# without --optics); no RDK-N finding may reach warning. Outputs in /results/ethernet/.
E=$R/ethernet
mkdir -p $E
IF=

e1000e_up() {
  modprobe e1000e || return 1
  _i=0
  while [ $_i -lt 50 ]; do
    for _n in /sys/class/net/*; do
      [ "$(basename "$(readlink "$_n/device/driver" 2>/dev/null)")" = e1000e ] && IF=$(basename "$_n")
    done
    [ -n "$IF" ] && break
    sleep 0.1; _i=$((_i + 1))
  done
  [ -n "$IF" ] || { echo "e1000e made no netdev"; ls -l /sys/class/net/; return 1; }
  echo "$IF" > $E/ifname
  ip link set "$IF" up || return 1
  rdma link add rxe9 type rxe netdev "$IF" || return 1
  wait_port_active rxe9 1 30 || return 1
  ethtool -i "$IF"
}

# answers NAME: ethtool's text and rdmakit's (from a collect bundle) side by side
answers() {
  IF=$(cat $E/ifname)  # each step runs in its own subshell
  ethtool -a "$IF" > $E/$1.pause.ethtool 2>&1
  ethtool -S "$IF" > $E/$1.stats.ethtool 2>&1
  ethtool --show-fec "$IF" > $E/$1.fec.ethtool 2>&1
  echo "ethtool --show-fec exit $?" >> $E/$1.fec.ethtool
  rdmakit collect -o $E/$1.json.gz || { echo "rdmakit collect failed"; return 1; }
  rdmakit doctor --json > $E/$1.doctor.json 2> $E/$1.doctor.err
  rdmakit doctor --json --optics > $E/$1.optics.json 2> $E/$1.optics.err
  python3 - "$E" "$1" "$IF" <<'PY'
import gzip, json, sys
d, name, ifname = sys.argv[1:]
b = json.load(gzip.open(f"{d}/{name}.json.gz"))
probes = {r["path"]: r for r in b["records"] if r["op"] == "probe"}
fail = []
def probe(what):
    r = probes.get(f"ethtool-{what}:{ifname}")
    if r is None:
        fail.append(f"ethtool-{what}:{ifname}: not asked")
    return r or {}
theirs = open(f"{d}/{name}.pause.ethtool").read()
ours = probe("pause").get("text")
if ours == theirs:
    print(f"pause: identical ({len(theirs)} bytes)")
else:
    fail.append(f"pause: rdmakit {ours!r} != ethtool {theirs!r}")
# Counters move between two reads: the names, in order, must be ethtool's.
names = lambda t: [l.split(":")[0].strip() for l in t.splitlines()[1:] if ":" in l]
theirs = names(open(f"{d}/{name}.stats.ethtool").read())
ours = names(probe("stats").get("text", ""))
if ours == theirs and ours:
    print(f"stats: the same {len(ours)} names in the same order")
else:
    fail.append(f"stats: rdmakit {ours[:5]}... != ethtool {theirs[:5]}...")
for what in ("fec", "module"):
    r = probe(what)
    print(f"{what}: rdmakit {r.get('error') or 'text'}")
    if "text" in r:
        fail.append(f"{what}: e1000e has no such operation, yet rdmakit read {r['text']!r}")
rep = json.load(open(f"{d}/{name}.doctor.json"))
checks = {c["id"]: c for c in rep["checks"]}
for cid in ("ethernet.pause", "ethernet.fec", "ethernet.optics", "ethernet.drops"):
    c = checks.get(cid)
    print(f"{cid}: {c and c['status']}")
    if c is None:
        fail.append(f"{cid}: no such check")
for f in rep["findings"]:
    if f["code"].startswith("RDK-N") and f["severity"] in ("warning", "error"):
        fail.append(f"{f['code']} {f['severity']}: {f['message']}")
# Optics are read live only with --optics: not checked without it, and with it
# e1000e's EOPNOTSUPP makes them not applicable.
opt = {c["id"]: c for c in json.load(open(f"{d}/{name}.optics.json"))["checks"]}
for rep_, want in ((checks, "not_checked"), (opt, "not_applicable")):
    got = rep_["ethernet.optics"]["status"]
    print(f"ethernet.optics: {got} ({rep_['ethernet.optics'].get('reason')})")
    if got != want:
        fail.append(f"ethernet.optics: {got}, expected {want}")
if fail:
    print("FAIL:\n  " + "\n  ".join(fail))
    sys.exit(1)
PY
}

# ethtool changes what the driver reports; rdmakit must read the new values.
change() {
  IF=$(cat $E/ifname)
  ethtool -A "$IF" autoneg off rx off tx off || return 1
  answers changed
}

# Later plans expect rxe0 alone (plan interop makes its own rxe1 on eth1).
cleanup() {
  rdma link delete rxe9 || return 1
  rmmod e1000e || return 1
  rdma link show
}

step e1000e_up e1000e_up
step answers_default answers default
step answers_changed change
step cleanup cleanup
