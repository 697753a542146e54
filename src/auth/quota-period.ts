/**
 * Quota periods: the calendar month in UTC (SPEC.md section 5).
 */

/** QuotaPeriod identifies one calendar month in UTC. */
export interface QuotaPeriod {
  /** "YYYY-MM", used in store keys. */
  readonly id: string;
  /** Unix seconds of 00:00:00 UTC on the 1st of the next month. */
  readonly resetsAt: number;
}

/** quotaPeriodOf returns the period containing `now` (default: the current time). */
export function quotaPeriodOf(now: Date = new Date()): QuotaPeriod {
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth();
  return {
    id: `${y}-${String(m + 1).padStart(2, "0")}`,
    resetsAt: Date.UTC(y, m + 1, 1) / 1000,
  };
}

/** secondsUntilReset is the Retry-After value for a spent quota: at least 1. */
export function secondsUntilReset(period: QuotaPeriod, now: Date = new Date()): number {
  return Math.max(1, Math.ceil(period.resetsAt - now.getTime() / 1000));
}
