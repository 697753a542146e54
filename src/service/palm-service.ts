/**
 * PalmService: a thin implementation over the injected {@link Analyzer}. Auth, quota, request ids
 * and error mapping live in interceptors; this file checks the image size, applies the analyze
 * deadline and shapes SPEC.md section 3's response.
 */
import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import { AnalyzeResponseSchema, type AnalyzeRequest, type AnalyzeResponse, type PalmService } from "../../gen/palm/v1/palm_pb.js";
import { kPrincipal, kQuota, kRequestId, type UsageSnapshot } from "../request/context-keys.js";
import { badRequest, palmError, toPalmError } from "../errors.js";
import type { AnalysisResult, Analyzer, ImageOutput, LineEnd, LineTraits } from "../inference/analyzer-types.js";
import { MAX_IMAGE_BYTES } from "../limits.js";
import { newRequestId } from "../request/request-id.js";

/** PalmServiceOptions configure {@link createPalmService}. */
export interface PalmServiceOptions {
  analyzer: Analyzer;
  /** Deadline of one analysis in ms; a client's shorter deadline wins. */
  analyzeTimeoutMs: number;
}

/** createPalmService returns the `palm.v1.PalmService` implementation. */
export function createPalmService(options: PalmServiceOptions): ServiceImpl<typeof PalmService> {
  const { analyzer } = options;
  return {
    async analyze(req: AnalyzeRequest, ctx: HandlerContext): Promise<AnalyzeResponse> {
      if (req.image.byteLength === 0) throw badRequest("missing_image", "image");
      if (req.image.byteLength > MAX_IMAGE_BYTES) throw badRequest("image_too_large", "image");
      // Quota: the unit is reserved only once the engine admitted the work (an overloaded 503
      // never holds one), and committed before the answer is shaped, so that requests_used is
      // this request's own place (test/integration/quota-leases.spec.ts).
      const images = imageOutputOf(req);
      const quota = ctx.values.get(kQuota);
      const result = await analyzeWithDeadline(analyzer, req.image, images, ctx, options.analyzeTimeoutMs, quota?.reserve);
      const usage = quota && (await quota.commit());
      return toResponse(result, usage, ctx);
    },
    health() {
      return { status: "ok" };
    },
  };
}

/** IMAGES_OPTIONS maps AnalyzeRequest.images to the images the engine makes ("" is "all"). */
const IMAGES_OPTIONS: Readonly<Record<string, Pick<ImageOutput, "overlay" | "masks">>> = Object.freeze({
  "": { overlay: true, masks: true },
  all: { overlay: true, masks: true },
  overlay: { overlay: true, masks: false },
  masks: { overlay: false, masks: true },
  none: { overlay: false, masks: false },
});

/** imageOutputOf reads the lean-answer options of a request; throws invalid_option for an unknown `images`. */
export function imageOutputOf(req: Pick<AnalyzeRequest, "images" | "maxOverlaySide">): ImageOutput {
  const parts = Object.hasOwn(IMAGES_OPTIONS, req.images) ? IMAGES_OPTIONS[req.images] : undefined;
  if (!parts) {
    throw badRequest("invalid_option", "images", "images must be one of all, overlay, masks or none.");
  }
  return { ...parts, maxOverlaySide: req.maxOverlaySide };
}

async function analyzeWithDeadline(
  analyzer: Analyzer,
  image: Uint8Array,
  images: ImageOutput,
  ctx: HandlerContext,
  timeoutMs: number,
  admitted: (() => Promise<void>) | undefined,
): Promise<AnalysisResult> {
  // The client's deadline when it is the sooner (grpc-timeout, connect-timeout-ms).
  const budgetMs = Math.min(timeoutMs, ctx.timeoutMs() ?? Number.POSITIVE_INFINITY);
  const deadline = AbortSignal.timeout(timeoutMs);
  const signal = AbortSignal.any([ctx.signal, deadline]);
  let onAbort: (() => void) | undefined;
  // Race the engine against the signal: the answer goes out at the deadline even if the engine
  // finishes its current stage later (it drops the work itself when it sees the signal).
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    const clientId = ctx.values.get(kPrincipal)?.clientId;
    return await Promise.race([analyzer.analyze(image, { signal, admitted, clientId, deadline: Date.now() + budgetMs, images }), aborted]);
  } catch (e) {
    if (deadline.aborted || isDeadline(ctx.signal.reason)) throw palmError("timeout", { cause: e });
    if (ctx.signal.aborted) throw palmError("canceled", { cause: e });
    throw toPalmError(e);
  } finally {
    if (onAbort) signal.removeEventListener("abort", onAbort);
    aborted.catch(() => {}); // settled after the race: never an unhandled rejection
  }
}

function isDeadline(reason: unknown): boolean {
  return reason instanceof ConnectError && reason.code === Code.DeadlineExceeded;
}

function toResponse(result: AnalysisResult, usage: UsageSnapshot | undefined, ctx: HandlerContext): AnalyzeResponse {
  const stats = (name: "heart" | "head" | "life") => ({
    pixels: BigInt(result.stats[name].pixels),
    confidence: result.stats[name].confidence,
    coverage: result.stats[name].coverage,
    detected: result.stats[name].detected,
    polyline: result.stats[name].polyline.map(([x, y]) => ({ x, y })),
    length: result.stats[name].length,
    reason: result.stats[name].reason,
    traits: result.stats[name].traits && toTraits(result.stats[name].traits),
  });
  return create(AnalyzeResponseSchema, {
    id: ctx.values.get(kRequestId) ?? newRequestId(),
    object: "palm.analysis",
    created: BigInt(Math.floor(Date.now() / 1000)),
    model: result.model,
    results: {
      overlay: result.overlay,
      masks: { heart: result.masks.heart, head: result.masks.head, life: result.masks.life },
      stats: { heart: stats("heart"), head: stats("head"), life: stats("life") },
      hand: result.hand && {
        handedness: result.hand.handedness,
        landmarks: result.hand.landmarks.map(([x, y]) => ({ x, y })),
        palmWidth: result.hand.palmWidth,
        shape: result.hand.shape,
      },
      reason: result.reason,
      headLifeStart: result.headLifeStart,
    },
    usage: usage && {
      requestsUsed: BigInt(usage.place),
      requestsLimit: BigInt(usage.limit),
      plan: usage.plan,
      resetsAt: BigInt(usage.resetsAt),
    },
  });
}

const point = ([x, y]: [number, number]) => ({ x, y });
const toEnd = (e: LineEnd) => ({ point: point(e.point), across: e.across, along: e.along, zone: e.zone });

function toTraits(t: LineTraits) {
  return {
    length: t.length,
    curvature: t.curvature,
    curvatureLabel: t.curvatureLabel,
    depth: t.depth,
    depthLabel: t.depthLabel,
    breaks: t.breaks.map((b) => ({ at: b.at, length: b.length, point: point(b.point) })),
    forks: t.forks.map((f) => ({ near: f.near, length: f.length, point: point(f.point) })),
    start: toEnd(t.start),
    end: toEnd(t.end),
  };
}
