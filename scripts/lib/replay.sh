# Host-side helper of the VM plans (bash, sourced by scripts/vm/plans/*/host.sh).
#
# replay_bundle DIR NAME: the bundle DIR/NAME.json.gz that the guest collected
# replays, through the host's $RDMAKIT, to the report the guest printed live
# (DIR/NAME.json with its exit status in DIR/NAME.exit; field `source` aside).
# The replay's report is DIR/NAME.replay.json. Exits the script when the bundle is
# missing or the reports differ.
replay_bundle() {
  local dir="$1" name="$2" rc
  local b="$dir/$name.json.gz"
  [ -f "$b" ] || { echo "no bundle for scenario $name"; exit 1; }
  set +e
  "$RDMAKIT" doctor --json --from "$b" > "$dir/$name.replay.json"
  rc=$?
  set -e
  python3 "$VM_DIR/replaycompare.py" "$dir/$name.json" "$dir/$name.replay.json" "$(cat "$dir/$name.exit")" "$rc"
}
