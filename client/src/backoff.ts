/**
 * Reconnect delays: exponential backoff with full jitter.
 *
 * @packageDocumentation
 */

/** The backoff's shape. */
export interface BackoffOptions {
  /** The bound of the first retry's delay, in milliseconds. Default 250. */
  readonly baseMs?: number;
  /** The largest bound any retry's delay can have, in milliseconds. Default 4000. */
  readonly capMs?: number;
}

/** Default {@link BackoffOptions.baseMs}. */
export const DEFAULT_BACKOFF_BASE_MS = 250;
/** Default {@link BackoffOptions.capMs}. */
export const DEFAULT_BACKOFF_CAP_MS = 4000;

/**
 * The upper bound of the delay before retry number `attempt` (1 for the
 * first retry after a drop): `min(cap, base * 2^(attempt-1), window)`,
 * where `window` is the time left before the client must stop (the end of
 * the grace). The delay itself is drawn uniformly from `[0, bound)`: full
 * jitter, so that the players of one crashed process do not all come back
 * in the same instant, and no retry can start after the window has ended.
 */
export function backoffBound(attempt: number, baseMs: number, capMs: number, windowMs: number): number {
  // 2^(attempt-1) overflows to Infinity for huge attempts; min() then
  // takes the cap, which is what it should.
  const exp = baseMs * Math.pow(2, Math.max(0, attempt - 1));
  return Math.max(0, Math.min(capMs, exp, windowMs));
}

/**
 * Draws the delay before retry number `attempt`: `random() * bound`, with
 * `random()` in `[0, 1)` like `Math.random`. A `random` that returns a
 * value outside `[0, 1)` is clamped into it, so the delay always stays
 * within `[0, bound)` (or is 0 when the bound is 0).
 */
export function jitteredDelay(attempt: number, baseMs: number, capMs: number, windowMs: number, random: () => number): number {
  const bound = backoffBound(attempt, baseMs, capMs, windowMs);
  let r = random();
  if (!(r >= 0)) r = 0; // NaN and negatives
  if (r >= 1) r = 1 - Number.EPSILON;
  return r * bound;
}
