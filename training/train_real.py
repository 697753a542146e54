"""Fine-tune the line model on synthetic palms (pixel-exact masks) together with real palms (the box
set's training part, weak labels: one rough box per line). palm-lines 3.

    /usr/bin/python3 -m training.train_real --synth training/data/canon30 --real training/data/boxes_train \\
        --init training/runs/v3/init.pt --out training/runs/v3 --steps 3000

Each batch holds --synth-batch synthetic and --real-batch real views. Real views are trained per
line with a box (training/real_boxes.py):
  - outside: the line's probability is pushed to 0 beyond the box grown by 15% of its diagonal;
  - spanning: in each of the box's bands across its long axis the highest probability is pushed to 1
    (multiple-instance: the crease crosses every band, we do not know where);
  - thin: a small push to 0 on the rest of the box, so the line stays a line, not a box;
  - outside mass (--w-frac, 3.1): the line's probability mass beyond the grown box, in units of a
    whole line's mass (LINE_MASS): the mean BCE of `outside` is dominated by the many easy pixels
    far from any line and hardly pushes on a line drawn past its box's end. Not a share of the
    line's mass: a share rewards mass added inside the box, and the line becomes a blob there;
  - palm: kept where the starting model put it (the boxes say nothing of the palm);
  - pseudo-label (--w-pseudo, 3.2): where the starting model's line agrees with its box (the
    eval:boxes rule, on the clean view), the student is pulled to the teacher's line on a jittered
    view: a dense, thin target that the box terms lack (self-training with a noised student).
    --pseudo-thin (tried in the sixteenth from-nothing run, not released): the teacher's line cut to its ridge, as wide as a
    synthetic mask's, so a teacher whose lines are drawn thick does not teach them thick.
Real views are jittered (--geo, 3.2): a small rotation, scale and shift of view and labels together,
as a landmark error moves the canonical frame, and light (per-channel gain, gamma, blur, noise).
Consistency (--w-cons, with --geo): --cons-pairs of each step's real views are seen a second time
under another jitter, and the two predictions of each line, brought into one frame, are pulled
together; a photo turned by 90 degrees moves the frame this way, and its lines' ends must not move.
Close-ups (--closeup, with --geo; tried after 3.3.0, not released): that share of the real views is cut as a close-up of the photo
is, black beyond the square around the lines' boxes, and framed as a close-up's landmarks frame it
(turned, enlarged and shifted more than --geo's jitter); the teacher's lines on the clean view stay
the pseudo-labels.
AdaBN (--adapt-bn, with --geo; tried in the fourth from-nothing run, not used: models/palm-lines/FROM-NOTHING.md): before step 1,
BatchNorm's statistics re-estimated on batches of the training mix, real views among them, then frozen as always.
Weight average (--ema, tried in the twentieth from-nothing run): an exponential moving average of the weights kept
beside them and written as final_ema.pt; the stage's own weights, final.pt, are what they are without it.
Real views whose file name's SHA-256 starts with 4 or 5 (an eighth of the training part) are held
out of training to compare checkpoints (`npm run eval:boxes -- --part heldout`). Resumable: --resume last.pt.
"""
import argparse
import hashlib
import json
import math
import os
import time

import cv2
import numpy as np
import torch
import torch.nn.functional as F

from training import export as exp
from training import real_boxes
from training.synth import DEFAULT_FRAME_SIDE, FRAME_SIDE, palm_px
from training.model import add_bf16_option, bf16_layout, count_params, logits_of, loss_fn, net_of, param_groups
from training.train import WeightAverage, load_shards, lr_at, make_batch, save_checkpoint, shard_files

