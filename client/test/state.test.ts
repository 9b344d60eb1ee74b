// The lobby view: the revision rule, presence callbacks, host changes,
// the honest view while disconnected, chat and typing.

import { describe, expect, it } from 'vitest';
import { CloseCode, InvalidArgumentError, NotConnectedError, ServerError } from '../src/index.js';
import { connected, harness, settle, state, welcome, type Harness } from './helpers.js';

const names = (h: Harness, ev: 'join' | 'leave') => h.of(ev).map((a) => a[0].userId);

/** Drops the socket and brings the next one up with `states` before its welcome. */
async function reconnect(h: Harness, states: Array<Record<string, unknown>>, code: number = CloseCode.Abnormal): Promise<void> {
  h.socket().serverClose(code);
  await h.clock.next();
  h.attach(states, welcome({ connection: h.sockets.length }));
}

describe('first state', () => {
  it('announces every member as joined, the host, then one sync once open', async () => {
    const h = await connected({}, [state(3, { host: 'alice', term: 1, members: [['alice'], ['bob']] })]);
    const kinds = h.events.map((e) => e[0]).filter((k) => k !== 'typingState');
    expect(kinds).toEqual(['connection', 'connection', 'welcome', 'join', 'join', 'hostChange', 'sync']);
    expect(names(h, 'join')).toEqual(['alice', 'bob']);
    expect(h.of('hostChange')[0]![0]).toEqual({ hostId: 'alice', previousHostId: null, term: 1, previousTerm: null, reason: 'joined' });
    const [view, info] = h.of('sync')[0]!;
    expect(info).toEqual({ cause: 'open', gap: false });
    expect(view).toMatchObject({ revision: 3, hostId: 'alice', live: true });
    expect(h.client.isHost()).toBe(true);
    expect(h.client.userId).toBe('alice');
  });
});

describe('revision rule', () => {
  it('drops duplicate and older states without a callback', async () => {
    const h = await connected({}, [state(5, { members: [['alice'], ['bob']] })]);
    const before = h.events.length;
    h.socket().receive(state(5, { members: [['alice']] }));
    h.socket().receive(state(4, { members: [['alice']] }));
    h.socket().receive(state(1, { host: 'bob' }));
    expect(h.events.slice(before).map((e) => e[0])).toEqual(['revisionDropped', 'revisionDropped', 'revisionDropped']);
    expect(h.of('revisionDropped').map(([d]) => d)).toEqual([
      { revision: 5, highest: 5, verdict: 'duplicate' },
      { revision: 4, highest: 5, verdict: 'stale' },
      { revision: 1, highest: 5, verdict: 'stale' },
    ]);
    expect(h.client.view).toMatchObject({ revision: 5, hostId: 'alice' });
    expect(h.client.view!.members.map((m) => m.userId)).toEqual(['alice', 'bob']);
  });

  it('applies the next revision with its reason', async () => {
    const h = await connected({}, [state(1)]);
    h.socket().receive(state(2, { members: [['alice'], ['bob']], reason: 'joined', subject: 'bob' }));
    expect(names(h, 'join')).toEqual(['alice', 'bob']);
    expect(h.of('sync').at(-1)).toEqual([h.client.view, { cause: 'change', gap: false }]);
    expect(h.client.revision).toBe(2);
  });

  it('reports a gap and resyncs from the next full state', async () => {
    const h = await connected({}, [state(1, { members: [['alice'], ['bob'], ['carol']] })]);
    // Revisions 2–4 never arrived: bob left in one of them; carol's removal is revision 5's own change.
    h.socket().receive(state(5, { members: [['alice'], ['dave', 'online', 4]], reason: 'kicked', subject: 'carol' }));
    expect(h.of('gap')).toEqual([[{ from: 1, to: 5 }]]);
    expect(h.of('leave').map(([m, why]) => [m.userId, why])).toEqual([
      ['bob', 'unknown'],
      ['carol', 'kicked'],
    ]);
    expect(names(h, 'join').slice(-1)).toEqual(['dave']);
    expect(h.of('sync').at(-1)![1]).toEqual({ cause: 'change', gap: true });
    expect(h.client.view!.members.map((m) => m.userId)).toEqual(['alice', 'dave']);
    // Older ones arriving late are dropped.
    h.socket().receive(state(3, { members: [['alice'], ['bob']] }));
    expect(h.client.revision).toBe(5);
  });

  it('never shows an older state after a reconnect', async () => {
    const h = await connected({}, [state(7, { members: [['alice'], ['bob']] })]);
    await reconnect(h, [state(6, { host: 'bob', members: [['bob']] })]);
    expect(h.client.connection.status).toBe('open');
    expect(h.client.view).toMatchObject({ revision: 7, hostId: 'alice', live: true });
    expect(h.of('revisionDropped').map(([d]) => d.verdict)).toEqual(['stale']);
  });

  it('sees a member that left and joined again in missed revisions as a leave and a join', async () => {
    const h = await connected({}, [state(1, { members: [['alice', 'online', 1], ['bob', 'online', 2]] })]);
    h.socket().receive(state(4, { members: [['alice', 'online', 1], ['bob', 'online', 3]], subject: 'bob' }));
    expect(h.of('leave').map(([m, why]) => [m.userId, m.joinSeq, why])).toEqual([['bob', 2, 'unknown']]);
    expect(h.of('join').at(-1)![0]).toMatchObject({ userId: 'bob', joinSeq: 3 });
  });
});

