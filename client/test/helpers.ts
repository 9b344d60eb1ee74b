// Test doubles: a fake clock whose time moves only when a test says so, a
// fake WebSocket the test drives from the server's side, and a harness
// that wires them into a LobbyClient and records every callback.

import { LobbyClient, type Clock, type ConnectionState, type LobbyClientOptions, type LobbyEvents, type SocketLike } from '../src/index.js';

/** Lets pending promise callbacks (getTicket's) run; uses no clock. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await Promise.resolve();
}

interface Timer {
  at: number;
  seq: number;
  fn: () => void;
}

/** A clock for tests: `now` moves only in {@link FakeClock.advance}. */
export class FakeClock implements Clock {
  private t: number;
  private seq = 0;
  private timers = new Map<number, Timer>();

  constructor(start = 1_700_000_000_000) {
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  /** Extra delay added to every timer set from now on, like a throttled background tab's. */
  lateBy = 0;

  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.timers.set(id, { at: this.t + Math.max(0, ms) + this.lateBy, seq: id, fn });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }

  /** The times of the pending timers, soonest first. */
  pending(): number[] {
    return [...this.timers.values()].map((t) => t.at).sort((a, b) => a - b);
  }

  /** Runs the timers due within `ms`, in order, each at its own time, letting promises settle after each. */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    await settle();
    for (;;) {
      let next: Timer | undefined;
      for (const tm of this.timers.values()) {
        if (tm.at <= end && (!next || tm.at < next.at || (tm.at === next.at && tm.seq < next.seq))) next = tm;
      }
      if (!next) break;
      this.timers.delete(next.seq);
      this.t = next.at;
      next.fn();
      await settle();
    }
    this.t = end;
  }

  /** Advances to the next timer, wherever it is, and runs it. */
  async next(): Promise<void> {
    const p = this.pending();
    if (p.length === 0) throw new Error('no timer pending');
    await this.advance(p[0]! - this.t);
  }
}

/** A WebSocket the test drives: `open`, `receive` and `serverClose` play the server. */
export class FakeSocket implements SocketLike {
  readyState = 0;
  readonly sent: string[] = [];
  closedWith: { code: number | undefined; reason: string | undefined } | null = null;
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: { code: number; reason: string }) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;

  constructor(readonly url: string) {}

  send(data: string): void {
    if (this.readyState !== 1) throw new Error('send on a socket that is not open');
    this.sent.push(data);
  }

  close(code?: number, reason?: string): void {
    this.closedWith = { code, reason };
    this.readyState = 3;
  }

  /** The messages the client sent, parsed. */
  sentMessages(): Array<Record<string, unknown>> {
    return this.sent.map((s) => JSON.parse(s) as Record<string, unknown>);
  }

  /** The ticket in the socket's URL. */
  ticket(): string | null {
    return new URL(this.url).searchParams.get('ticket');
  }

  open(): void {
    this.readyState = 1;
    this.onopen?.({});
  }

  receive(msg: unknown): void {
    this.onmessage?.({ data: typeof msg === 'string' ? msg : JSON.stringify(msg) });
  }

  serverClose(code: number, reason = ''): void {
    this.readyState = 3;
    this.onclose?.({ code, reason });
  }
}

export type MemberSpec = [userId: string, status?: 'online' | 'reconnecting', joinSeq?: number];

export interface StateSpec {
  host?: string | null;
  term?: number;
  members?: MemberSpec[];
  reason?: string;
  subject?: string | null;
  previousHost?: string | null;
  locked?: boolean;
  overrides?: Record<string, unknown>;
  serverTime?: string;
  reconnectBy?: string;
}

/** A lobby.state message as the server writes it. */
export function state(version: number, spec: StateSpec = {}): Record<string, unknown> {
  const members = (spec.members ?? [['alice']]).map(([userId, status = 'online', joinSeq], i) => ({
    userId,
    joinSeq: joinSeq ?? i + 1,
    status,
    host: userId === (spec.host === undefined ? 'alice' : spec.host),
    ...(status === 'reconnecting'
      ? { reconnectBy: spec.reconnectBy ?? '2030-01-02T03:04:19Z', reconnect_deadline: spec.reconnectBy ?? '2030-01-02T03:04:19Z' }
      : {}),
  }));
  const host = spec.host === undefined ? 'alice' : spec.host;
  return {
    type: 'lobby.state',
    version,
    hostId: host,
    playerIds: members.map((m) => m.userId),
    roomId: 'room-1',
    term: spec.term ?? 1,
    locked: spec.locked ?? false,
    overrides: spec.overrides ?? {},
    members,
    reason: spec.reason ?? 'joined',
    subjectId: spec.subject === undefined ? 'alice' : spec.subject,
    previousHostId: spec.previousHost === undefined ? host : spec.previousHost,
    at: '2030-01-02T03:04:13Z',
    serverTime: spec.serverTime ?? '2030-01-02T03:04:13Z',
  };
}

