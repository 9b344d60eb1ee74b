import { describe, expect, it } from 'vitest';
import { CloseCode, ProtocolError, closeAction, parseServerMessage } from '../src/index.js';
import { state, welcome } from './helpers.js';

describe('closeAction', () => {
  // Every close code the server documents, and what the client does.
  it.each([
    [1000, { kind: 'reconnect', immediate: false }],
    [1001, { kind: 'reconnect', immediate: true }],
    [1006, { kind: 'reconnect', immediate: false }],
    [1009, { kind: 'stop', reason: 'protocol_error' }],
    [1011, { kind: 'reconnect', immediate: false }],
    [1012, { kind: 'reconnect', immediate: true }],
    [1013, { kind: 'reconnect', immediate: false }],
    [4001, { kind: 'reconnect', immediate: false }],
    [4002, { kind: 'stop', reason: 'superseded' }],
    [4003, { kind: 'stop', reason: 'left' }],
    [4004, { kind: 'reconnect', immediate: false }],
    [4008, { kind: 'reconnect', immediate: false }],
    [4009, { kind: 'stop', reason: 'lobby_full' }],
    [4010, { kind: 'stop', reason: 'kicked' }],
    [4011, { kind: 'stop', reason: 'lobby_locked' }],
    [4012, { kind: 'stop', reason: 'blocked' }],
    [CloseCode.Drain, { kind: 'reconnect', immediate: true }],
    [4999, { kind: 'reconnect', immediate: false }],
  ])('code %i', (code, want) => {
    expect(closeAction(code)).toEqual(want);
  });
});

describe('parseServerMessage', () => {
  it('reads a full lobby.state', () => {
    const m = parseServerMessage(
      JSON.stringify(state(6, { host: 'bob', term: 2, members: [['bob'], ['carol', 'reconnecting']], reason: 'lease_expired', subject: 'alice', previousHost: 'alice', locked: true })),
    );
    expect(m.type).toBe('lobby.state');
    if (m.type !== 'lobby.state') return;
    expect(m.state.version).toBe(6);
    expect(m.state.hostId).toBe('bob');
    expect(m.state.term).toBe(2);
    expect(m.state.locked).toBe(true);
    expect(m.state.previousHostId).toBe('alice');
    expect(m.state.members.map((x) => [x.userId, x.status, x.host])).toEqual([
      ['bob', 'online', true],
      ['carol', 'reconnecting', false],
    ]);
    expect(m.state.members[1]!.reconnectBy).toBe(Date.parse('2030-01-02T03:04:19Z'));
    expect(m.state.members[0]!.reconnectBy).toBeNull();
    expect(m.state.serverTime).toBe(Date.parse('2030-01-02T03:04:13Z'));
  });

  it('reads the minimal form (type, version, hostId, playerIds)', () => {
    const m = parseServerMessage('{"type":"lobby.state","version":3,"hostId":null,"playerIds":["a","b"]}');
    if (m.type !== 'lobby.state') throw new Error(m.type);
    expect(m.state.hostId).toBeNull();
    expect(m.state.members.map((x) => x.userId)).toEqual(['a', 'b']);
    expect(m.state.reason).toBe('snapshot');
    expect(m.state.term).toBe(0);
  });

  it('ignores unknown types and fields, and keeps unknown reasons', () => {
    expect(parseServerMessage('{"type":"shiny.new","x":1}')).toEqual({ type: 'unknown' });
    const m = parseServerMessage(JSON.stringify({ ...state(1, { reason: 'teleported' }), extra: [1, 2] }));
    if (m.type !== 'lobby.state') throw new Error(m.type);
    expect(m.state.reason).toBe('teleported');
  });

  it('reads a welcome', () => {
    const m = parseServerMessage(JSON.stringify(welcome({ connection: 7 })));
    expect(m).toEqual({
      type: 'welcome',
      welcome: { roomId: 'room-1', userId: 'alice', connection: 7, heartbeatMs: 4500, graceMs: 8000, maxMessageBytes: 16384, maxChatBytes: 2000 },
    });
  });

  it.each([
    ['not JSON', 'nope'],
    ['not an object', '[1,2]'],
    ['no type', '{"version":1}'],
    ['a version that is not a count', '{"type":"lobby.state","version":"7","hostId":null,"playerIds":[]}'],
    ['a negative version', '{"type":"lobby.state","version":-1,"hostId":null,"playerIds":[]}'],
    ['a fractional version', '{"type":"lobby.state","version":1.5,"hostId":null,"playerIds":[]}'],
    ['members that are not a list', '{"type":"lobby.state","version":1,"hostId":null,"members":{}}'],
    ['a member without an ID', '{"type":"lobby.state","version":1,"hostId":null,"members":[{"joinSeq":1}]}'],
    ['a host that is not a string', '{"type":"lobby.state","version":1,"hostId":5,"playerIds":[]}'],
    ['a welcome without grace', '{"type":"welcome","roomId":"r","userId":"u","connection":1}'],
    ['typing without a flag', '{"type":"typing","userId":"u","userIds":[]}'],
    ['an error without a code', '{"type":"error","message":"x"}'],
  ])('refuses %s with a ProtocolError', (_name, frame) => {
    expect(() => parseServerMessage(frame)).toThrow(ProtocolError);
    try {
      parseServerMessage(frame);
    } catch (err) {
      expect((err as ProtocolError).code).toBe('protocol_error');
    }
  });

  it('refuses binary frames', () => {
    expect(() => parseServerMessage(new ArrayBuffer(2))).toThrow(ProtocolError);
  });
});