describe('presence', () => {
  it('never calls leave for a member that drops and comes back within its grace', async () => {
    const h = await connected({}, [state(1, { members: [['alice'], ['bob']] })]);
    h.socket().receive(state(2, { members: [['alice'], ['bob', 'reconnecting']], reason: 'disconnected', subject: 'bob' }));
    h.socket().receive(state(3, { members: [['alice'], ['bob']], reason: 'reconnected', subject: 'bob' }));
    expect(h.of('leave')).toEqual([]);
    expect(names(h, 'join')).toEqual(['alice', 'bob']);
    const changes = h.of('memberChange').map(([m, prev]) => [m.userId, prev.status, m.status]);
    expect(changes).toEqual([
      ['bob', 'online', 'reconnecting'],
      ['bob', 'reconnecting', 'online'],
    ]);
    expect(h.of('memberChange')[0]![0].reconnectBy).toBe(Date.parse('2030-01-02T03:04:19Z'));
  });

  it('never calls leave or join for this player across its own reconnect', async () => {
    const h = await connected({}, [state(1, { members: [['alice'], ['bob']] })]);
    await reconnect(h, [state(3, { members: [['alice'], ['bob']], reason: 'reconnected', subject: 'alice' })]);
    expect(h.of('leave')).toEqual([]);
    expect(names(h, 'join')).toEqual(['alice', 'bob']);
  });

  it('names the reason of a removal', async () => {
    const a = ['alice', 'online', 1] as const;
    const c = ['carol', 'online', 3] as const;
    const d = ['dave', 'online', 4] as const;
    const h = await connected({}, [state(1, { members: [[...a], ['bob', 'online', 2], [...c], [...d]] })]);
    h.socket().receive(state(2, { members: [[...a], [...c], [...d]], reason: 'left', subject: 'bob' }));
    h.socket().receive(state(3, { members: [[...a], [...d]], reason: 'kicked', subject: 'carol' }));
    h.socket().receive(state(4, { members: [[...a]], reason: 'lease_expired', subject: 'dave' }));
    expect(h.of('leave').map(([m, why]) => [m.userId, why])).toEqual([
      ['bob', 'left'],
      ['carol', 'kicked'],
      ['dave', 'lease_expired'],
    ]);
  });

  it('reports attribute changes as member changes', async () => {
    const h = await connected({}, [state(1)]);
    const s = state(2, { reason: 'updated' });
    (s.members as Array<Record<string, unknown>>)[0]!.attrs = { role: 'captain' };
    h.socket().receive(s);
    expect(h.of('memberChange').map(([m]) => m.attrs)).toEqual([{ role: 'captain' }]);
  });
});

