#!/usr/bin/env bash
# Host side of plan "doctor": every bundle collected in the guest replays, through the
# host's rdmakit, to the report the guest printed live (field `source` aside).
set -euo pipefail
D="$RESULTS/doctor"
n=0
for js in "$D"/*.json; do
  name="$(basename "$js" .json)"
  b="$D/$name.json.gz"
  [ -f "$b" ] || { echo "no bundle for scenario $name"; exit 1; }
  set +e
  "$RDMAKIT" doctor --json --from "$b" > "$D/$name.replay.json"
  rc=$?
  set -e
  python3 "$VM_DIR/replaycompare.py" "$js" "$D/$name.replay.json" "$(cat "$D/$name.exit")" "$rc"
  n=$((n + 1))
done
[ $n -gt 0 ] || { echo "no doctor reports in $D"; exit 1; }
echo "$n bundles replay to the in-guest reports"
