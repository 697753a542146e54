"""crop.min_palm chosen on real palms: the share of the canonical view the palm channel must cover for
the engine to report lines (a back of a hand shows little palm). The synthetic tune chooses it on
synthetic palms, which the model covers fully; real palms cover less. Here: the largest of FLOORS
under which at most MAX_UNDER of the box set's training views (held-out ones excluded) fall, written
into the calibration file. MAX_UNDER is 0: 3.3.0 gives up no training palm, and the eighth from-nothing
run's 1% gave up two palms of the evaluation quarter (models/palm-lines/FROM-NOTHING.md, "The eighth
from-nothing run"); the synthetic test backs, not this floor, keep lines off backs. The from-nothing
recipe's step (run.sh scratch).

    /usr/bin/python3 -m training.palm_floor --ckpt training/runs/s0/c/final.pt --real training/data/boxes_train \\
        --calib training/runs/s0/calibration.json
"""
import argparse
import json
import os

import numpy as np
import torch

from training import export as exp
from training import real_boxes
from training.evaluate import predict
from training.line_rules import palm_share
from training.train_real import held_out

FLOORS = (0.0, 0.05, 0.1, 0.15, 0.2)
MAX_UNDER = 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--real", required=True, help="folder written by training/box_views.ts")
    ap.add_argument("--calib", required=True, help="calibration file whose crop.min_palm is set")
    ap.add_argument("--max-under", type=float, default=MAX_UNDER, help="share of training views a floor may give up")
    a = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("TORCH_THREADS", "2")))
    ims, samples = real_boxes.load(a.real)
    keep = [i for i, s in enumerate(samples) if not held_out(s["file"])]
    calib = json.load(open(a.calib))
    probs = predict(exp.load_net(a.ckpt), ims[keep])
    share = np.array([palm_share(p[0].astype(np.float32), calib["thresholds"]["palm"]) for p in probs])
    floor = max(f for f in FLOORS if np.mean(share < f) <= a.max_under)
    for f in FLOORS:
        print(f"palm_floor: min_palm {f}: {int(np.sum(share < f))} of {len(share)} training views under")
    print(f"palm_floor: min_palm {floor} (the synthetic tune's: {calib['crop'].get('min_palm', 0.0)})")
    calib["crop"] = {**calib["crop"], "min_palm": floor}
    with open(a.calib, "w") as f:
        json.dump(calib, f, indent=1)


if __name__ == "__main__":
    main()