export function welcome(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    type: 'welcome',
    roomId: 'room-1',
    userId: 'alice',
    connection: 1,
    heartbeatMs: 4500,
    graceMs: 8000,
    maxMessageBytes: 16384,
    maxChatBytes: 2000,
    ...over,
  };
}

export type Recorded = { [K in keyof LobbyEvents]: [K, ...Parameters<LobbyEvents[K]>] }[keyof LobbyEvents];

const EVENTS: Array<keyof LobbyEvents> = [
  'connection',
  'sync',
  'join',
  'leave',
  'memberChange',
  'hostChange',
  'welcome',
  'revisionDropped',
  'gap',
  'chatHistory',
  'chat',
  'read',
  'typing',
  'typingState',
  'serverError',
];

export interface Harness {
  client: LobbyClient;
  clock: FakeClock;
  sockets: FakeSocket[];
  tickets: string[];
  ticketCalls: number[];
  events: Recorded[];
  /** The newest socket. */
  socket(): FakeSocket;
  /** The recorded events of one kind, without the name. */
  of<K extends keyof LobbyEvents>(name: K): Array<Parameters<LobbyEvents[K]>>;
  /** Every connection state recorded. */
  states(): ConnectionState[];
  /** Opens the newest socket and plays the server's attach: state(s), then welcome. */
  attach(states: Array<Record<string, unknown>>, w?: Record<string, unknown>): void;
}

export interface HarnessOptions extends Partial<LobbyClientOptions> {
  /** Values `random` returns in turn, cycling; default 0.5. */
  randoms?: number[];
  /** Makes getTicket fail with this on the calls whose number (from 1) it lists. */
  failTickets?: { calls: number[]; error?: unknown };
}

export function harness(opts: HarnessOptions = {}): Harness {
  const clock = new FakeClock();
  const sockets: FakeSocket[] = [];
  const tickets: string[] = [];
  const ticketCalls: number[] = [];
  const events: Recorded[] = [];
  let calls = 0;
  const randoms = opts.randoms ?? [0.5];
  let r = 0;
  class Socket extends FakeSocket {
    constructor(url: string) {
      super(url);
      sockets.push(this);
    }
  }
  const client = new LobbyClient({
    roomId: 'room-1',
    url: 'ws://lobby.test/rooms/room-1/socket',
    getTicket: async () => {
      calls++;
      ticketCalls.push(clock.now());
      if (opts.failTickets?.calls.includes(calls)) throw opts.failTickets.error ?? new Error('backend down');
      const t = `ticket-${calls}`;
      tickets.push(t);
      return { ticket: t, roomId: 'room-1', userId: 'alice' };
    },
    clock,
    random: () => randoms[r++ % randoms.length]!,
    WebSocket: Socket,
    onListenerError: (err) => {
      throw err;
    },
    ...opts,
  });
  for (const name of EVENTS) {
    client.on(name, ((...args: unknown[]) => events.push([name, ...args] as unknown as Recorded)) as LobbyEvents[typeof name]);
  }
  const h: Harness = {
    client,
    clock,
    sockets,
    tickets,
    ticketCalls,
    events,
    socket: () => {
      const s = sockets[sockets.length - 1];
      if (!s) throw new Error('no socket yet');
      return s;
    },
    of: (name) => events.filter((e) => e[0] === name).map((e) => e.slice(1)) as never,
    states: () => events.filter((e) => e[0] === 'connection').map((e) => e[1] as ConnectionState),
    attach: (states, w) => {
      const s = h.socket();
      s.open();
      for (const st of states) s.receive(st);
      s.receive(w ?? welcome());
    },
  };
  return h;
}

/** Connects and attaches a first socket with `states` (default: revision 1, alice hosting alone). */
export async function connected(opts: HarnessOptions = {}, states = [state(1)]): Promise<Harness> {
  const h = harness(opts);
  h.client.connect();
  await settle();
  h.attach(states);
  return h;
}
