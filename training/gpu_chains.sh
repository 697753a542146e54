#!/bin/bash
# From-nothing chains side by side on one lent GPU: `run.sh scratch-train` once per seed in SEEDS
# (DEVICE=cuda), for a machine without ../shared or Node.js and with a time limit per call. The box set's
# training views come packed (training/views_pack.py); the synthetic sets are drawn there on every core.
# It stops waiting after LIMIT seconds; the stages checkpoint every CKPT_MIN minutes, so the same command
# run again goes on where they stopped. Each finished chain's stage-3 weights, without the optimiser's
# state (5 MB), are copied to DEST/<NAME><seed>.pt, for `run.sh scratch-calibrate` at home (RUN0/c/final.pt).
# run.sh's own variables pass through (S0_WIDTH for a narrower network, VIEW for a larger view whose
# VIEWS.npz was packed from box_views --size VIEW; NAME tells such chains apart).
#   SEEDS="70 80 90" LIMIT=500 bash training/gpu_chains.sh VIEWS.npz DEST
#   SEEDS="70 80" S0_WIDTH=0.5 NAME=w05s bash training/gpu_chains.sh VIEWS.npz DEST
#   SEEDS="70 80" VIEW=384 S0_WIDTH=0.375 NAME=v384s bash training/gpu_chains.sh VIEWS384.npz DEST
set -u
cd "$(dirname "$0")/.."
VIEWS=$1; DEST=$2
export PYTHONUNBUFFERED=1 PY=${PY:-python3} DEVICE=${DEVICE:-cuda} CKPT_MIN=${CKPT_MIN:-0.5}
VIEW=${VIEW:-256}; [ "$VIEW" = 256 ] && D=${DATA:-training/data} || D=${DATA:-training/data/v$VIEW}; export VIEW; T0=$(date +%s); LIMIT=${LIMIT:-500}; SEEDS=${SEEDS:-50}; NAME=${NAME:-s}
mkdir -p "$DEST" training/runs/logs
[ -f "$D/boxes_train/meta.json" ] || $PY -m training.views_pack unpack "$VIEWS" "$D/boxes_train"
DATA=$D GEN_WORKERS=$(nproc) sh training/run.sh scratch-data || exit 1
echo "gpu_chains: data at $(($(date +%s) - T0)) s"
for s in $SEEDS; do
  RUN0=training/runs/$NAME$s S0_SEED=$s DATA=$D sh training/run.sh scratch-train >>"training/runs/logs/$NAME$s.log" 2>&1 &
done
while [ -n "$(jobs -r)" ] && [ $(($(date +%s) - T0)) -lt "$LIMIT" ]; do sleep 5; done
echo "gpu_chains: stopped waiting at $(($(date +%s) - T0)) s"
for s in $SEEDS; do
  for st in a b c; do
    f=training/runs/$NAME$s/$st
    if [ -f "$f/final.pt" ]; then echo "$NAME$s $st: done"; elif [ -f "$f/last.pt" ]; then echo "$NAME$s $st: stopped, checkpoint kept"; fi
  done
  [ -f "training/runs/$NAME$s/c/final.pt" ] && $PY -c "
import sys, torch
c = torch.load(sys.argv[1], map_location='cpu', weights_only=False); c.pop('opt', None)
c['model'] = {k: v.float().cpu() for k, v in c['model'].items()}; torch.save(c, sys.argv[2])" \
    "training/runs/$NAME$s/c/final.pt" "$DEST/$NAME$s.pt"
done
grep -h '^done\|pseudo-labels' training/runs/logs/*.log
tar czf "$DEST/logs.tgz" training/runs/logs $(for s in $SEEDS; do ls training/runs/$NAME$s/*/train_info.json; done 2>/dev/null)
