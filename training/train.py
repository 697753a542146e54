"""Train the palm-line U-Net on pre-generated synthetic shards.

    /usr/bin/python3 -m training.train --data training/data/train --out training/runs/main \\
        --steps 1200 --export models/palm-lines/palm-lines.onnx
A checkpoint (last.pt) and, with --export, a re-exported ONNX are written every --ckpt-min
minutes, so a usable model always exists while training runs.
"""
import argparse
import glob
import json
import math
import os
import time

import numpy as np
import torch

from training.model import (BASE_ARCH, HandUNet, PalmUNet, add_bf16_option, arch_at, bf16_layout, count_params,
                            logits_of, loss_fn, net_of, param_groups)
from training import export as exp
from training.synth import DEFAULT_FRAME_SIDE, FRAME_SIDE, check_frame


def shard_files(dirs):
    files = []
    for d in dirs.split(","):
        files += sorted(glob.glob(os.path.join(d, "shard_*.npz")))
    return files


def load_shards(dirs, limit=None, files=None):
    files = shard_files(dirs) if files is None else files
    ims, ms, ks = [], [], []
    for f in files:
        z = np.load(f)
        # A shard drawn in another palm frame would teach lines a third off their size (frame-side.spec).
        check_frame(float(z["frame_side"]) if "frame_side" in z.files else DEFAULT_FRAME_SIDE, f"{f} was drawn")
        ims.append(z["images"]); ms.append(z["masks"]); ks.append(z["kinds"])
    ims, ms, ks = np.concatenate(ims), np.concatenate(ms), np.concatenate(ks)
    if limit:
        ims, ms, ks = ims[:limit], ms[:limit], ks[:limit]
    return ims, ms, ks


def to_tensors(imgs, masks):
    x = torch.from_numpy(np.ascontiguousarray(imgs)).permute(0, 3, 1, 2).float().div_(255.0)
    bits = torch.from_numpy(np.ascontiguousarray(masks)).long()
    y = torch.stack([(bits >> b) & 1 for b in range(4)], 1).float()
    return x, y


def make_batch(rng, ims, ms, bs, crop, canonical=False):
    idx = rng.integers(0, len(ims), bs)
    xb, yb = ims[idx], ms[idx]
    out_i, out_m = [], []
    for i in range(bs):
        im, m = xb[i], yb[i]
        # In the canonical frame every hand is an upright right palm: no mirror, no quarter turn.
        if not canonical and rng.random() < 0.5:    # mirror: left <-> right hand
            im, m = im[:, ::-1], m[:, ::-1]
        if not canonical and rng.random() < 0.25:   # quarter turns (photo orientation)
            k = int(rng.integers(1, 4))
            im, m = np.rot90(im, k), np.rot90(m, k)
        if crop and crop < im.shape[0]:             # patch training (same scale, cheaper)
            y0, x0 = rng.integers(0, im.shape[0] - crop + 1, 2)
            im, m = im[y0:y0 + crop, x0:x0 + crop], m[y0:y0 + crop, x0:x0 + crop]
        out_i.append(im); out_m.append(m)
    return to_tensors(np.stack(out_i), np.stack(out_m))


def save_checkpoint(ckpt, path):
    """torch.save through a temporary file: a stop during the write leaves the last checkpoint whole
    (a resumed stage reads it)."""
    torch.save(ckpt, path + ".tmp")
    os.replace(path + ".tmp", path)


class WeightAverage:
    """An exponential moving average of a network's weights (Polyak averaging), kept beside training and saved as
    its own checkpoint: per step avg = d * avg + (1 - d) * w, with d = min(decay, (1 + t) / (10 + t)) after t
    updates, so the starting weights fade within the first steps. Buffers are averaged alike (train_real keeps
    BatchNorm's frozen, so its statistics stay the starting model's). Pinned by test/unit/training/ema.spec.ts."""

    def __init__(self, net, decay, state=None):
        self.decay = decay
        self.t = state["t"] if state else 0
        self.avg = ({k: v.clone() for k, v in state["avg"].items()} if state else
                    {k: v.detach().clone() for k, v in net.state_dict().items()})

    @torch.no_grad()
    def update(self, net):
        d = min(self.decay, (1 + self.t) / (10 + self.t))
        self.t += 1
        for k, v in net.state_dict().items():
            if v.is_floating_point():
                self.avg[k].mul_(d).add_(v.detach(), alpha=1 - d)
            else:
                self.avg[k].copy_(v)

    def state(self):
        return {"t": self.t, "avg": self.avg}


