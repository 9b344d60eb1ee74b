// The connection's life: tickets, the reconnect schedule, the grace,
// close codes, drains, heartbeats and the ways the client stops.

import { describe, expect, it } from 'vitest';
import { CloseCode, NotConnectedError, TicketError, TicketRefusedError, type ConnectionState } from '../src/index.js';
import { connected, harness, settle, state, welcome, type Harness } from './helpers.js';

type Reconnecting = Extract<ConnectionState, { status: 'reconnecting' }>;

function reconnecting(h: Harness): Reconnecting[] {
  return h.states().filter((s): s is Reconnecting => s.status === 'reconnecting');
}

/** Fails every attempt the client makes, as a refused upgrade looks to a browser, until `until`. */
async function failAttemptsUntil(h: Harness, until: number): Promise<void> {
  let seen = h.sockets.length;
  for (let i = 0; h.clock.now() < until && h.clock.pending().length > 0; i++) {
    if (i > 1000) throw new Error(`runaway: ${h.clock.now()} ${h.clock.pending()} ${JSON.stringify(h.client.connection)}`);
    await h.clock.next();
    if (h.sockets.length > seen) {
      seen = h.sockets.length;
      h.socket().serverClose(CloseCode.Abnormal);
    }
  }
}

describe('tickets', () => {
  it('asks for a fresh ticket for every attempt and puts it in the URL', async () => {
    const h = await connected({}, [state(1)]);
    h.socket().serverClose(CloseCode.Abnormal);
    await h.clock.next();
    h.socket().serverClose(CloseCode.Abnormal);
    await h.clock.next();
    expect(h.tickets).toEqual(['ticket-1', 'ticket-2', 'ticket-3']);
    expect(h.sockets.map((s) => s.ticket())).toEqual(['ticket-1', 'ticket-2', 'ticket-3']);
    expect(h.sockets[0]!.url).toBe('ws://lobby.test/rooms/room-1/socket?ticket=ticket-1');
  });

  it('retries a failed getTicket with backoff, and reports it as a TicketError', async () => {
    const h = await connected({ failTickets: { calls: [2, 3] } });
    h.socket().serverClose(CloseCode.Abnormal);
    await h.clock.next(); // ticket 2: fails
    await h.clock.next(); // ticket 3: fails
    const r = reconnecting(h);
    expect(r.map((s) => s.attempt)).toEqual([1, 2, 3]);
    expect(r[1]!.lastClose.code).toBeNull();
    expect(r[1]!.lastClose.error).toBeInstanceOf(TicketError);
    expect(r[1]!.lastClose.error!.code).toBe('ticket_failed');
    await h.clock.next(); // ticket 4: a socket
    expect(h.sockets.length).toBe(2);
    expect(h.socket().ticket()).toBe('ticket-4');
  });

  it('stops at once when getTicket throws TicketRefusedError', async () => {
    const h = harness({ failTickets: { calls: [1], error: new TicketRefusedError('signed out') } });
    h.client.connect();
    await settle();
    expect(h.client.connection).toMatchObject({ status: 'closed', reason: 'ticket_refused' });
    await h.clock.advance(60_000);
    expect(h.ticketCalls.length).toBe(1);
    expect(h.sockets.length).toBe(0);
  });

  it('accepts a plain string from getTicket, and a URL builder', async () => {
    const urls: string[] = [];
    const h = harness({ getTicket: async () => 'abc/def', url: (t, room) => (urls.push(`${room}:${t}`), `ws://x/${room}?t=${t}`) });
    h.client.connect();
    await settle();
    expect(urls).toEqual(['room-1:abc/def']);
    expect(h.socket().url).toBe('ws://x/room-1?t=abc/def');
  });
});