HELD_OUT = "45"
# A landmark error moves the frame by a share of the palm: in shares of a tighter frame's view, by as much more.
FRAME_SCALE = DEFAULT_FRAME_SIDE / FRAME_SIDE
W_OUT, W_SPAN, W_THIN, W_PALM = 1.0, 1.0, 0.05, 0.5
# A line's probability mass in the 256 px canonical view: about 100 px long, 3 px wide. A view of
# side S (box_views --size, SYNTH_OUT) scales it by (S/256)^2 (line_mass): its lines are as much
# longer and wider.
LINE_MASS = 300.0
# A teacher line is a pseudo-label where its pixels over PSEUDO_P agree with its box as eval:boxes
# scores agreement (real_boxes.agrees).
PSEUDO_P = 0.5
# --pseudo-thin sets to 0 a teacher line's pixels over THIN_P that lie further than THIN_R px (at 256; px_at
# scales it) from the skeleton of those pixels: its flanks, so the line is 2 * THIN_R + 1 = 3 px wide, as LINE_MASS's.
# Pixels under THIN_P (a faint end that `grow` follows) keep the teacher's probability.
THIN_P, THIN_R = 0.15, 1
# --w-cons compares the two views' lines in cells of this many pixels (at 256 px; px_at scales it).
CONS_CELL = 4


def line_mass(side):
    """LINE_MASS for a view `side` px across at the run's frame (exactly LINE_MASS at 256 and 1.7)."""
    return LINE_MASS * palm_px(side) ** 2


def px_at(px, side):
    """A length of `px` pixels in the 256 px view at 1.7, for a view `side` px across at the run's frame (exactly
    `px` at 256 and 1.7, at least 1)."""
    return max(1, round(px * palm_px(side)))


def thin_pseudo(t):
    """--pseudo-thin: a teacher line (S,S uint8 probability) with its flanks set to 0: the pixels over THIN_P
    further than THIN_R from their skeleton. The ridge and the faint pixels keep their probabilities
    (test/unit/training/pseudo-thin.spec.ts)."""
    from skimage.morphology import skeletonize
    r = px_at(THIN_R, t.shape[-1])
    over = t >= round(THIN_P * 255)
    near = cv2.dilate(skeletonize(over).astype(np.uint8), np.ones((2 * r + 1, 2 * r + 1), np.uint8))
    return np.where(over & (near == 0), 0, t).astype(t.dtype)


def held_out(file):
    return hashlib.sha256(file.encode()).hexdigest()[0] in HELD_OUT


def slice_peaks(p, band):
    """Each line's highest probability in each slice of its box, (B,3,N), and whether the slice has
    a pixel, (B,3,N) float: one scatter over the view per line (slot 0, no slice, dropped). The same
    values and gradients (ties split alike) as the max over a one-hot (B,3,N,S,S) mask, at about a
    tenth of its time (measured on this CPU: 0.03-0.07 against 0.36-0.39 s a batch of 6 views)."""
    B, L = p.shape[:2]
    idx = band.reshape(B, L, -1)
    slots = torch.zeros(B, L, real_boxes.N_SLICES + 1, dtype=p.dtype, device=p.device)
    peak = slots.scatter_reduce(2, idx, p.reshape(B, L, -1), reduce="amax", include_self=False)
    count = torch.zeros_like(slots).scatter_add_(2, idx, torch.ones(idx.shape, dtype=p.dtype, device=p.device))
    return peak[..., 1:], (count[..., 1:] > 0).to(p.dtype)


