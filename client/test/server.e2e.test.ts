// The client against the real example server: the Go binary named by
// LOBBYHOST_WSSERVER_BIN, started here on a free loopback port. Without it
// these tests are skipped, except under CI=true, where that is a failure
// (.ci/client-check builds the binary and sets the variable).
//
// Only outcomes and their order are asserted; `until` waits for a
// condition, never for a length of time.

import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LobbyClient, type ConnectionState, type LobbyEvents, type SocketConstructor, type SocketLike } from '../src/index.js';

const BIN = process.env.LOBBYHOST_WSSERVER_BIN ?? '';
const CI = process.env.CI === 'true';

if (!BIN && CI) {
  throw new Error('LOBBYHOST_WSSERVER_BIN is not set: under CI the client must be tested against the real server');
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => resolve(typeof addr === 'object' && addr ? addr.port : 0));
    });
  });
}

async function until(what: string, cond: () => boolean | Promise<boolean>, limitMs = 10_000): Promise<void> {
  const start = Date.now();
  while (!(await cond())) {
    if (Date.now() - start > limitMs) throw new Error(`gave up waiting for ${what}\n${serverLog}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

let port = 0;
let server: ChildProcess | null = null;
let serverLog = '';

async function healthy(): Promise<boolean> {
  try {
    return (await fetch(`http://127.0.0.1:${port}/healthz`)).ok;
  } catch {
    return false;
  }
}

async function startServer(): Promise<void> {
  const proc = spawn(BIN, ['-addr', `127.0.0.1:${port}`, '-grace', '30s', '-max-tabs', '1', '-log-level', 'warn'], { stdio: ['ignore', 'pipe', 'pipe'] });
  proc.stdout!.on('data', (d) => (serverLog += String(d)));
  proc.stderr!.on('data', (d) => (serverLog += String(d)));
  server = proc;
  await until('the server to answer /healthz', healthy, 15_000);
}

async function stopServer(): Promise<void> {
  const proc = server;
  if (!proc) return;
  const exited = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGTERM');
  await exited;
  server = null;
}

interface Player {
  client: LobbyClient;
  /** Every raw socket this player's client opened, newest last. */
  sockets: SocketLike[];
  log: string[];
  states: ConnectionState[];
}

/**
 * A player whose client asks the server for tickets. `gate`, when set, is
 * awaited before each ticket request: the test holds a reconnect back
 * until it has seen what it wants to see first.
 */
function player(user: string, room: string, gate?: () => Promise<void>): Player {
  const sockets: SocketLike[] = [];
  const Native = (globalThis as { WebSocket?: SocketConstructor }).WebSocket!;
  // The injectable constructor lets the test cut a socket the way a
  // network would, behind the client's back.
  class Tracked extends (Native as unknown as new (url: string) => SocketLike) {
    constructor(url: string) {
      super(url);
      sockets.push(this);
    }
  }
  const client = new LobbyClient({
    roomId: room,
    url: `ws://127.0.0.1:${port}/rooms/${encodeURIComponent(room)}/socket`,
    WebSocket: Tracked as unknown as SocketConstructor,
    getTicket: async (roomId) => {
      if (gate) await gate();
      const r = await fetch(`http://127.0.0.1:${port}/rooms/${encodeURIComponent(roomId)}/socket-ticket`, {
        method: 'POST',
        headers: { 'x-authenticated-user': user },
      });
      if (!r.ok) throw new Error(`ticket ${r.status}`);
      return (await r.json()) as { ticket: string };
    },
    onListenerError: (e) => {
      throw e;
    },
  });
  const p: Player = { client, sockets, log: [], states: [] };
  const on = <K extends keyof LobbyEvents>(k: K, f: LobbyEvents[K]) => client.on(k, f);
  on('connection', (s) => {
    p.states.push(s);
    p.log.push(`connection ${s.status}${s.status === 'closed' ? ' ' + s.reason : ''}`);
  });
  on('join', (m) => p.log.push(`join ${m.userId}`));
  on('leave', (m, why) => p.log.push(`leave ${m.userId} ${why}`));
  on('memberChange', (m, prev) => p.log.push(`change ${m.userId} ${prev.status}->${m.status}`));
  on('hostChange', (h) => p.log.push(`host ${h.previousHostId ?? '-'}->${h.hostId ?? '-'} term ${h.term}`));
  on('serverError', (e) => p.log.push(`error ${e.code}`));
  return p;
}

const status = (p: Player) => p.client.connection.status;
const opened = (p: Player) => () => status(p) === 'open';

describe.skipIf(!BIN)('against the example server', () => {
  beforeAll(async () => {
    port = await freePort();
    await startServer();
  }, 30_000);

  afterAll(async () => {
    await stopServer();
  });

  it('hosts the first player in; a drop inside the grace is no leave, and the host keeps the role', async () => {
    // Alice's reconnect waits until bob has seen her drop, so the order of
    // the server's commits is fixed: drop, then return.
    let hold: Promise<void> = Promise.resolve();
    const alice = player('alice', 'e2e-grace', () => hold);
    const bob = player('bob', 'e2e-grace');
    alice.client.connect();
    await until('alice open', opened(alice));
    bob.client.connect();
    await until('bob open', opened(bob));
    await until('alice sees bob', () => alice.client.view?.members.length === 2);
    expect(alice.client.isHost()).toBe(true);
    expect(bob.client.isHost()).toBe(false);
    expect(bob.client.view?.hostId).toBe('alice');

    // Cut alice's socket; her client reconnects by itself with a new ticket.
    let release = () => {};
    hold = new Promise((r) => (release = r));
    alice.sockets.at(-1)!.close(1000, 'network gone');
    await until('alice reconnecting', () => status(alice) === 'reconnecting');
    expect(alice.client.isHost()).toBe(false);
    expect(alice.client.view?.live).toBe(false);
    await until('bob sees alice reconnecting', () => bob.client.view?.members.find((m) => m.userId === 'alice')?.status === 'reconnecting');
    expect(bob.client.view?.hostId).toBe('alice');
    release();
    await until('alice open again', opened(alice));
    await until('bob sees alice online', () => bob.client.view?.members.find((m) => m.userId === 'alice')?.status === 'online');
    expect(alice.client.isHost()).toBe(true);
    expect(alice.sockets.length).toBe(2);
    expect(bob.log.filter((l) => l.startsWith('leave') || l.startsWith('host'))).toEqual(['host -->alice term 1']);
    expect(bob.log).toContain('change alice reconnecting->online');
    expect(alice.log.filter((l) => l.startsWith('leave'))).toEqual([]);

    alice.client.leave();
    await until('alice left', () => status(alice) === 'closed');
    expect(alice.client.connection).toMatchObject({ reason: 'left' });
    await until('bob hosts', () => bob.client.isHost());
    expect(bob.log).toContain('leave alice left');
    bob.client.disconnect();
  });

  it('refuses a non-host\'s host action; a kick stops the target, whose return is refused', async () => {
    const alice = player('alice', 'e2e-kick');
    const bob = player('bob', 'e2e-kick');
    alice.client.connect();
    await until('alice open', opened(alice));
    bob.client.connect();
    await until('bob open', opened(bob));
    await until('alice sees bob', () => alice.client.view?.members.length === 2);

    bob.client.lock(true);
    await until('bob refused', () => bob.log.includes('error not_host'));
    expect(alice.client.view?.locked).toBe(false);

    alice.client.kick('bob', 60_000);
    await until('bob closed', () => status(bob) === 'closed');
    expect(bob.client.connection).toMatchObject({ reason: 'kicked', code: 4010 });
    await until('alice sees bob go', () => alice.log.includes('leave bob kicked'));

    bob.client.connect();
    await until('bob refused again', () => status(bob) === 'closed');
    expect(bob.client.connection).toMatchObject({ reason: 'blocked', code: 4012 });
    expect(bob.log).toContain('error blocked');

    alice.client.lock(true);
    await until('locked', () => alice.client.view?.locked === true);
    const carol = player('carol', 'e2e-kick');
    carol.client.connect();
    await until('carol refused', () => status(carol) === 'closed');
    expect(carol.client.connection).toMatchObject({ reason: 'lobby_locked', code: 4011 });
    alice.client.disconnect();
  });

  it('stops a tab superseded by a newer one', async () => {
    const tab1 = player('dave', 'e2e-tabs');
    const tab2 = player('dave', 'e2e-tabs');
    tab1.client.connect();
    await until('tab 1 open', opened(tab1));
    tab2.client.connect();
    await until('tab 1 closed', () => status(tab1) === 'closed');
    expect(tab1.client.connection).toMatchObject({ reason: 'superseded', code: 4002 });
    await until('tab 2 open', opened(tab2));
    expect(tab1.sockets.length).toBe(1);
    tab2.client.disconnect();
  });

  it('goes straight back after the server goes away (1001), into a new process within the grace', async () => {
    const erin = player('erin', 'e2e-drain');
    erin.client.connect();
    await until('erin open', opened(erin));
    await stopServer();
    await until('erin reconnecting', () => status(erin) === 'reconnecting');
    const first = erin.states.find((s) => s.status === 'reconnecting');
    expect(first).toMatchObject({ attempt: 1, delayMs: 0, lastClose: { code: 1001 } });
    await startServer();
    await until('erin open again', opened(erin));
    expect(erin.client.connection.status).toBe('open');
    erin.client.disconnect();
  }, 30_000);
});