describe('host', () => {
  it('reports a change of host with its term and the previous host', async () => {
    const h = await connected({}, [state(1, { members: [['alice'], ['bob']], term: 1 })]);
    h.socket().receive(state(2, { host: 'bob', term: 2, members: [['alice'], ['bob']], reason: 'host_transferred', subject: 'bob', previousHost: 'alice' }));
    expect(h.of('hostChange').at(-1)![0]).toEqual({ hostId: 'bob', previousHostId: 'alice', term: 2, previousTerm: 1, reason: 'host_transferred' });
    expect(h.client.isHost()).toBe(false);
    expect(h.client.view!.term).toBe(2);
  });

  it('reports a host that lost the role and got it back in missed revisions by its term', async () => {
    const h = await connected({}, [state(1, { term: 1 })]);
    h.socket().receive(state(4, { term: 3 }));
    expect(h.of('hostChange').at(-1)![0]).toMatchObject({ hostId: 'alice', previousHostId: 'alice', term: 3, previousTerm: 1 });
  });

  it('does not report the host when only members change', async () => {
    const h = await connected({}, [state(1)]);
    h.socket().receive(state(2, { members: [['alice'], ['bob']] }));
    expect(h.of('hostChange').length).toBe(1);
  });

  it('never says "you are the host" while disconnected', async () => {
    const h = await connected({}, [state(1)]);
    expect(h.client.isHost()).toBe(true);
    h.socket().serverClose(CloseCode.Abnormal);
    expect(h.client.isHost()).toBe(false);
    expect(h.client.view).toMatchObject({ hostId: 'alice', live: false });
    // A state a half-open new socket delivers before its welcome changes nothing yet.
    await h.clock.next();
    h.socket().open();
    h.socket().receive(state(2));
    expect(h.client.isHost()).toBe(false);
    h.socket().receive(welcome());
    expect(h.client.isHost()).toBe(true);
    h.client.disconnect();
    expect(h.client.isHost()).toBe(false);
    expect(h.client.view!.live).toBe(false);
  });
});

describe('after a reconnect', () => {
  it('re-announces the view as live, even when nothing newer came', async () => {
    const h = await connected({}, [state(4)]);
    h.socket().serverClose(CloseCode.SlowConsumer);
    const [staleView] = h.of('connection').at(-1)!;
    expect(staleView.status).toBe('reconnecting');
    expect(h.client.view!.live).toBe(false);
    const syncs = h.of('sync').length;
    await h.clock.next();
    h.attach([state(4)]); // another tab kept the member online: same revision
    const after = h.of('sync').slice(syncs);
    expect(after.length).toBe(1);
    expect(after[0]![0]).toMatchObject({ revision: 4, live: true });
    expect(after[0]![1]).toEqual({ cause: 'open', gap: false });
  });

  it('applies the states the new socket brought before announcing it, gap included', async () => {
    const h = await connected({}, [state(4, { members: [['alice'], ['bob']] })]);
    await reconnect(h, [state(9, { members: [['alice']], reason: 'reconnected' })]);
    expect(h.of('gap').at(-1)).toEqual([{ from: 4, to: 9 }]);
    expect(h.of('leave').map(([m, why]) => [m.userId, why])).toEqual([['bob', 'unknown']]);
    const kinds = h.events.map((e) => e[0]);
    const open = kinds.lastIndexOf('welcome');
    expect(kinds.slice(open + 1)).toEqual(['gap', 'leave', 'sync']);
    expect(h.of('sync').at(-1)![1]).toEqual({ cause: 'open', gap: true });
  });

  it('ignores what the old socket says after it was given up', async () => {
    const h = await connected({}, [state(2)]);
    const old = h.socket();
    old.serverClose(CloseCode.Abnormal);
    await h.clock.next();
    h.attach([state(3)]);
    old.receive(state(10, { host: 'mallory' }));
    old.serverClose(CloseCode.Kicked);
    expect(h.client.view).toMatchObject({ revision: 3, hostId: 'alice' });
    expect(h.client.connection.status).toBe('open');
  });
});

describe('countdowns', () => {
  it('counts down to a reconnect deadline on the server\'s clock', async () => {
    const h = await connected({}, [state(1)]);
    h.socket().receive(
      state(2, { members: [['alice'], ['bob', 'reconnecting']], serverTime: '2030-01-02T03:04:13Z', reconnectBy: '2030-01-02T03:04:19Z' }),
    );
    const bob = h.client.view!.members[1]!;
    expect(h.client.reconnectRemainingMs(bob)).toBe(6000);
    await h.clock.advance(2500);
    expect(h.client.reconnectRemainingMs(bob)).toBe(3500);
    await h.clock.advance(10_000);
    expect(h.client.reconnectRemainingMs(bob)).toBe(0);
    expect(h.client.reconnectRemainingMs(h.client.view!.members[0]!)).toBeNull();
  });
});

