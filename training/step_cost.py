"""What one training step costs on this CPU for other views and network widths: issue 28's finer view
(item 2) against the from-nothing recipe's 3 hours (item 6). The released network (PalmUNet's
channels times WIDTH; WIDTH "hand": HandUNet) at SIZE px, in float32, with train.py's --bf16 forward pass
(a third field bf16), or in float32 with channels-last tensors (a third field cl), batch 8, the recipe's loss
and optimiser, forward, backward and update on random data; the configurations alternate round by round
and each one's median is printed with its ratio to the first.
Results: docs/decisions/finer-view-cost.md, docs/decisions/bf16-training.md.

    /usr/bin/python3 -m training.step_cost [--configs 256:1,384:0.5,384:0.375,320:0.5,256:0.5,256:1:bf16] [--rounds 7]
    /usr/bin/python3 -m training.step_cost --configs 256:hand,256:hand:cl,256:1,256:1:cl
"""
import argparse
import math
import time

import torch

from training.model import HandUNet, PalmUNet, arch_at, bf16_layout, count_params, logits_of, loss_fn


def is_width(w):
    """A --configs WIDTH: `hand` (HandUNet) or PalmUNet's channel factor, a finite number above 0."""
    try:
        return w == "hand" or 0 < float(w) < math.inf
    except ValueError:
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default="256:1,384:0.5,384:0.375,320:0.5,256:0.5", help="SIZE:WIDTH[:bf16|:cl],...; the first is the base")
    ap.add_argument("--rounds", type=int, default=7, help="timed rounds, after one untimed")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    # A misspelt or extra field would otherwise be timed as float32 (or as the third field) under the name it was given.
    configs = []
    for c in a.configs.split(","):
        f = c.split(":")
        if len(f) not in (2, 3) or f[2:] not in ([], ["bf16"], ["cl"]) or not f[0].isdigit() or not is_width(f[1]):
            ap.error(f"--configs {c}: SIZE:WIDTH with an optional third field, bf16 or cl (none: float32); WIDTH a number or hand")
        configs.append((int(f[0]), f[1], (f[2:] or ["float32"])[0]))
    runs = {}
    for size, width, fwd in configs:
        torch.manual_seed(0)
        net = HandUNet() if width == "hand" else PalmUNet(**arch_at(float(width)))
        net = bf16_layout(net, fwd == "bf16", channels_last=fwd == "cl")
        x = torch.rand(8, 3, size, size)
        y = (torch.rand(8, 4, size, size) > 0.9).float()
        runs[(size, width, fwd)] = (net, torch.optim.AdamW(net.parameters(), 1e-3), x, y, [])
    for r in range(a.rounds + 1):
        for (_, _, fwd), (net, opt, x, y, times) in runs.items():
            t = time.perf_counter()
            opt.zero_grad()
            loss_fn(logits_of(net, x, fwd == "bf16", fwd == "cl"), y)[0].backward()
            opt.step()
            if r:
                times.append(time.perf_counter() - t)
    median = {k: sorted(v[4])[len(v[4]) // 2] for k, v in runs.items()}
    base = median[configs[0]]
    print(f"| view | channels | forward | parameters | step (median of {a.rounds}) | ratio |")
    print("|---|---|---|---|---|---|")
    for k in configs:
        shape = "HandUNet" if k[1] == "hand" else f"x {float(k[1]):g}"
        fwd = "float32, channels-last" if k[2] == "cl" else k[2]
        print(f"| {k[0]} px | {shape} | {fwd} | {count_params(runs[k][0]):,} "
              f"| {median[k] * 1000:.0f} ms | {median[k] / base:.2f}x |")


if __name__ == "__main__":
    main()
