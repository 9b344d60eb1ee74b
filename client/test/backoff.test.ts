import { describe, expect, it } from 'vitest';
import { backoffBound, jitteredDelay } from '../src/index.js';

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
    const bounds = [1, 2, 3, 4, 5, 6, 7].map((a) => backoffBound(a, 250, 4000, Infinity));
    expect(bounds).toEqual([250, 500, 1000, 2000, 4000, 4000, 4000]);
  });

  it('never exceeds the time left in the window', () => {
    expect(backoffBound(5, 250, 4000, 1500)).toBe(1500);
    expect(backoffBound(1, 250, 4000, 100)).toBe(100);
    expect(backoffBound(1, 250, 4000, 0)).toBe(0);
  });

  it('takes the cap for attempts whose power overflows', () => {
    expect(backoffBound(5000, 250, 4000, Infinity)).toBe(4000);
  });
});

describe('jitteredDelay', () => {
  it('is random() times the bound (full jitter)', () => {
    expect(jitteredDelay(1, 250, 4000, Infinity, () => 0)).toBe(0);
    expect(jitteredDelay(3, 250, 4000, Infinity, () => 0.5)).toBe(500);
    expect(jitteredDelay(9, 250, 4000, Infinity, () => 0.25)).toBe(1000);
  });

  it('keeps every delay within [0, cap] and below the window, over many seeded draws', () => {
    const cap = 4000;
    for (const seed of [1, 2, 3, 42, 1234]) {
      const random = seeded(seed);
      let sawHigh = false;
      for (let attempt = 1; attempt <= 400; attempt++) {
        const window = (attempt * 37) % 9000;
        const d = jitteredDelay(attempt, 250, cap, window === 0 ? Infinity : window, random);
        expect(d).toBeGreaterThanOrEqual(0);
        expect(d).toBeLessThanOrEqual(cap);
        if (window !== 0) expect(d).toBeLessThan(window);
        if (d > cap / 2) sawHigh = true;
      }
      // Full jitter spreads over the whole range, not only near 0.
      expect(sawHigh).toBe(true);
    }
  });

  it('clamps a random source that leaves [0, 1)', () => {
    for (const r of [-1, 1, 7, Number.NaN, Infinity]) {
      const d = jitteredDelay(4, 250, 4000, Infinity, () => r);
      expect(d).toBeGreaterThanOrEqual(0);
      expect(d).toBeLessThan(2000);
    }
  });
});
