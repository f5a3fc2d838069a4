#!/usr/bin/env bash
# Host side of plan "doctor": every bundle collected in the guest replays, through the
# host's rdmakit, to the report the guest printed live (field `source` aside).
set -euo pipefail
. "$VM_DIR/../lib/replay.sh"
D="$RESULTS/doctor"
n=0
for js in "$D"/*.json; do
  replay_bundle "$D" "$(basename "$js" .json)"
  n=$((n + 1))
done
[ $n -gt 0 ] || { echo "no doctor reports in $D"; exit 1; }
echo "$n bundles replay to the in-guest reports"
