#!/usr/bin/env bash
# Host side of plan "faults": every bundle collected in the guest replays, through the
# host's rdmakit, to the report the guest printed live (field `source` aside), and the
# replay passes the fault catalogue's assertions as the live report did. The human
# report of each replay goes to NAME.txt.
set -euo pipefail
. "$VM_DIR/../lib/replay.sh"
D="$RESULTS/faults"
n=0
for js in "$D"/*.json; do
  name="$(basename "$js" .json)"
  # Before the comparison, so that a replay that differs still leaves its text.
  [ ! -f "$D/$name.json.gz" ] ||
    "$RDMAKIT" doctor --verbose --color never --from "$D/$name.json.gz" > "$D/$name.txt" 2>&1 || true
  replay_bundle "$D" "$name"
  python3 "$VM_DIR/guest/catalogue.py" "$VM_DIR/catalogue.json" "$name" "$D/$name.replay.json" "$D/$name.vars"
  n=$((n + 1))
done
[ $n -gt 0 ] || { echo "no fault reports in $D"; exit 1; }
echo "$n fault bundles replay to the in-guest reports and pass the catalogue"
