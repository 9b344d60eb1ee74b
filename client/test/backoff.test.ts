import { describe, expect, it } from 'vitest';
import { backoffBound, retryDelay, unitRandom } from '../src/index.js';

// A small deterministic generator (mulberry32), so the "random" draws are
// the same on every run.
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('backoffBound', () => {
  it('doubles from the base up to the cap', () => {
    const bounds = [1, 2, 3, 4, 5, 6, 7].map((a) => backoffBound(a, 250, 4000));
    expect(bounds).toEqual([250, 500, 1000, 2000, 4000, 4000, 4000]);
  });

  it('takes the cap for attempts whose power overflows', () => {
    expect(backoffBound(5000, 250, 4000)).toBe(4000);
  });
});

describe('retryDelay', () => {
  it('is random() times the bound (full jitter)', () => {
    expect(retryDelay(1, 250, 4000, Infinity, () => 0)).toEqual({ delayMs: 0, last: false });
    expect(retryDelay(3, 250, 4000, Infinity, () => 0.5)).toEqual({ delayMs: 500, last: false });
    expect(retryDelay(9, 250, 4000, Infinity, () => 0.25)).toEqual({ delayMs: 1000, last: false });
  });

  it('draws a delay that would reach the window from the window instead, and marks it the last', () => {
    expect(retryDelay(5, 250, 4000, 3000, () => 0.5)).toEqual({ delayMs: 2000, last: false });
    expect(retryDelay(5, 250, 4000, 1000, () => 0.5)).toEqual({ delayMs: 500, last: true });
    expect(retryDelay(5, 250, 4000, 2000, () => 0.5)).toEqual({ delayMs: 1000, last: true });
    expect(retryDelay(5, 250, 4000, 0, () => 0.5)).toEqual({ delayMs: 0, last: true });
  });

  it('keeps every delay within [0, cap] and below the window, over many seeded draws', () => {
    const cap = 4000;
    for (const seed of [1, 2, 3, 42, 1234]) {
      const random = seeded(seed);
      let sawHigh = false;
      for (let attempt = 1; attempt <= 400; attempt++) {
        const window = 1 + ((attempt * 37) % 9000);
        const { delayMs } = retryDelay(attempt, 250, cap, window, random);
        expect(delayMs).toBeGreaterThanOrEqual(0);
        expect(delayMs).toBeLessThanOrEqual(cap);
        expect(delayMs).toBeLessThan(Math.min(window, backoffBound(attempt, 250, cap)));
        if (delayMs > cap / 2) sawHigh = true;
      }
      // Full jitter spreads over the whole range, not only near 0.
      expect(sawHigh).toBe(true);
    }
  });
});

describe('unitRandom', () => {
  it('forces a random source that leaves [0, 1) back into it', () => {
    for (const r of [-1, 1, 7, Number.NaN, Infinity, -Infinity]) {
      const u = unitRandom(() => r);
      expect(u).toBeGreaterThanOrEqual(0);
      expect(u).toBeLessThan(1);
    }
    expect(unitRandom(() => 0.25)).toBe(0.25);
  });
});