def real_loss(logits, lab, teacher_palm, w_frac=0.0, pseudo=None, w_pseudo=0.0):
    """logits (B,4,S,S); lab (B,3,3,S,S) int8 from real_boxes.labels; teacher_palm (B,S,S) in [0,1];
    pseudo: (target (B,3,S,S) in [0,1], keep (B,3)) or None."""
    lines = logits[:, 1:4]
    p = torch.sigmoid(lines)
    has = (lab[:, :, 0, 0, 0] >= 0).float()                       # (B,3) line labelled
    inside = lab[:, :, 0].clamp(min=0).float()
    outside = lab[:, :, 1].clamp(min=0).float()
    band = lab[:, :, 2].long().clamp(min=0)                       # 0 = none, 1..N
    neg = F.binary_cross_entropy_with_logits(lines, torch.zeros_like(lines), reduction="none")
    n_out = outside.sum((2, 3)).clamp(min=1)
    l_out = ((neg * outside).sum((2, 3)) / n_out * has).sum() / has.sum().clamp(min=1)
    peak, present = slice_peaks(p, band)
    present = present * has.unsqueeze(2)
    l_span = (-torch.log(peak.clamp(min=1e-4)) * present).sum() / present.sum().clamp(min=1)
    n_in = inside.sum((2, 3)).clamp(min=1)
    l_thin = ((p * inside).sum((2, 3)) / n_in * has).sum() / has.sum().clamp(min=1)
    l_palm = F.binary_cross_entropy_with_logits(logits[:, 0], teacher_palm)
    mass_out = (p * outside).sum((2, 3)) / line_mass(logits.shape[-1])
    l_frac = (mass_out * has).sum() / has.sum().clamp(min=1)
    total = W_OUT * l_out + W_SPAN * l_span + W_THIN * l_thin + W_PALM * l_palm + w_frac * l_frac
    l_ps = torch.zeros((), device=logits.device)
    if pseudo is not None and w_pseudo > 0:
        tgt, keep = pseudo
        bce = F.binary_cross_entropy_with_logits(lines, tgt, reduction="none").mean((2, 3))
        l_ps = (bce * keep).sum() / keep.sum().clamp(min=1)
        total = total + w_pseudo * l_ps
    return total, [float(l_out), float(l_span), float(l_thin), float(l_palm), float(l_frac), float(l_ps)]


def agrees(prob, lab_line):
    """The eval:boxes rule on one teacher line (S,S) probability against its label's inside quad."""
    return real_boxes.agrees(prob >= PSEUDO_P, lab_line)


# --closeup: a close-up is the square around the lines' boxes grown by CLOSEUP_MARGIN of its side on each
# side (eval:boxes' close-up 0.25 and tight close-up 0.1), black beyond; its landmarks frame the palm
# less well than a whole hand's, and too small: the view turned up to CLOSEUP_ROT degrees, enlarged
# by a factor drawn log-uniformly from CLOSEUP_ZOOM and shifted up to CLOSEUP_SHIFT of its side on
# each axis. On 224 of the training part's tight close-ups, their frames against their uncropped
# photos' (docs/decisions/closeup-frames.md): turned -6 to +10 degrees (5th to 95th
# percentile), the palm enlarged 1.0 to 1.5 times (median 1.15), the centre moved 0.09 of the view
# (90th percentile).
CLOSEUP_MARGIN = (0.05, 0.3)
CLOSEUP_ROT, CLOSEUP_ZOOM, CLOSEUP_SHIFT = 10.0, (0.9, 1.6), 0.07


def closeup_mask(quads, s, margin):
    """The part of the view (S,S uint8, 1 inside) that a close-up of the photo keeps: the square, in
    the photo's axes, around the heart, head and life quads (view pixel coordinates, a pixel's centre
    at its index, as real_boxes' quads; corners in the photo's order x0y0, x1y0, x1y1, x0y1), its side
    grown by `margin` on each side, as eval:boxes' closeupSquare cuts it (test/unit/inference/
    closeup-parity.spec.ts)."""
    qs = [np.asarray(q, np.float64) for q in quads]
    ax = qs[0][1] - qs[0][0]; ay = qs[0][3] - qs[0][0]
    ax /= max(np.linalg.norm(ax), 1e-9); ay /= max(np.linalg.norm(ay), 1e-9)
    pts = np.concatenate(qs)
    a, b = pts @ ax, pts @ ay
    side = max(a.max() - a.min(), b.max() - b.min()) * (1 + 2 * margin)
    ca, cb = (a.max() + a.min()) / 2, (b.max() + b.min()) / 2
    yy, xx = np.mgrid[0:s, 0:s].astype(np.float64)
    pa, pb = xx * ax[0] + yy * ax[1], xx * ay[0] + yy * ay[1]
    return ((np.abs(pa - ca) <= side / 2) & (np.abs(pb - cb) <= side / 2)).astype(np.uint8)