describe('chat and typing', () => {
  it('passes chat, receipts and typing through, and sends what the app asks', async () => {
    const h = await connected();
    const s = h.socket();
    s.receive({ type: 'chat.history', roomId: 'room-1', messages: [{ messageId: 'm1', userId: 'bob', text: 'hi', time: '2030-01-02T03:04:13Z', readBy: ['carol'] }] });
    s.receive({ type: 'chat.message', roomId: 'room-1', messageId: 'm2', userId: 'alice', text: 'yo', time: '2030-01-02T03:04:14Z', clientMsgId: 'c1' });
    s.receive({ type: 'message.read', roomId: 'room-1', messageId: 'm2', userId: 'bob', time: '2030-01-02T03:04:15Z' });
    s.receive({ type: 'typing', roomId: 'room-1', userId: 'bob', typing: true, userIds: ['bob'] });
    expect(h.of('chatHistory')[0]![0][0]).toMatchObject({ messageId: 'm1', readBy: ['carol'], clientMsgId: null });
    expect(h.of('chat')[0]![0]).toMatchObject({ messageId: 'm2', clientMsgId: 'c1', time: Date.parse('2030-01-02T03:04:14Z') });
    expect(h.of('read')[0]![0]).toMatchObject({ messageId: 'm2', userId: 'bob' });
    expect(h.of('typing')[0]![0]).toEqual({ userId: 'bob', typing: true, userIds: ['bob'] });
    expect(h.client.typingUserIds).toEqual(['bob']);

    expect(h.client.sendChat('hello', 'mine-1')).toBe('mine-1');
    const generated = h.client.sendChat('again');
    h.client.setTyping(true);
    h.client.setTyping(true); // unchanged: not sent again
    h.client.setTyping(false);
    h.client.markRead('m1');
    h.client.transferHost('bob');
    h.client.kick('bob', 60000);
    h.client.kick('carol');
    h.client.lock(true);
    expect(s.sentMessages()).toEqual([
      { type: 'chat.send', text: 'hello', clientMsgId: 'mine-1' },
      { type: 'chat.send', text: 'again', clientMsgId: generated },
      { type: 'typing.set', typing: true },
      { type: 'typing.set', typing: false },
      { type: 'message.read', messageId: 'm1' },
      { type: 'host.transfer', to: 'bob' },
      { type: 'kick', target: 'bob', block_ms: 60000 },
      { type: 'kick', target: 'carol' },
      { type: 'lock', locked: true },
    ]);
    // Nobody is shown typing once the socket is gone.
    s.serverClose(CloseCode.Abnormal);
    expect(h.of('typingState').at(-1)).toEqual([[]]);
    expect(h.client.typingUserIds).toEqual([]);
  });

  it('refuses to send without a joined socket, with a typed error', async () => {
    const h = harness();
    expect(() => h.client.sendChat('x')).toThrow(NotConnectedError);
    h.client.connect();
    await settle();
    try {
      h.client.lock(true);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(NotConnectedError);
      expect((err as NotConnectedError).code).toBe('not_connected');
    }
  });

  it('refuses bad arguments with InvalidArgumentError', async () => {
    const h = await connected();
    const bad: Array<() => unknown> = [
      () => h.client.sendChat(5 as unknown as string),
      () => h.client.sendChat('x', ''),
      () => h.client.kick(''),
      () => h.client.kick('bob', -1),
      () => h.client.kick('bob', 86400001),
      () => h.client.kick('bob', 1.5),
      () => h.client.transferHost(''),
      () => h.client.lock('yes' as unknown as boolean),
      () => h.client.markRead(''),
      () => h.client.on('sync', 3 as never),
    ];
    for (const f of bad) expect(f).toThrow(InvalidArgumentError);
    expect(h.socket().sent).toEqual([]);
    expect(() => harness({ roomId: '' })).toThrow(InvalidArgumentError);
    expect(() => harness({ backoff: { capMs: -1 } })).toThrow(InvalidArgumentError);
  });

  it('reports server refusals as ServerError with the refused type', async () => {
    const h = await connected();
    h.socket().receive({ type: 'error', code: 'not_host', message: 'only the current host can transfer', requestType: 'host.transfer' });
    const [err] = h.of('serverError')[0]!;
    expect(err).toBeInstanceOf(ServerError);
    expect(err.code).toBe('not_host');
    expect(err.requestType).toBe('host.transfer');
    expect(h.client.connection.status).toBe('open');
  });
});

describe('listeners', () => {
  it('keeps going when a listener throws, and reports the error', async () => {
    const errors: unknown[] = [];
    const h = harness({ onListenerError: (e) => errors.push(e) });
    const seen: number[] = [];
    h.client.on('sync', () => {
      throw new Error('boom');
    });
    const off = h.client.on('sync', (v) => seen.push(v.revision));
    h.client.connect();
    await settle();
    h.attach([state(1)]);
    h.socket().receive(state(2));
    off();
    h.socket().receive(state(3));
    expect(seen).toEqual([1, 2]);
    expect(errors.length).toBe(3);
    expect(h.client.revision).toBe(3);
  });
});
