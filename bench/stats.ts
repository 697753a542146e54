/**
 * Small statistics helpers for the benchmark.
 */

/** quantile of `values` (0..1), linear interpolation; NaN when empty. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return s[lo] + (s[hi] - s[lo]) * (pos - lo);
}

/** median of `values`. */
export function median(values: readonly number[]): number {
  return quantile(values, 0.5);
}