def jitter(rng, img, lab, palm, teach, cut=None):
    """--geo: one real view, its labels, teacher palm and teacher lines (or None) under the same small
    affine warp (a landmark error moves the canonical frame this much), then light jitter on the
    view. Label channels warp nearest; beyond the view is `outside`. With `cut` (closeup_mask), the
    view is a close-up's: black and palm-free beyond the cut, and the frame moved as a close-up's
    landmarks move it. Returns the warp m (2x3, view pixels to warped pixels) last."""
    s = img.shape[0]
    if cut is None:
        ang = rng.uniform(-8, 8); sc = math.exp(rng.uniform(-0.1, 0.1)); sh = rng.uniform(-0.04, 0.04, 2) * s * FRAME_SCALE
    else:
        img = img * cut[..., None]; palm = palm * cut
        ang = rng.uniform(-CLOSEUP_ROT, CLOSEUP_ROT); sc = math.exp(rng.uniform(*np.log(CLOSEUP_ZOOM)))
        sh = rng.uniform(-CLOSEUP_SHIFT, CLOSEUP_SHIFT, 2) * s * FRAME_SCALE
    m = cv2.getRotationMatrix2D((s / 2, s / 2), ang, sc); m[:, 2] += sh
    img = cv2.warpAffine(img, m, (s, s), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    palm = cv2.warpAffine(palm, m, (s, s), flags=cv2.INTER_LINEAR, borderValue=0)
    if teach is not None:
        teach = np.stack([cv2.warpAffine(t, m, (s, s), flags=cv2.INTER_LINEAR, borderValue=0) for t in teach])
    out = lab.copy()
    for i in range(3):
        if lab[i, 0, 0, 0] < 0:
            continue
        for c, border in ((0, 0), (1, 1), (2, 0)):
            out[i, c] = cv2.warpAffine(lab[i, c].astype(np.uint8), m, (s, s), flags=cv2.INTER_NEAREST,
                                       borderValue=border).astype(np.int8)
    x = img.astype(np.float32)
    x = x * rng.uniform(0.6, 1.3) + rng.uniform(-25, 25)                    # brightness, contrast (3.1)
    x = x * rng.uniform(0.9, 1.1, 3)                                         # colour cast of the light
    x = 255.0 * (np.clip(x, 0, 255) / 255.0) ** rng.uniform(0.75, 1.4)       # dim or harsh light
    if rng.random() < 0.3:
        x = cv2.GaussianBlur(x, (0, 0), rng.uniform(0.4, 1.2))              # out of focus
    x = x + rng.normal(0, rng.uniform(0, 6), x.shape)                        # sensor noise
    if cut is not None:   # beyond a close-up's photo the engine's view is black (its letterbox pad, 0)
        x = x * cv2.warpAffine(cut, m, (s, s), flags=cv2.INTER_NEAREST, borderValue=1)[..., None]
    return np.clip(x, 0, 255).astype(np.uint8), out, palm, teach, m


def adapt_bn(net, batches, device):
    """AdaBN: BatchNorm's running statistics re-estimated as the plain mean over `batches` (views of the
    training mix, real among them), the weights unchanged; training then keeps them frozen."""
    bns = [m for m in net.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    moms = [m.momentum for m in bns]
    for m in bns:
        m.reset_running_stats(); m.momentum = None; m.train()
    with torch.no_grad():
        for x in batches:
            net(x.to(device))
    for m, mo in zip(bns, moms):
        m.momentum = mo; m.eval()


def pair_theta(m_a, m_b, s):
    """The affine_grid theta that resamples a map in view b's frame into view a's frame (both warps
    of one view by jitter: m_a, m_b 2x3 in pixels; align_corners=False)."""
    h = lambda m: np.vstack([m, [0.0, 0.0, 1.0]])
    a = h(m_b) @ np.linalg.inv(h(m_a))                  # a's pixels -> b's pixels
    t = np.array([[s / 2, 0, s / 2 - 0.5], [0, s / 2, s / 2 - 0.5], [0, 0, 1.0]])   # normalised -> pixels
    return (np.linalg.inv(t) @ a @ t)[:2].astype(np.float32)


def consistency_loss(logits_a, logits_b, thetas):
    """--w-cons: the same photo under two jitters must give the same lines. Each line's squared
    difference of probabilities, b resampled into a's frame, over the pixels both views see, in
    units of a whole line's mass (LINE_MASS), summed over the lines: a line drawn further on one
    view counts, as the ends are where a turned photo's traits moved. Compared in cells of CONS_CELL
    px, so the resampling's sub-pixel shift of a thin line (step 1 of a first try: 0.42, most of the
    term) hardly counts. Both sides take the gradient."""
    pa = torch.sigmoid(logits_a[:, 1:4]); pb = torch.sigmoid(logits_b[:, 1:4])
    grid = F.affine_grid(torch.from_numpy(thetas).to(pb.device), list(pb.shape), align_corners=False)
    pb_a = F.grid_sample(pb, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    seen = F.grid_sample(torch.ones_like(pb[:, :1]), grid, mode="nearest", padding_mode="zeros", align_corners=False)
    side = pa.shape[-1]
    cell = px_at(CONS_CELL, side)
    d = F.avg_pool2d((pa - pb_a) * seen, cell)
    return (d ** 2).sum((2, 3)).sum(1).mean() * cell ** 2 / line_mass(side)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--synth", required=True, help="comma-separated synthetic shard folders (canonical views)")
    ap.add_argument("--real", required=True, help="folder written by training/box_views.ts")
    ap.add_argument("--out", required=True)
    ap.add_argument("--init", default=None)
    ap.add_argument("--resume", default=None)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--synth-batch", type=int, default=4)
    ap.add_argument("--real-batch", type=int, default=4)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--seed", type=int, default=40)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu",
                    help="torch device: cuda where a GPU is lent (the same steps and batches; other arithmetic)")
    add_bf16_option(ap)
    ap.add_argument("--w-frac", type=float, default=0.0, help="weight of the outside-mass term (0 in 3.0.0)")
    ap.add_argument("--geo", action="store_true", help="geometric and stronger light jitter of real views (3.2)")
    ap.add_argument("--w-pseudo", type=float, default=0.0, help="weight of the box-agreeing pseudo-labels (3.2)")
    ap.add_argument("--pseudo-thin", action="store_true",
                    help="with --w-pseudo, the teacher's lines cut to their ridge, a synthetic mask's width")
    ap.add_argument("--w-cons", type=float, default=0.0,
                    help="weight of the two-jitter consistency term (needs --geo; 3.3): --cons-pairs real views "
                         "are seen twice per step")
    ap.add_argument("--cons-pairs", type=int, default=2)
    ap.add_argument("--closeup", type=float, default=0.0,
                    help="with --geo, the share of real views cut and framed as a close-up's (tried after 3.3.0)")
    ap.add_argument("--adapt-bn", type=int, default=0,
                    help="batches of the training mix that re-estimate BatchNorm's statistics before step 1 (AdaBN)")
    ap.add_argument("--ema", type=float, default=0.0,
                    help="also keep an exponential moving average of the weights with this decay (0.998: about the "
                         "last 500 steps), written as final_ema.pt beside final.pt; the stage's own weights are unchanged")
    ap.add_argument("--ckpt-min", type=float, default=5.0)
    ap.add_argument("--time-budget", type=float, default=None,
                    help="seconds: the LR schedule runs on wall time and training stops when it is spent (a shared "
                         "CPU); the step count reached is logged, and --steps with it reproduces the schedule")
    ap.add_argument("--export", default=None)
    ap.add_argument("--calib", default="models/palm-lines/calibration.json")
    a = ap.parse_args()
    if a.w_cons > 0 and not a.geo:
        ap.error("--w-cons needs --geo (it compares two jitters of one view)")
    if a.closeup > 0 and not a.geo:
        ap.error("--closeup needs --geo (a close-up's frame is a jitter)")
    if a.pseudo_thin and a.w_pseudo == 0:
        ap.error("--pseudo-thin needs --w-pseudo (it thins the pseudo-labels)")
    if a.adapt_bn > 0 and not a.geo:
        ap.error("--adapt-bn needs --geo (its real views are jittered as training's are)")

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    os.makedirs(a.out, exist_ok=True)
    ims, ms, ks = load_shards(a.synth, None, shard_files(a.synth))
    r_ims, r_lab, r_meta = real_boxes.build(a.real)
    if ims.shape[1] != r_ims.shape[1]:
        raise SystemExit(f"train_real: synthetic views are {ims.shape[1]} px, real views {r_ims.shape[1]} px "
                         "(SYNTH_OUT and box_views --size must agree)")
    train_idx = np.array([i for i, s in enumerate(r_meta) if not held_out(s["file"])])
    print(f"synthetic {len(ims)}, real {len(train_idx)} for training ({len(r_meta) - len(train_idx)} held out)", flush=True)

    sd = torch.load(a.resume or a.init, map_location="cpu")
    exp.check_frame(sd, a.resume or a.init)
    net = net_of(sd).to(a.device)   # the starting model's shape (train.py --width)
    net.view_size = r_ims.shape[1]  # saved with it: the exported file's input_size
    net = bf16_layout(net, a.bf16, a.device)
    opt = torch.optim.AdamW(param_groups(net, a.lr), lr=a.lr, weight_decay=1e-4)
    start = 0
    net.load_state_dict(sd["model"])
    if a.resume:
        opt.load_state_dict(sd["opt"]); start = sd["step"]
    ema = WeightAverage(net, a.ema, sd.get("ema") if a.resume else None) if a.ema > 0 else None
    print(f"params: {count_params(net)}; start at step {start}", flush=True)

    # The starting model's palm, once per real view: the real loss keeps it (the boxes do not say).
    # And its lines (uint8 probabilities), which --w-pseudo keeps where they agree with their boxes.
    teacher_file = os.path.join(a.out, "teacher_palm.npy")
    lines_file = os.path.join(a.out, "teacher_lines.npy")
    if os.path.exists(teacher_file) and os.path.exists(lines_file):
        teacher, t_lines = np.load(teacher_file), np.load(lines_file)
    else:
        init_sd = torch.load(a.init, map_location="cpu") if a.resume else sd
        init = net_of(init_sd)
        init.load_state_dict(init_sd["model"])
        init.to(a.device).eval()
        teacher = np.zeros(r_ims.shape[:3], np.uint8)
        t_lines = np.zeros((len(r_ims), 3) + r_ims.shape[1:3], np.uint8)
        with torch.no_grad():
            for i in range(0, len(r_ims), 16):
                x = torch.from_numpy(r_ims[i:i + 16]).permute(0, 3, 1, 2).float().div_(255.0).to(a.device)
                pr = (torch.sigmoid(init(x)) * 255).round().byte().cpu().numpy()
                teacher[i:i + 16] = pr[:, 0]
                t_lines[i:i + 16] = pr[:, 1:4]
        np.save(teacher_file, teacher)
        np.save(lines_file, t_lines)
    if a.w_pseudo == 0:
        t_lines = None   # only the pseudo-label term reads the teacher's lines
    keep = np.zeros((len(r_ims), 3), np.float32)
    if a.w_pseudo > 0:
        for i in range(len(r_ims)):
            for j in range(3):
                if r_lab[i, j, 0, 0, 0] >= 0:
                    keep[i, j] = agrees(t_lines[i, j] / 255.0, r_lab[i, j])
        n_lab = int((r_lab[train_idx, :, 0, 0, 0] >= 0).sum())
        print(f"pseudo-labels: {int(keep[train_idx].sum())} of {n_lab} labelled training lines agree with their boxes "
              f"(heart/head/life {[int(v) for v in keep[train_idx].sum(0)]})", flush=True)
        if a.pseudo_thin:   # after `keep`: which lines agree is read on the teacher's lines as drawn
            before = int((t_lines >= 128).sum())
            t_lines = np.stack([[thin_pseudo(t) for t in ts] for ts in t_lines])
            print(f"pseudo-labels thinned: pixels over 0.5 {before} -> {int((t_lines >= 128).sum())}", flush=True)

    if a.adapt_bn > 0 and not a.resume:
        def mix(i):   # its own random stream: the training steps draw what they drew without it
            rng = np.random.default_rng([a.seed, 1 << 20, i])
            x_s = make_batch(rng, ims, ms, a.synth_batch, None, True)[0]
            picks = rng.choice(train_idx, a.real_batch)
            xr = np.stack([jitter(rng, r_ims[k], r_lab[k], teacher[k], None)[0] for k in picks])
            return torch.cat([x_s, torch.from_numpy(xr).permute(0, 3, 1, 2).float().div_(255.0)])
        adapt_bn(net, (mix(i) for i in range(a.adapt_bn)), a.device)
        print(f"BatchNorm statistics re-estimated on {a.adapt_bn} batches of the training mix", flush=True)

    def set_train():
        net.train()
        for m in net.modules():   # BatchNorm statistics stay those of the starting model (or --adapt-bn's)
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.eval()

    def save(step, name="last.pt"):
        save_checkpoint({"model": net.state_dict(), "opt": opt.state_dict(), "arch": net.arch, "step": step,
                         "size": net.view_size, "frame": FRAME_SIDE, "elapsed": time.time() - t_start, "args": vars(a),
                         **({"ema": ema.state()} if ema else {})},
                        os.path.join(a.out, name))
        if a.export:
            exp.export_onnx(net, a.export, exp.load_calib(a.calib))
            set_train()

    set_train()
    t0 = time.time()
    last_ck = t0
    hist = []
    done = start
    t_start = time.time() - (sd.get("elapsed", 0.0) if a.resume else 0.0)
    total = a.steps if not a.time_budget else 10 ** 9
    for step in range(start, total):
        prog = step / a.steps if not a.time_budget else (time.time() - t_start) / a.time_budget
        if prog >= 1.0:
            break
        rng = np.random.default_rng([a.seed, step])
        x_s, y_s = make_batch(rng, ims, ms, a.synth_batch, None, True)
        pick = rng.choice(train_idx, a.real_batch)
        if not a.geo:
            xr = r_ims[pick].copy()
            # Photometric jitter on real views (brightness, contrast): dim and harsh light alike.
            g = rng.uniform(0.6, 1.3, (a.real_batch, 1, 1, 1)); c = rng.uniform(-25, 25, (a.real_batch, 1, 1, 1))
            xr = np.clip(xr.astype(np.float32) * g + c, 0, 255).astype(np.uint8)
            labs_, tps_ = r_lab[pick], teacher[pick]
            tls_ = t_lines[pick] if t_lines is not None else None
        else:
            xr, labs_, tps_, tls_, warps = [], [], [], [], []
            n_cons = min(a.cons_pairs, a.real_batch) if a.w_cons > 0 else 0
            # A close-up is cut once per pick: both jitters of a consistency pair see the same photo.
            quads = [[r_meta[k]["boxes"][ln] for ln in real_boxes.LINES if ln in r_meta[k]["boxes"]] for k in pick]
            cuts = [closeup_mask(q, r_ims.shape[1], rng.uniform(*CLOSEUP_MARGIN))
                    if q and a.closeup > 0 and rng.random() < a.closeup else None for q in quads]
            # The first n_cons picks are seen again under a second jitter, after the others.
            for k, cut in zip(list(pick) + list(pick[:n_cons]), cuts + cuts[:n_cons]):
                xi, li, pi, ti, mi = jitter(rng, r_ims[k], r_lab[k], teacher[k], t_lines[k] if t_lines is not None else None, cut)
                xr.append(xi); labs_.append(li); tps_.append(pi); tls_.append(ti); warps.append(mi)
            pick = np.concatenate([pick, pick[:n_cons]])
            xr, labs_, tps_ = np.stack(xr), np.stack(labs_), np.stack(tps_)
            tls_ = np.stack(tls_) if t_lines is not None else None
        dev = a.device
        x_s, y_s = x_s.to(dev), y_s.to(dev)
        x_r = torch.from_numpy(xr).permute(0, 3, 1, 2).float().div_(255.0).to(dev)
        lab = torch.from_numpy(labs_).to(dev)
        tp = torch.from_numpy(tps_).float().div_(255.0).to(dev)
        pseudo = None
        if a.w_pseudo > 0:
            pseudo = (torch.from_numpy(tls_).float().div_(255.0).to(dev), torch.from_numpy(keep[pick]).to(dev))
        for gr in opt.param_groups:
            gr["lr"] = gr.get("scale", 1.0) * (lr_at(step, a.steps, a.lr) if not a.time_budget else
                                               a.lr * min(1.0, (step + 1) / 40) * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * min(prog, 1.0)))))
        logits = logits_of(net, torch.cat([x_s, x_r]), a.bf16)
        ls, dice = loss_fn(logits[:a.synth_batch], y_s)
        lr_, parts = real_loss(logits[a.synth_batch:], lab, tp, a.w_frac, pseudo, a.w_pseudo)
        loss = ls + lr_
        if a.w_cons > 0:
            nb = a.real_batch
            th = np.stack([pair_theta(warps[i], warps[nb + i], x_r.shape[-1]) for i in range(n_cons)])
            ra = logits[a.synth_batch:a.synth_batch + n_cons]
            rb = logits[a.synth_batch + nb:a.synth_batch + nb + n_cons]
            l_cons = consistency_loss(ra, rb, th)
            loss = loss + a.w_cons * l_cons
            parts.append(float(l_cons))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if ema:
            ema.update(net)
        hist.append((float(ls), float(lr_)))
        done = step + 1
        if done % 10 == 0 or step == start:
            el = time.time() - t0
            h = np.mean(hist[-10:], 0)
            print(json.dumps({"step": done, "synth": round(float(h[0]), 4), "real": round(float(h[1]), 4),
                              "real_parts": [round(v, 4) for v in parts], "dice": [round(float(d), 3) for d in dice],
                              "lr": round(opt.param_groups[0]["lr"], 6),
                              "s_per_step": round(el / (done - start), 2), "elapsed_s": round(el)}), flush=True)
        if time.time() - last_ck > a.ckpt_min * 60:
            save(done)
            last_ck = time.time()
            print(f"checkpoint at step {done}", flush=True)
    net.eval()
    save(done)
    save(done, "final.pt")
    if ema:   # the averaged weights in final.pt's form: export, evaluate and run.sh read either file alike
        save_checkpoint({"model": ema.avg, "arch": net.arch, "step": done, "size": net.view_size, "frame": FRAME_SIDE,
                         "args": vars(a)},
                        os.path.join(a.out, "final_ema.pt"))
    el = time.time() - t0
    with open(os.path.join(a.out, "train_info.json"), "w") as f:
        json.dump({"steps": done - start, "wall_s": round(el), "s_per_step": round(el / max(1, done - start), 3)}, f)
    print("done", flush=True)


if __name__ == "__main__":
    main()
