/**
 * The revision rule: keep the highest revision applied, drop anything not
 * newer, and notice gaps.
 *
 * @packageDocumentation
 */

/** What {@link RevisionTracker.offer} decided about a revision. */
export type RevisionVerdict =
  /** The first revision seen, or the next one: apply it. */
  | 'apply'
  /** Newer, but revisions were skipped: apply it as a full resync. */
  | 'gap'
  /** Equal to the highest applied: drop it. */
  | 'duplicate'
  /** Older than the highest applied: drop it, it would roll the view back. */
  | 'stale';

/**
 * Keeps the highest lobby revision applied. Revisions of one lobby only go
 * up, by exactly one per visible change; a state that is not newer than
 * what is shown would show the past, and one that is more than one newer
 * says that changes were missed (the states in between never arrived, for
 * instance while the socket was down). Since every state carries the whole
 * lobby, the newer state itself is the resync: the client applies it in
 * full and reports the gap. The tracker lives as long as its client, across
 * reconnects, so a new socket can never bring back an older view.
 */
export class RevisionTracker {
  private highestRev = -1;

  /** The highest revision applied, or -1 before the first. */
  get highest(): number {
    return this.highestRev;
  }

  /**
   * Judges revision `rev` and, when it is to be applied (`apply` or
   * `gap`), records it as the highest.
   */
  offer(rev: number): RevisionVerdict {
    const h = this.highestRev;
    if (h >= 0 && rev === h) return 'duplicate';
    if (h >= 0 && rev < h) return 'stale';
    this.highestRev = rev;
    return h < 0 || rev === h + 1 ? 'apply' : 'gap';
  }
}
