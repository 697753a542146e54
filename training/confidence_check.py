"""Does a per-line confidence floor calibrated on real palms refuse wrong lines? (issue 28, item 5)

    /usr/bin/python3 -m training.confidence_check --ckpt training/runs/main/released.pt \\
        --calib models/palm-lines/calibration.json

On every view of training/data/boxes_train (the training part as box_views.ts renders it: trained-on
and held-out photos; never the evaluation quarter) the engine's rules in Python (line_rules:
select_line at the line's threshold, grow_line) give each labelled line its mean probability over
the kept pixels (what `detection.min_confidence` gates) and whether the grown line agrees with its
box (eval:boxes' rule, in the view). Per line the floor is the value in 0.50..0.80 (step 0.01)
that refuses the most wrong lines net of agreeing ones, where that net is at least MIN_GAIN (the
lowest such value on ties), else min_confidence. The rule was fixed before it was first computed;
what it gave and why the engine keeps one min_confidence: MODEL_CARD.md, "Confidence". It prints,
and writes nothing. Also the palm share (crop.min_palm's quantity) on the views.
"""
import argparse
import json

import numpy as np
import torch

from training import export as exp
from training import line_rules as LR
from training import real_boxes

LINES = ("heart", "head", "life")
FLOORS = np.round(np.arange(0.50, 0.801, 0.01), 2)
MIN_GAIN = 2


def measure(net, ims, lab, calib):
    """Per labelled line on a confirmed palm: (line, mean probability, agrees) of the lines drawn;
    and every view's palm share."""
    thr, det = calib["thresholds"], {**calib["detection"], "min_confidence": 0.0}
    rows, shares = [], []
    with torch.no_grad():
        for i0 in range(0, len(ims), 16):
            x = torch.from_numpy(ims[i0:i0 + 16]).permute(0, 3, 1, 2).float().div_(255.0)
            p = torch.sigmoid(net(x)).numpy()
            for b in range(p.shape[0]):
                i = i0 + b
                shares.append(LR.palm_share(p[b, 0], thr["palm"]))
                if shares[-1] < calib["crop"]["min_palm"]:
                    continue
                pd = LR.palm_distance(p[b, 0], thr["palm"])
                for j, line in enumerate(LINES):
                    if lab[i, j, 0, 0, 0] < 0:
                        continue
                    prob = p[b, 1 + j]
                    sel = LR.select_line(prob, thr[line], det, pd)
                    if not sel.detected:
                        continue
                    grown = LR.grow_line(prob, sel.kept, calib["grow"][line], pd) > 0
                    rows.append((line, float(prob[sel.kept > 0].mean()), bool(real_boxes.agrees(grown, lab[i, j]))))
    return rows, shares


def floors(rows, base):
    """Per line: (floor, net wrong lines refused, wrong refused, agreeing refused, drawn, wrong, AUC
    of the mean probability between agreeing and wrong lines)."""
    out = {}
    for line in LINES:
        good = np.array([m for l, m, a in rows if l == line and a])
        bad = np.array([m for l, m, a in rows if l == line and not a])
        net = lambda t: int((bad < t).sum() - (good < t).sum()) - int((bad < base).sum() - (good < base).sum())
        best = max(FLOORS, key=lambda t: (net(t), -t))
        floor = float(best) if net(best) >= MIN_GAIN else base
        auc = sum((g > b) + 0.5 * (g == b) for g in good for b in bad) / max(1, len(good) * len(bad))
        out[line] = (floor, net(best), int((bad < floor).sum()), int((good < floor).sum()), len(good) + len(bad), len(bad), auc)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", required=True, help="a checkpoint of the model (train_real's final.pt, or from_onnx's)")
    ap.add_argument("--real", default="training/data/boxes_train")
    ap.add_argument("--calib", default="models/palm-lines/calibration.json")
    a = ap.parse_args()
    torch.set_num_threads(1)
    calib = json.load(open(a.calib))
    net = exp.load_net(a.ckpt)
    net.eval()
    ims, lab, _ = real_boxes.build(a.real)
    rows, shares = measure(net, ims, lab, calib)
    print(f"palm share on {len(shares)} views: min {min(shares):.3f}, under crop.min_palm "
          f"({calib['crop']['min_palm']}): {sum(v < calib['crop']['min_palm'] for v in shares)}")
    base = calib["detection"]["min_confidence"]
    for line, (floor, net_, bad_ref, good_ref, drawn, wrong, auc) in floors(rows, base).items():
        print(f"{line}: {drawn} drawn, {wrong} disagree with their box (AUC of the mean probability {auc:.2f}); "
              f"floor {floor}: refuses {bad_ref} of those and {good_ref} agreeing (best net {net_})")


if __name__ == "__main__":
    main()