describe('reconnect schedule', () => {
  it('backs off exponentially up to the cap, with the jitter drawn from random()', async () => {
    const h = await connected({ randoms: [0.5] }, [state(1)]);
    // A long grace, so that only the backoff shapes the schedule.
    h.socket().receive(state(2, { overrides: { grace_ms: 600_000 } }));
    const dropped = h.clock.now();
    h.socket().serverClose(CloseCode.Abnormal);
    await failAttemptsUntil(h, dropped + 20_000);
    const delays = reconnecting(h).map((s) => s.delayMs);
    expect(delays.slice(0, 8)).toEqual([125, 250, 500, 1000, 2000, 2000, 2000, 2000]);
    // Each attempt asked for its ticket exactly when its delay ended.
    const r = reconnecting(h);
    for (let i = 0; i < 8; i++) expect(h.ticketCalls[i + 1]).toBe(r[i]!.retryAt);
    expect(r[0]!.droppedAt).toBe(dropped);
    expect(r[0]!.graceDeadline).toBe(dropped + 600_000);
  });

  it('keeps every delay within [0, min(cap, base·2^(attempt-1))] (full jitter)', async () => {
    const randoms = [0, 0.999999, 0.3, 0.999999, 0.75, 0.999999, 0.01, 0.999999, 0.5, 0.999999, 0.999999, 0];
    const h = await connected({ randoms, backoff: { baseMs: 100, capMs: 1000 } });
    h.socket().receive(state(2, { overrides: { grace_ms: 600_000 } }));
    h.socket().serverClose(CloseCode.Abnormal);
    await failAttemptsUntil(h, h.clock.now() + 30_000);
    const r = reconnecting(h);
    expect(r.length).toBeGreaterThan(12);
    for (const s of r) {
      const bound = Math.min(1000, 100 * 2 ** (s.attempt - 1));
      expect(s.delayMs).toBeGreaterThanOrEqual(0);
      expect(s.delayMs).toBeLessThan(bound);
      expect(s.delayMs).toBeLessThanOrEqual(1000);
    }
    // The draws reach both ends of the range.
    expect(r[0]!.delayMs).toBe(0);
    expect(r[1]!.delayMs).toBeCloseTo(200, 0);
  });

  it('starts again from the base after a successful reconnect', async () => {
    const h = await connected({ randoms: [0.5] });
    h.socket().serverClose(CloseCode.Abnormal);
    await failAttemptsUntil(h, h.clock.now() + 300);
    expect(reconnecting(h).map((s) => s.delayMs)).toEqual([125, 250, 500]);
    await h.clock.next();
    h.attach([state(2)]);
    expect(h.client.connection.status).toBe('open');
    h.socket().serverClose(CloseCode.Abnormal);
    expect(reconnecting(h).at(-1)).toMatchObject({ attempt: 1, delayMs: 125 });
  });
});

