#!/bin/sh
# One documented command per stage; everything is seeded and reproducible.
#   sh training/run.sh data      # generate training + held-out synthetic sets (training/data/)
#   sh training/run.sh train     # train (log + checkpoints in training/runs/main/)
#   sh training/run.sh export    # export models/palm-lines/palm-lines.onnx (+ onnxruntime-node check)
#   sh training/run.sh evaluate  # calibrate on val sets, re-export, evaluate on test sets -> metrics.json
#   sh training/run.sh smoke     # the whole chain on tiny data in under a minute (nothing in models/)
set -e
cd "$(dirname "$0")/.."
PY=${PY:-/usr/bin/python3}
D=${DATA:-training/data}
RUN=${RUN:-training/runs/main}
MODEL=${MODEL:-models/palm-lines/palm-lines.onnx}
CALIB=${CALIB:-models/palm-lines/calibration.json}
N_TRAIN=${N_TRAIN:-5000}
STEPS=${STEPS:-3000}

data() {
  $PY -m training.generate --out "$D/train" --n "$N_TRAIN" --seed 1
  $PY -m training.generate --out "$D/val_crop" --n 300 --seed 3 --kind 1
  $PY -m training.generate --out "$D/val_neg" --n 500 --seed 6 --kind 2
  $PY -m training.generate --out "$D/val_scene" --n 300 --seed 8 --kind 0
  $PY -m training.generate --out "$D/test_crop" --n 500 --seed 2 --kind 1
  $PY -m training.generate --out "$D/test_scene" --n 500 --seed 4 --kind 0
  $PY -m training.generate --out "$D/test_neg" --n 500 --seed 5 --kind 2
}
train() {
  mkdir -p "$RUN"
  $PY -m training.train --data "$D/train" --out "$RUN" --steps "$STEPS" --seed 0 --crop 160 --crop-frac 0.8 --export "$MODEL" --calib "$CALIB" "$@"
}
export_() { $PY -m training.export --ckpt "$RUN/final.pt" --out "$MODEL" --calib "$CALIB"; }
evaluate() {
  $PY -m training.evaluate --ckpt "$RUN/final.pt" --data "$D" --tune --calib "$CALIB"
  export_
  $PY -m training.evaluate --ckpt "$RUN/final.pt" --data "$D" --onnx "$MODEL" --out "${METRICS:-models/palm-lines/metrics.json}"
}
smoke() {
  D=training/data/smoke RUN=training/runs/smoke MODEL=training/runs/smoke/palm-lines.onnx CALIB=training/runs/smoke/calibration.json
  for s in "train 32 1 " "val_crop 8 3 1" "val_neg 8 6 2" "val_scene 8 8 0" "test_crop 8 2 1" "test_scene 8 4 0" "test_neg 8 5 2"; do
    set -- $s
    $PY -m training.generate --out "$D/$1" --n "$2" --seed "$3" --shard 16 ${4:+--kind $4}
  done
  $PY -m training.train --data "$D/train" --out "$RUN" --steps 4 --batch 2 --crop 128 --crop-frac 0.5 --export "$MODEL" --calib "$CALIB"
  METRICS=$RUN/metrics.json evaluate
}

case "$1" in
  data) data ;;
  train) shift; train "$@" ;;
  export) export_ ;;
  evaluate) evaluate ;;
  smoke) smoke ;;
  *) echo "usage: sh training/run.sh data|train|export|evaluate|smoke"; exit 2 ;;
esac
