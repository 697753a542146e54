/**
 * Refused uploads are paced per client. A refusal written before its request body ended makes
 * this replica read and discard part of that body (respond.ts: the lingering close, at most
 * 1 MiB on HTTP/1.1), so a client sending large bodies past its limits, in a loop, would keep the
 * event loop discarding them, ahead of every other client's work (issue 29, finding 2). Each
 * recognised client, and all requests without a recognised key from one address together, may
 * have at most {@link REFUSED_BYTES_PER_S} of such bodies discarded a second on a replica, after a
 * burst of {@link REFUSED_BURST_BYTES}; a refusal past that waits, its body unread, until its
 * turn. A refusal whose turn is more than {@link MAX_WAIT_MS} away is answered at once without the
 * lingering close: the connection closes after the answer. test/integration/abuse.spec.ts
 * ("finding 2: refused uploads are paced") and test/unit/server/refusal-pace.spec.ts pin it.
 */

/** REFUSED_BYTES_PER_S: the unread request bytes one payer's refusals may have discarded a second, per replica. */
export const REFUSED_BYTES_PER_S = 8 * 1024 * 1024;
/** REFUSED_BURST_BYTES: what a payer that had no refusal for a while may have discarded at once. */
export const REFUSED_BURST_BYTES = 16 * 1024 * 1024;
/** MAX_WAIT_MS: the longest a refusal waits for its turn. */
export const MAX_WAIT_MS = 1000;

/** Turn is when a refusal may be answered. */
export type Turn =
  /** After `waitMs` (0: now), with the lingering close. */
  | { readonly linger: true; readonly waitMs: number }
  /** Now, closing the connection after the answer without discarding its body. */
  | { readonly linger: false; readonly waitMs: 0 };

/** RefusalPace schedules the refusals of unread uploads, each payer's (a client, an address) in its own pace. */
export interface RefusalPace {
  /** turn takes the turn of a refusal of `payer` that leaves `bytes` of its body to discard. */
  turn(payer: string, bytes: number): Turn;
}

/** RefusalPaceOptions configure {@link createRefusalPace}; the defaults are the constants above. */
export interface RefusalPaceOptions {
  bytesPerSecond?: number;
  burstBytes?: number;
  maxWaitMs?: number;
  /** How many payers are remembered at once; beyond it a new one is not paced. Default 10000. */
  maxPayers?: number;
  /** The clock, ms (monotonic). Default performance.now. */
  now?: () => number;
}

/**
 * createRefusalPace returns a {@link RefusalPace}: a byte-counting GCRA per payer that shapes
 * rather than refuses. Each refusal is due once the payer's theoretical arrival time, advanced
 * by its bytes' share of a second, lies within the burst; it waits until then.
 */
export function createRefusalPace(options: RefusalPaceOptions = {}): RefusalPace {
  const msPerByte = 1000 / (options.bytesPerSecond ?? REFUSED_BYTES_PER_S);
  const tolerance = (options.burstBytes ?? REFUSED_BURST_BYTES) * msPerByte;
  const maxWaitMs = options.maxWaitMs ?? MAX_WAIT_MS;
  const maxPayers = options.maxPayers ?? 10_000;
  const now = options.now ?? (() => performance.now());
  // Per payer, the theoretical arrival time (ms); a time in the past is a payer with its whole burst.
  const tats = new Map<string, number>();

  return {
    turn(payer, bytes) {
      if (bytes <= 0) return { linger: true, waitMs: 0 };
      const t = now();
      const next = Math.max(tats.get(payer) ?? t, t) + bytes * msPerByte;
      const waitMs = Math.max(0, next - tolerance - t);
      if (waitMs > maxWaitMs) return { linger: false, waitMs: 0 };
      if (!tats.has(payer) && tats.size >= maxPayers) {
        for (const [p, tat] of tats) if (tat <= t) tats.delete(p);
        if (tats.size >= maxPayers) return { linger: true, waitMs: 0 };
      }
      tats.set(payer, next);
      return { linger: true, waitMs };
    },
  };
}
