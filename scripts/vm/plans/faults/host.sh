#!/usr/bin/env bash
# Host side of plan "faults": every bundle collected in the guest replays, through the
# host's rdmakit, to the report the guest printed live (field `source` aside), and the
# replay passes the fault catalogue's assertions as the live report did. The human
# report of each replay goes to NAME.txt.
set -euo pipefail
D="$RESULTS/faults"
n=0
for js in "$D"/*.json; do
  name="$(basename "$js" .json)"
  b="$D/$name.json.gz"
  [ -f "$b" ] || { echo "no bundle for scenario $name"; exit 1; }
  set +e
  "$RDMAKIT" doctor --json --from "$b" > "$D/$name.replay.json"
  rc=$?
  "$RDMAKIT" doctor --verbose --color never --from "$b" > "$D/$name.txt" 2>&1
  set -e
  python3 "$VM_DIR/replaycompare.py" "$js" "$D/$name.replay.json" "$(cat "$D/$name.exit")" "$rc"
  python3 "$VM_DIR/guest/catalogue.py" "$VM_DIR/catalogue.json" "$name" "$D/$name.replay.json" "$D/$name.vars"
  n=$((n + 1))
done
[ $n -gt 0 ] || { echo "no fault reports in $D"; exit 1; }
echo "$n fault bundles replay to the in-guest reports and pass the catalogue"
