"""What one training step costs on this CPU for other views and network widths: issue 28's finer view
(item 2) against the from-nothing recipe's 3 hours (item 6). The released network (PalmUNet's
channels times WIDTH) at SIZE px, in float32 or (a third field bf16) with train.py's --bf16 forward
pass, batch 8, the recipe's loss and optimiser, forward, backward and update on random data; the
configurations alternate round by round and each one's median is printed with its ratio to the first.
Results: docs/decisions/finer-view-cost.md, docs/decisions/bf16-training.md.

    /usr/bin/python3 -m training.step_cost [--configs 256:1,384:0.5,384:0.375,320:0.5,256:0.5,256:1:bf16] [--rounds 7]
"""
import argparse
import time

import torch

from training.model import PalmUNet, arch_at, bf16_layout, count_params, logits_of, loss_fn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default="256:1,384:0.5,384:0.375,320:0.5,256:0.5", help="SIZE:WIDTH[:bf16],...; the first is the base")
    ap.add_argument("--rounds", type=int, default=7, help="timed rounds, after one untimed")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    configs = [(int(f[0]), float(f[1]), f[2:] == ["bf16"]) for f in (c.split(":") for c in a.configs.split(","))]
    runs = {}
    for size, width, bf16 in configs:
        torch.manual_seed(0)
        net = bf16_layout(PalmUNet(**arch_at(width)), bf16)
        x = torch.rand(8, 3, size, size)
        y = (torch.rand(8, 4, size, size) > 0.9).float()
        runs[(size, width, bf16)] = (net, torch.optim.AdamW(net.parameters(), 1e-3), x, y, [])
    for r in range(a.rounds + 1):
        for (_, _, bf16), (net, opt, x, y, times) in runs.items():
            t = time.perf_counter()
            opt.zero_grad()
            loss_fn(logits_of(net, x, bf16), y)[0].backward()
            opt.step()
            if r:
                times.append(time.perf_counter() - t)
    median = {k: sorted(v[4])[len(v[4]) // 2] for k, v in runs.items()}
    base = median[configs[0]]
    print(f"| view | channels | forward | parameters | step (median of {a.rounds}) | ratio |")
    print("|---|---|---|---|---|---|")
    for k in configs:
        print(f"| {k[0]} px | x {k[1]:g} | {'bf16' if k[2] else 'float32'} | {count_params(runs[k][0]):,} "
              f"| {median[k] * 1000:.0f} ms | {median[k] / base:.2f}x |")


if __name__ == "__main__":
    main()