describe('the grace', () => {
  it('never starts an attempt at or after the grace deadline, then stops with grace_ended', async () => {
    const h = await connected({ randoms: [0.999] });
    await h.clock.advance(3000); // the grace counts from the drop, not from the join
    const dropped = h.clock.now();
    h.socket().serverClose(CloseCode.Abnormal);
    await failAttemptsUntil(h, dropped + 60_000);
    const deadline = dropped + 8000;
    expect(reconnecting(h)[0]!.graceDeadline).toBe(deadline);
    const attempts = h.ticketCalls.slice(1);
    expect(attempts.length).toBeGreaterThan(3);
    for (const t of attempts) expect(t).toBeLessThan(deadline);
    expect(h.client.connection).toMatchObject({ status: 'closed', reason: 'grace_ended', code: CloseCode.Abnormal });
    const n = h.ticketCalls.length;
    await h.clock.advance(60_000);
    expect(h.ticketCalls.length).toBe(n);
    expect(h.clock.pending()).toEqual([]);
  });

  it('makes one last retry in the time left when the backoff would overshoot, then stops', async () => {
    const h = await connected({ randoms: [0.999] });
    const dropped = h.clock.now();
    h.socket().serverClose(CloseCode.Abnormal);
    await failAttemptsUntil(h, dropped + 60_000);
    const r = reconnecting(h);
    // 249.75, 499.5, 999, 1998, 3996 ms fit into 8 s; the next 3996 would not,
    // so the sixth retry is drawn from the 257.75 ms left, and is the last.
    expect(r.map((s) => Math.round(s.delayMs))).toEqual([250, 500, 999, 1998, 3996, 257]);
    expect(h.ticketCalls.length).toBe(7);
    expect(h.ticketCalls.at(-1)).toBeLessThan(dropped + 8000);
    expect(h.client.connection).toMatchObject({ status: 'closed', reason: 'grace_ended' });
  });

  it('starts no attempt when a throttled timer fires after the deadline', async () => {
    const h = await connected({ randoms: [0.5] });
    const dropped = h.clock.now();
    h.clock.lateBy = 9000; // a background tab: the retry fires 9 s late
    h.socket().serverClose(CloseCode.Abnormal);
    await h.clock.next();
    expect(h.clock.now()).toBeGreaterThan(dropped + 8000);
    expect(h.ticketCalls.length).toBe(1);
    expect(h.client.connection).toMatchObject({ status: 'closed', reason: 'grace_ended' });
  });

  it('uses the lobby\'s own grace when its overrides set one', async () => {
    const h = await connected({}, [state(1, { overrides: { grace_ms: 3000 } })]);
    const dropped = h.clock.now();
    h.socket().serverClose(CloseCode.Rejoin);
    expect(reconnecting(h)[0]!.graceDeadline).toBe(dropped + 3000);
  });

  it('lets an attempt that started inside the grace finish after it', async () => {
    const h = await connected({ randoms: [0.999], attemptTimeoutMs: 60_000 });
    const dropped = h.clock.now();
    h.socket().serverClose(CloseCode.Abnormal);
    await failAttemptsUntil(h, dropped + 7000);
    // The last attempt's socket is still opening when the deadline passes.
    while (h.ticketCalls.length < 2 || h.sockets.length === 1) await h.clock.next();
    await h.clock.advance(dropped + 9000 - h.clock.now());
    expect(h.client.connection.status).toBe('reconnecting');
    h.attach([state(2)]);
    expect(h.client.connection.status).toBe('open');
  });

  it('does not reconnect at all under a grace of 0', async () => {
    const h = harness();
    h.client.connect();
    await settle();
    h.attach([state(1)], welcome({ graceMs: 0 }));
    h.socket().serverClose(CloseCode.Abnormal);
    expect(h.client.connection).toMatchObject({ status: 'closed', reason: 'grace_ended' });
  });
});

describe('close codes', () => {
  // Every code the server documents, on an open socket.
  it.each([
    [1000, 'reconnect', 125],
    [1001, 'reconnect', 0],
    [1006, 'reconnect', 125],
    [1009, 'protocol_error', null],
    [1011, 'reconnect', 125],
    [1012, 'reconnect', 0],
    [4001, 'reconnect', 125],
    [4002, 'superseded', null],
    [4003, 'left', null],
    [4004, 'reconnect', 125],
    [4008, 'reconnect', 125],
    [4009, 'lobby_full', null],
    [4010, 'kicked', null],
    [4011, 'lobby_locked', null],
    [4012, 'blocked', null],
    [4013, 'reconnect', 0],
  ] as const)('%i → %s', async (code, outcome, delay) => {
    const h = await connected({ randoms: [0.5] });
    h.socket().serverClose(code, 'why');
    if (outcome === 'reconnect') {
      expect(h.client.connection).toMatchObject({ status: 'reconnecting', attempt: 1, delayMs: delay, lastClose: { code, reason: 'why' } });
      await h.clock.advance(delay);
      expect(h.ticketCalls.length).toBe(2);
    } else {
      expect(h.client.connection).toEqual({ status: 'closed', reason: outcome, code, error: null });
      await h.clock.advance(120_000);
      expect(h.ticketCalls.length).toBe(1);
      expect(h.sockets.length).toBe(1);
    }
  });

  it('stops on a refused join, with the server\'s error reported', async () => {
    for (const [code, err, reason] of [
      [4009, 'lobby_full', 'lobby_full'],
      [4011, 'lobby_locked', 'lobby_locked'],
      [4012, 'blocked', 'blocked'],
    ] as const) {
      const h = harness();
      h.client.connect();
      await settle();
      h.socket().open();
      h.socket().receive({ type: 'error', code: err, message: 'no' });
      h.socket().serverClose(code);
      expect(h.client.connection).toMatchObject({ status: 'closed', reason });
      expect(h.of('serverError').map(([e]) => e.code)).toEqual([err]);
      await h.clock.advance(60_000);
      expect(h.ticketCalls.length).toBe(1);
    }
  });
});

