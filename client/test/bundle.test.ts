// The committed bundle is what users load: it must export what the sources
// export and behave the same. (CI also checks it is byte-identical to a
// fresh build.)

import { describe, expect, it } from 'vitest';
import * as src from '../src/index.js';
// Typed by dist/lobbyhost-client.d.ts: this also checks that the
// declarations shipped with the bundle describe it.
import * as bundle from '../dist/lobbyhost-client.js';
import { FakeClock, FakeSocket, settle, state, welcome } from './helpers.js';

describe('dist/lobbyhost-client.js', () => {
  it('exports the same names as the sources', () => {
    expect(Object.keys(bundle).sort()).toEqual(Object.keys(src).sort());
  });

  it('joins, keeps the revision rule and stops on a kick', async () => {
    const clock = new FakeClock();
    const sockets: FakeSocket[] = [];
    class Socket extends FakeSocket {
      constructor(url: string) {
        super(url);
        sockets.push(this);
      }
    }
    const B = bundle;
    const client = new B.LobbyClient({ roomId: 'room-1', url: 'ws://x/s', getTicket: async () => 't1', clock, WebSocket: Socket });
    const revisions: number[] = [];
    client.on('sync', (v) => revisions.push(v.revision));
    client.connect();
    await settle();
    sockets[0]!.open();
    sockets[0]!.receive(state(2));
    sockets[0]!.receive(welcome());
    sockets[0]!.receive(state(1));
    sockets[0]!.receive(state(3));
    expect(revisions).toEqual([2, 3]);
    expect(client.isHost()).toBe(true);
    sockets[0]!.serverClose(B.CloseCode.Kicked);
    expect(client.connection).toMatchObject({ status: 'closed', reason: 'kicked' });
    expect(client.isHost()).toBe(false);
    expect(new B.NotConnectedError()).toBeInstanceOf(B.LobbyClientError);
  });
});
