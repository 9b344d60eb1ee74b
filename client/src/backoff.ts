/**
 * Reconnect delays: exponential backoff with full jitter, bounded by the
 * time the client has left.
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
 * first retry): `min(cap, base * 2^(attempt-1))`.
 */
export function backoffBound(attempt: number, baseMs: number, capMs: number): number {
  // 2^(attempt-1) overflows to Infinity for huge attempts; min() then
  // takes the cap, which is what it should.
  return Math.max(0, Math.min(capMs, baseMs * Math.pow(2, Math.max(0, attempt - 1))));
}

/** `random()` forced into `[0, 1)`: NaN and negatives become 0, 1 and above just under 1. */
export function unitRandom(random: () => number): number {
  const r = random();
  if (!(r >= 0)) return 0;
  return r >= 1 ? 1 - Number.EPSILON : r;
}

/** A drawn retry delay. */
export interface RetryDelay {
  /** Milliseconds to wait, in `[0, bound)` (0 when the bound is 0). */
  readonly delayMs: number;
  /** No retry fits after this one: the time left is used up. */
  readonly last: boolean;
}

/**
 * Draws the delay before retry number `attempt`, with full jitter: a
 * uniform random time in `[0, bound)`, so that the players of a crashed
 * process do not all come back in the same instant. A delay that would
 * reach the end of the window (the time left in the grace) is drawn again,
 * with the same random number, from the window itself, and that retry is
 * the last: one more chance before the grace ends, not a burst of ever
 * shorter retries up to it.
 */
export function retryDelay(attempt: number, baseMs: number, capMs: number, windowMs: number, random: () => number): RetryDelay {
  const r = unitRandom(random);
  const delayMs = r * backoffBound(attempt, baseMs, capMs);
  if (delayMs < windowMs) return { delayMs, last: false };
  return { delayMs: r * Math.max(0, windowMs), last: true };
}