describe('drain', () => {
  it('reconnects at once after the server goes away, then backs off if that fails', async () => {
    const h = await connected({ randoms: [0.5] });
    h.socket().serverClose(CloseCode.GoingAway, 'server shutting down');
    await settle();
    expect(h.ticketCalls).toEqual([h.ticketCalls[0], h.clock.now()]);
    expect(h.sockets.length).toBe(2);
    h.socket().serverClose(CloseCode.Abnormal); // the other process is not up yet
    expect(h.client.connection).toMatchObject({ status: 'reconnecting', attempt: 2, delayMs: 250 });
  });

  it('does not hurry when an attempt that never joined is told to go away', async () => {
    const h = await connected({ randoms: [0.5] });
    h.socket().serverClose(CloseCode.Abnormal);
    await h.clock.next();
    h.socket().open();
    h.socket().serverClose(CloseCode.GoingAway);
    expect(h.client.connection).toMatchObject({ status: 'reconnecting', attempt: 2, delayMs: 250 });
  });
});

describe('stopping', () => {
  it('never reconnects after a kick or a supersede, however long it waits', async () => {
    for (const code of [CloseCode.Kicked, CloseCode.Superseded]) {
      const h = await connected();
      h.socket().serverClose(code);
      await h.clock.advance(24 * 3600_000);
      expect(h.ticketCalls.length).toBe(1);
      expect(h.client.connection.status).toBe('closed');
      expect(h.clock.pending()).toEqual([]);
    }
  });

  it('disconnect() closes the socket with 1000 and stops; connect() starts again', async () => {
    const h = await connected();
    h.client.disconnect();
    expect(h.socket().closedWith?.code).toBe(1000);
    expect(h.client.connection).toMatchObject({ status: 'closed', reason: 'client' });
    await h.clock.advance(60_000);
    expect(h.ticketCalls.length).toBe(1);
    h.client.connect();
    await settle();
    expect(h.ticketCalls.length).toBe(2);
    expect(h.client.connection.status).toBe('connecting');
  });

  it('stops with left after leave(), whatever close follows', async () => {
    const h = await connected();
    h.client.leave();
    expect(h.socket().sentMessages().at(-1)).toEqual({ type: 'leave' });
    h.socket().serverClose(CloseCode.Abnormal);
    expect(h.client.connection).toMatchObject({ status: 'closed', reason: 'left' });
  });

  it('stops on a protocol error, closing the socket', async () => {
    for (const frame of ['not json', '{"type":"lobby.state","version":"x"}', JSON.stringify(welcome({ roomId: 'room-2' }))]) {
      const h = harness();
      h.client.connect();
      await settle();
      h.socket().open();
      h.socket().receive(frame);
      expect(h.client.connection).toMatchObject({ status: 'closed', reason: 'protocol_error', error: { code: 'protocol_error' } });
      expect(h.socket().closedWith).not.toBeNull();
      await h.clock.advance(60_000);
      expect(h.ticketCalls.length).toBe(1);
    }
  });

  it('ignores message types it does not know', async () => {
    const h = await connected();
    h.socket().receive({ type: 'from.the.future', x: 1 });
    expect(h.client.connection.status).toBe('open');
  });
});