def lr_at(step, total, base, warm=40):
    if step < warm:
        return base * (step + 1) / warm
    p = (step - warm) / max(1, total - warm)
    return base * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * min(p, 1.0))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="training/data/train")
    ap.add_argument("--out", default="training/runs/main")
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--crop", type=int, default=192, help="patch size for the first --crop-frac of steps")
    ap.add_argument("--crop-frac", type=float, default=0.5)
    ap.add_argument("--ckpt-min", type=float, default=10.0)
    ap.add_argument("--export", default=None, help="ONNX path refreshed at each checkpoint")
    ap.add_argument("--calib", default="models/palm-lines/calibration.json")
    ap.add_argument("--resume", default=None)
    ap.add_argument("--init", default=None,
                    help="start from these weights (a checkpoint, e.g. one made by training.from_onnx) with a fresh "
                         "optimiser and schedule")
    ap.add_argument("--width", type=float, default=1.0,
                    help="the network's channels times this (a new network only; 1: the released shape)")
    ap.add_argument("--encoder", choices=("own", "hand"), default="own",
                    help="a new network's encoder: its own (PalmUNet), or the hand-landmark model's blocks (HandUNet)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu",
                    help="torch device: cuda where a GPU is lent (the same steps and batches; other arithmetic)")
    add_bf16_option(ap)
    ap.add_argument("--canonical", action="store_true",
                    help="data in the canonical palm frame (2.0): no mirror or quarter-turn augmentation")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--reload-min", type=float, default=None,
                    help="re-scan --data every N minutes and add shards written since (training while generating)")
    ap.add_argument("--freeze-bn", action="store_true",
                    help="keep BatchNorm layers in eval mode (their running statistics fixed): a short, "
                         "low-LR fine-tune of --init weights then starts exactly at the released model")
    ap.add_argument("--time-limit", type=float, default=None, help="stop (and export) after this many seconds")
    ap.add_argument("--time-budget", type=float, default=None,
                    help="schedule LR decay and the patch phase on wall time instead of steps and stop when "
                         "it is spent (for a shared CPU; the step count reached is logged, not bit-reproducible)")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    os.makedirs(a.out, exist_ok=True)
    loaded = shard_files(a.data)
    ims, ms, ks = load_shards(a.data, a.limit, loaded)
    last_reload = time.time()
    print(f"data: {len(ims)} samples (scene {np.sum(ks==0)}, crop {np.sum(ks==1)}, neg {np.sum(ks==2)})", flush=True)

    # A resumed or initialised run keeps its checkpoint's shape; --width shapes a new network only.
    sd = torch.load(a.resume or a.init, map_location="cpu") if (a.resume or a.init) else None
    if sd is not None:
        exp.check_frame(sd, a.resume or a.init)
    if sd is not None and a.width != 1.0 and {k: sd.get("arch", BASE_ARCH)[k] for k in BASE_ARCH} != arch_at(a.width):
        raise SystemExit(f"train: --width {a.width} does not match the network of {a.resume or a.init}")
    new_net = (lambda: HandUNet()) if a.encoder == "hand" else (lambda: PalmUNet(**arch_at(a.width)))
    net = (net_of(sd) if sd is not None else new_net()).to(a.device)
    net.view_size = ims.shape[1]   # saved with it: the exported file's input_size
    net = bf16_layout(net, a.bf16, a.device)
    opt = torch.optim.AdamW(param_groups(net, a.lr), lr=a.lr, weight_decay=1e-4)
    start = 0
    if a.resume:
        net.load_state_dict(sd["model"]); opt.load_state_dict(sd["opt"]); start = sd["step"]
        rng = np.random.default_rng([a.seed, start])
    elif a.init:
        net.load_state_dict(sd["model"])
        print(f"init weights: {a.init}", flush=True)
    print(f"params: {count_params(net)}", flush=True)

    def set_train():
        net.train()
        if a.freeze_bn:
            for m in net.modules():
                if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                    m.eval()

    def save(step, name="last.pt"):
        save_checkpoint({"model": net.state_dict(), "opt": opt.state_dict(), "arch": net.arch, "step": step,
                         "size": net.view_size, "frame": FRAME_SIDE, "args": vars(a)}, os.path.join(a.out, name))
        if a.export:
            exp.export_onnx(net, a.export, exp.load_calib(a.calib))
            set_train()

    t0 = time.time()
    last_ck = t0
    hist = []
    set_train()
    done = start
    total = a.steps if not a.time_budget else 10 ** 9
    for step in range(start, total):
        prog = step / a.steps if not a.time_budget else (time.time() - t0) / a.time_budget
        if prog >= 1.0:
            break
        crop = a.crop if prog < a.crop_frac else None
        x, y = make_batch(rng, ims, ms, a.batch, crop, a.canonical)
        x, y = x.to(a.device), y.to(a.device)
        for g in opt.param_groups:
            if a.time_budget:
                g["lr"] = g.get("scale", 1.0) * (a.lr * (step + 1) / 40 if step < 40 else
                                                 a.lr * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * min(prog, 1.0)))))
            else:
                g["lr"] = g.get("scale", 1.0) * lr_at(step, a.steps, a.lr)
        logits = logits_of(net, x, a.bf16)
        loss, dice = loss_fn(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        hist.append(loss.item())
        done = step + 1
        if (step + 1) % 10 == 0 or step == start:
            el = time.time() - t0
            print(json.dumps({"step": step + 1, "loss": round(float(np.mean(hist[-10:])), 4),
                              "dice_loss": [round(float(d), 3) for d in dice], "lr": round(opt.param_groups[0]["lr"], 5),
                              "s_per_step": round(el / (step + 1 - start), 2), "elapsed_s": round(el)}), flush=True)
        if a.reload_min and time.time() - last_reload > a.reload_min * 60:
            last_reload = time.time()
            new = [f for f in shard_files(a.data) if f not in loaded]
            if new:
                time.sleep(2)          # let a shard being written finish
                i2, m2, k2 = load_shards(a.data, None, new)
                ims, ms, ks = np.concatenate([ims, i2]), np.concatenate([ms, m2]), np.concatenate([ks, k2])
                loaded += new
                print(f"reloaded: {len(ims)} samples", flush=True)
        if time.time() - last_ck > a.ckpt_min * 60:
            save(done)
            last_ck = time.time()
            print(f"checkpoint at step {done}", flush=True)
        if a.time_limit and time.time() - t0 > a.time_limit:
            print(f"time limit reached at step {done}", flush=True)
            break
    net.eval()
    save(done)
    save(done, "final.pt")
    el = time.time() - t0
    info = {"steps": done - start, "wall_s": round(el), "s_per_step": round(el / max(1, done - start), 3),
            "params": count_params(net), "batch": a.batch}
    with open(os.path.join(a.out, "train_info.json"), "w") as f:
        json.dump(info, f)
    print("done", json.dumps(info), flush=True)


if __name__ == "__main__":
    main()
