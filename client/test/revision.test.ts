import { describe, expect, it } from 'vitest';
import { RevisionTracker } from '../src/index.js';

describe('RevisionTracker', () => {
  it('applies the first revision, whatever it is, and then the next ones', () => {
    const t = new RevisionTracker();
    expect(t.highest).toBe(-1);
    expect(t.offer(7)).toBe('apply');
    expect(t.offer(8)).toBe('apply');
    expect(t.highest).toBe(8);
  });

  it('drops duplicates and older revisions without moving', () => {
    const t = new RevisionTracker();
    t.offer(5);
    expect(t.offer(5)).toBe('duplicate');
    expect(t.offer(3)).toBe('stale');
    expect(t.offer(0)).toBe('stale');
    expect(t.highest).toBe(5);
  });

  it('reports a gap and takes the newer revision', () => {
    const t = new RevisionTracker();
    t.offer(2);
    expect(t.offer(5)).toBe('gap');
    expect(t.highest).toBe(5);
    expect(t.offer(4)).toBe('stale');
    expect(t.offer(6)).toBe('apply');
  });

  it('starts at revision 0 like a new lobby', () => {
    const t = new RevisionTracker();
    expect(t.offer(0)).toBe('apply');
    expect(t.offer(0)).toBe('duplicate');
    expect(t.offer(1)).toBe('apply');
  });
});