describe('first connect', () => {
  it('retries with backoff until connectTimeoutMs, then stops with connect_failed', async () => {
    const h = harness({ randoms: [0.999], connectTimeoutMs: 5000 });
    h.client.connect();
    const started = h.clock.now();
    await settle();
    h.socket().serverClose(CloseCode.Abnormal);
    await failAttemptsUntil(h, started + 30_000);
    expect(h.states().every((s) => s.status === 'connecting' || s.status === 'closed')).toBe(true);
    for (const t of h.ticketCalls) expect(t).toBeLessThan(started + 5000);
    expect(h.client.connection).toMatchObject({ status: 'closed', reason: 'connect_failed' });
  });

  it('gives up on an attempt that gets no welcome in time', async () => {
    const h = harness({ attemptTimeoutMs: 2000, randoms: [0.5] });
    h.client.connect();
    await settle();
    await h.clock.advance(2000);
    expect(h.sockets[0]!.closedWith?.code).toBe(CloseCode.ClientTimeout);
    expect(h.client.connection).toMatchObject({ status: 'connecting', attempt: 1, lastClose: { code: CloseCode.ClientTimeout } });
    await h.clock.advance(125);
    expect(h.sockets.length).toBe(2);
  });

  it('is open only once the server welcomed the socket', async () => {
    const h = harness();
    h.client.connect();
    await settle();
    h.socket().open();
    h.socket().receive(state(1));
    expect(h.client.connection.status).toBe('connecting');
    expect(() => h.client.sendChat('hi')).toThrow(NotConnectedError);
    h.socket().receive(welcome());
    expect(h.client.connection).toEqual({ status: 'open', userId: 'alice', connection: 1, heartbeatMs: 4500, graceMs: 8000 });
  });
});

describe('heartbeats', () => {
  it('pings at the interval the server announced while answers come', async () => {
    const h = await connected();
    const s = h.socket();
    await h.clock.advance(4499);
    expect(s.sent).toEqual([]);
    await h.clock.advance(1);
    expect(s.sentMessages()).toEqual([{ type: 'ping' }]);
    s.receive({ type: 'pong' });
    await h.clock.advance(4500);
    s.receive({ type: 'pong' });
    await h.clock.advance(4500);
    s.receive({ type: 'pong' });
    await h.clock.advance(4500);
    expect(s.sentMessages()).toEqual([{ type: 'ping' }, { type: 'ping' }, { type: 'ping' }, { type: 'ping' }]);
    expect(h.client.connection.status).toBe('open');
  });

  it('sends none when the server turned heartbeats off', async () => {
    const h = harness();
    h.client.connect();
    await settle();
    h.attach([state(1)], welcome({ heartbeatMs: 0 }));
    await h.clock.advance(120_000);
    expect(h.socket().sent).toEqual([]);
    expect(h.client.connection.status).toBe('open');
  });

  it('takes a socket that stays silent for two intervals after a ping for dead, and reconnects', async () => {
    const h = await connected({ randoms: [0.5] });
    const s = h.socket();
    await h.clock.advance(4500 * 2);
    expect(h.client.connection.status).toBe('open');
    await h.clock.advance(4500);
    expect(s.closedWith?.code).toBe(CloseCode.ClientTimeout);
    expect(h.client.connection).toMatchObject({ status: 'reconnecting', attempt: 1, lastClose: { code: CloseCode.ClientTimeout } });
  });

  it('counts any frame from the server as a sign of life', async () => {
    const h = await connected();
    const s = h.socket();
    for (let i = 0; i < 10; i++) {
      await h.clock.advance(4500);
      s.receive({ type: 'typing.state', roomId: 'room-1', userIds: [] });
    }
    expect(h.client.connection.status).toBe('open');
  });

  it('stops pinging when the socket drops', async () => {
    const h = await connected({ randoms: [0.999] });
    const s = h.socket();
    s.serverClose(CloseCode.Abnormal);
    await h.clock.advance(20_000);
    expect(s.sent).toEqual([]);
  });
});

describe('listeners that change course', () => {
  it('a disconnect() from a connection listener stops the attempt it was told about', async () => {
    const h = harness();
    const off = h.client.on('connection', (s) => {
      if (s.status === 'connecting') h.client.disconnect();
    });
    h.client.connect();
    await h.clock.advance(60_000);
    expect(h.ticketCalls.length).toBe(0);
    expect(h.client.connection).toMatchObject({ status: 'closed', reason: 'client' });
    off();
  });

  it('a disconnect() while reconnecting leaves no retry behind', async () => {
    const h = await connected();
    h.client.on('connection', (s) => {
      if (s.status === 'reconnecting') h.client.disconnect();
    });
    h.socket().serverClose(CloseCode.Abnormal);
    expect(h.clock.pending()).toEqual([]);
    await h.clock.advance(60_000);
    expect(h.ticketCalls.length).toBe(1);
    expect(h.client.connection).toMatchObject({ status: 'closed', reason: 'client' });
  });

  it('a disconnect() from the open listener leaves the view not live', async () => {
    const h = harness();
    h.client.on('connection', (s) => {
      if (s.status === 'open') h.client.disconnect();
    });
    h.client.connect();
    await settle();
    h.attach([state(1)]);
    expect(h.client.connection.status).toBe('closed');
    expect(h.client.isHost()).toBe(false);
    expect(h.of('sync')).toEqual([]);
    expect(h.clock.pending()).toEqual([]);
  });
});

describe('edges', () => {
  it('opens no socket when disconnect() comes while getTicket is still out', async () => {
    let resolve: (t: string) => void = () => {};
    const h = harness({ getTicket: () => new Promise<string>((r) => (resolve = r)) });
    h.client.connect();
    await settle();
    h.client.disconnect();
    resolve('late-ticket');
    await settle();
    expect(h.sockets.length).toBe(0);
    expect(h.client.connection).toMatchObject({ status: 'closed', reason: 'client' });
  });

  it('gives up an attempt whose getTicket never answers, and asks again', async () => {
    const calls: number[] = [];
    const h = harness({
      attemptTimeoutMs: 1000,
      randoms: [0.5],
      getTicket: () => {
        calls.push(h.clock.now());
        return calls.length === 1 ? new Promise<string>(() => {}) : Promise.resolve('t2');
      },
    });
    h.client.connect();
    await h.clock.advance(1000 + 125);
    expect(calls.length).toBe(2);
    expect(h.socket().ticket()).toBe('t2');
  });

  it('stops with invalid_url when the WebSocket constructor refuses the URL', async () => {
    class Refusing {
      constructor() {
        throw new SyntaxError('bad URL');
      }
    }
    const h = harness({ WebSocket: Refusing as never });
    h.client.connect();
    await settle();
    expect(h.client.connection).toMatchObject({ status: 'closed', reason: 'invalid_url', error: { code: 'invalid_argument' } });
  });

  it('adds the ticket to a URL that has a query already, escaped', async () => {
    const h = harness({ url: 'wss://lobby.example/ws?room=room-1', getTicket: async () => 'a+b/c=' });
    h.client.connect();
    await settle();
    expect(h.socket().url).toBe('wss://lobby.example/ws?room=room-1&ticket=a%2Bb%2Fc%3D');
  });

  it('retries a getTicket that returns no ticket', async () => {
    const h = harness({ getTicket: async () => ({}) as { ticket: string }, randoms: [0.5] });
    h.client.connect();
    await settle();
    expect(h.client.connection).toMatchObject({ status: 'connecting', attempt: 1, lastClose: { error: { code: 'ticket_failed' } } });
    expect(h.sockets.length).toBe(0);
  });
});
