/**
 * The example server's wire protocol: message types, close codes, and
 * the parsing of server messages into checked values.
 *
 * @packageDocumentation
 */

import { ProtocolError } from './errors.js';

/**
 * WebSocket close codes: the standard ones the client acts on, the
 * server's own (4001–4012), and two the client defines.
 */
export const CloseCode = {
  /** Normal closure. */
  Normal: 1000,
  /** The server is shutting down: reconnect at once (another process, or this one restarted). */
  GoingAway: 1001,
  /** The peer violated the WebSocket protocol. */
  ProtocolError: 1002,
  /** The peer sent a data type it does not accept. */
  UnsupportedData: 1003,
  /** No close frame: the connection broke (also every refused upgrade, as browsers report it). */
  Abnormal: 1006,
  /** A frame that was not valid for its type (bad UTF-8). */
  InvalidPayload: 1007,
  /** A policy violation. */
  PolicyViolation: 1008,
  /** A frame over the server's hard limit: the client must send smaller ones. */
  MessageTooBig: 1009,
  /** The server could not join the lobby (a store failure): retry later. */
  InternalError: 1011,
  /** The service is restarting: like {@link CloseCode.GoingAway}. */
  ServiceRestart: 1012,
  /** Try again later: retried with backoff. */
  TryAgainLater: 1013,
  /**
   * Used by the client itself when it gives up on a socket that shows no
   * sign of life (no pong for a ping, or no welcome in time). Never sent by
   * the server.
   */
  ClientTimeout: 4000,
  /** The socket's connection ended (heartbeat deadline, or a late heartbeat): reconnect. */
  Rejoin: 4001,
  /** A newer tab of the same user took the place: do not reconnect. */
  Superseded: 4002,
  /** The user left the lobby. */
  Left: 4003,
  /** The server's ping went unanswered in time: reconnect. */
  PingTimeout: 4004,
  /** The socket did not read fast enough: reconnect; the new socket gets the current state. */
  SlowConsumer: 4008,
  /** The lobby is full. */
  LobbyFull: 4009,
  /** The host removed the user. */
  Kicked: 4010,
  /** The lobby is locked and refused a new player. */
  LobbyLocked: 4011,
  /** A kick's block is still in force. */
  Blocked: 4012,
  /**
   * A dedicated "drain" close: this process is being emptied, go to
   * another at once. The example server does not send it today (it closes
   * with {@link CloseCode.GoingAway} on shutdown); the client treats it
   * like 1001 so that a server may adopt it.
   */
  Drain: 4013,
} as const;

/** What the client does after a close, by code. */
export type CloseAction =
  | { kind: 'reconnect'; immediate: boolean }
  | { kind: 'stop'; reason: TerminalCloseReason };

/** Reasons a close ends the client for good (no reconnect). */
export type TerminalCloseReason =
  | 'superseded'
  | 'left'
  | 'lobby_full'
  | 'kicked'
  | 'lobby_locked'
  | 'blocked'
  | 'protocol_error';

/**
 * Classifies a close code: whether the client reconnects (and whether at
 * once) or stops, with which reason. Any code not named here (1000, 1005,
 * 1006, 1011, 1013, 4001, 4004, 4008, codes of proxies) is worth a
 * reconnect with backoff, within the grace.
 */
export function closeAction(code: number): CloseAction {
  switch (code) {
    case CloseCode.GoingAway:
    case CloseCode.ServiceRestart:
    case CloseCode.Drain:
      return { kind: 'reconnect', immediate: true };
    case CloseCode.Superseded:
      // Coming back would take the place from the newer tab, which would
      // then come back in turn.
      return { kind: 'stop', reason: 'superseded' };
    case CloseCode.Left:
      return { kind: 'stop', reason: 'left' };
    case CloseCode.LobbyFull:
      return { kind: 'stop', reason: 'lobby_full' };
    case CloseCode.Kicked:
      return { kind: 'stop', reason: 'kicked' };
    case CloseCode.LobbyLocked:
      return { kind: 'stop', reason: 'lobby_locked' };
    case CloseCode.Blocked:
      return { kind: 'stop', reason: 'blocked' };
    case CloseCode.ProtocolError:
    case CloseCode.UnsupportedData:
    case CloseCode.InvalidPayload:
    case CloseCode.PolicyViolation:
    case CloseCode.MessageTooBig:
      // The server refused what this client speaks: the same client would
      // be refused again.
      return { kind: 'stop', reason: 'protocol_error' };
    default:
      return { kind: 'reconnect', immediate: false };
  }
}

/** Lobby reasons: the cause of a committed change. */
export type LobbyReason =
  | 'joined'
  | 'reconnected'
  | 'disconnected'
  | 'timed_out'
  | 'lease_expired'
  | 'left'
  | 'kicked'
  | 'updated'
  | 'locked'
  | 'unlocked'
  | 'configured'
  | 'host_transferred';

/**
 * The reason of a state: a lobby reason, `snapshot` for a state read
 * without knowing the change behind it, or a reason newer than this
 * client (kept as the server spelled it).
 */
export type StateReason = LobbyReason | 'snapshot' | (string & {});

/** A member's presence: online, or dropped and inside its grace. */
export type MemberStatus = 'online' | 'reconnecting' | (string & {});

/** One member of the lobby, as the latest applied state lists it. */
export interface Member {
  /** The player's ID, as the server's authentication gave it. */
  readonly userId: string;
  /** Its join sequence: kept across reconnects, orders succession. */
  readonly joinSeq: number;
  /** `online`, or `reconnecting` (dropped, place kept until `reconnectBy`). */
  readonly status: MemberStatus;
  /** Whether it hosts the lobby in this state. */
  readonly host: boolean;
  /**
   * For a reconnecting member: its reconnect deadline, in milliseconds
   * since the epoch on the server's clock; `null` otherwise. Count down
   * with {@link LobbyClient.reconnectRemainingMs}, not with the local clock.
   */
  readonly reconnectBy: number | null;
  /** Its attributes (empty when it has none). */
  readonly attrs: Readonly<Record<string, string>>;
}

/** A checked `lobby.state` message. */
export interface StateMessage {
  readonly version: number;
  readonly roomId: string | null;
  readonly hostId: string | null;
  readonly term: number;
  readonly locked: boolean;
  readonly overrides: Readonly<Record<string, unknown>>;
  readonly members: readonly Member[];
  readonly reason: StateReason;
  readonly subjectId: string | null;
  readonly previousHostId: string | null;
  readonly at: number | null;
  readonly serverTime: number | null;
}

/** A checked `welcome` message. */
export interface WelcomeMessage {
  readonly roomId: string;
  readonly userId: string;
  /** This socket's connection generation. */
  readonly connection: number;
  /** How often to send an app heartbeat; 0 when heartbeat deadlines are off. */
  readonly heartbeatMs: number;
  /** How long the server keeps a dropped member's place (and host role). */
  readonly graceMs: number;
  readonly maxMessageBytes: number | null;
  readonly maxChatBytes: number | null;
}

/** A chat message, from `chat.history` or `chat.message`. */
export interface ChatMessage {
  readonly messageId: string;
  /** The sender, as its ticket said. */
  readonly userId: string;
  readonly text: string;
  /** When the server took it, in milliseconds since the epoch; `null` if unreadable. */
  readonly time: number | null;
  /** What the sender gave as its own ID for the message, if anything. */
  readonly clientMsgId: string | null;
  /** Who has read it (from `chat.history`; empty for a new message). */
  readonly readBy: readonly string[];
}

/** A read receipt (`message.read`), sent the first time a user reads a message. */
export interface ReadReceipt {
  readonly messageId: string;
  readonly userId: string;
  readonly time: number | null;
}

/** A typing change (`typing`). */
export interface TypingChange {
  readonly userId: string;
  readonly typing: boolean;
  /** Everybody typing after this change. */
  readonly userIds: readonly string[];
}

/** A parsed server message: a known type, checked, or `unknown` for a type this client does not know. */
export type ServerMessage =
  | { type: 'lobby.state'; state: StateMessage }
  | { type: 'welcome'; welcome: WelcomeMessage }
  | { type: 'chat.history'; messages: readonly ChatMessage[] }
  | { type: 'chat.message'; message: ChatMessage }
  | { type: 'message.read'; receipt: ReadReceipt }
  | { type: 'typing'; change: TypingChange }
  | { type: 'typing.state'; userIds: readonly string[] }
  | { type: 'pong' }
  | { type: 'error'; code: string; message: string; requestType: string | null }
  | { type: 'unknown' };

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function fail(type: string, field: string): never {
  throw new ProtocolError(`${type}: field "${field}" is missing or has the wrong type`);
}

// The readers below take the field's key; `type` names the message (and,
// for a member, the list it is in) for the error.

function str(o: Obj, type: string, field: string): string {
  const v = o[field];
  if (typeof v !== 'string') fail(type, field);
  return v;
}

function optStr(o: Obj, type: string, field: string): string | null {
  const v = o[field];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') fail(type, field);
  return v;
}

function count(o: Obj, type: string, field: string): number {
  const v = o[field];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) fail(type, field);
  return v;
}

function optCount(o: Obj, type: string, field: string): number | null {
  return o[field] === undefined || o[field] === null ? null : count(o, type, field);
}

function strings(o: Obj, type: string, field: string): string[] {
  const v = o[field];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) fail(type, field);
  return v as string[];
}

/** Parses an RFC 3339 time to milliseconds since the epoch; `null` if absent or unreadable. */
function time(v: unknown): number | null {
  if (typeof v !== 'string' || v === '') return null;
  const t = Date.parse(v);
  return Number.isNaN(t) ? null : t;
}

function parseMember(v: unknown, hostId: string | null): Member {
  if (!isObj(v)) fail('lobby.state', 'members');
  const t = 'lobby.state members[]';
  const userId = str(v, t, 'userId');
  const rawAttrs = v.attrs;
  const attrs: Record<string, string> = {};
  if (isObj(rawAttrs)) {
    for (const [k, a] of Object.entries(rawAttrs)) if (typeof a === 'string') attrs[k] = a;
  }
  const status = v.status === undefined ? 'online' : str(v, t, 'status');
  return Object.freeze({
    userId,
    joinSeq: v.joinSeq === undefined ? 0 : count(v, t, 'joinSeq'),
    status,
    host: typeof v.host === 'boolean' ? v.host : userId === hostId,
    // The lobby's own spelling first, the server's older one after.
    reconnectBy: status === 'reconnecting' ? time(v.reconnect_deadline) ?? time(v.reconnectBy) : null,
    attrs: Object.freeze(attrs),
  });
}

function parseState(o: Obj): StateMessage {
  const t = 'lobby.state';
  const version = count(o, t, 'version');
  const hostId = optStr(o, t, 'hostId');
  let members: Member[];
  if (Array.isArray(o.members)) {
    members = o.members.map((m) => parseMember(m, hostId));
  } else if (o.members === undefined) {
    // The minimal form of the protocol names the players only.
    members = strings(o, t, 'playerIds').map((userId) =>
      Object.freeze({ userId, joinSeq: 0, status: 'online', host: userId === hostId, reconnectBy: null, attrs: Object.freeze({}) }),
    );
  } else {
    fail(t, 'members');
  }
  if (o.locked !== undefined && typeof o.locked !== 'boolean') fail(t, 'locked');
  return Object.freeze({
    version,
    roomId: optStr(o, t, 'roomId'),
    hostId,
    term: o.term === undefined ? 0 : count(o, t, 'term'),
    locked: o.locked === true,
    overrides: Object.freeze(isObj(o.overrides) ? { ...o.overrides } : {}),
    members: Object.freeze(members),
    reason: typeof o.reason === 'string' ? o.reason : 'snapshot',
    subjectId: optStr(o, t, 'subjectId'),
    previousHostId: optStr(o, t, 'previousHostId'),
    at: time(o.at),
    serverTime: time(o.serverTime),
  });
}

function parseChat(v: unknown, t: string): ChatMessage {
  if (!isObj(v)) fail(t, 'messages');
  return Object.freeze({
    messageId: str(v, t, 'messageId'),
    userId: str(v, t, 'userId'),
    text: str(v, t, 'text'),
    time: time(v.time),
    clientMsgId: optStr(v, t, 'clientMsgId'),
    readBy: Object.freeze(strings(v, t, 'readBy')),
  });
}

/**
 * Parses one text frame from the server. It throws a {@link ProtocolError}
 * for a frame that is not a JSON object with a string `type`, or for a
 * known type with malformed fields; it returns `{type: 'unknown'}` for a
 * type it does not know.
 */
export function parseServerMessage(data: unknown): ServerMessage {
  if (typeof data !== 'string') throw new ProtocolError('the server sent a binary frame');
  let o: unknown;
  try {
    o = JSON.parse(data);
  } catch {
    throw new ProtocolError('the server sent a frame that is not JSON');
  }
  if (!isObj(o)) throw new ProtocolError('the server sent a frame that is not a JSON object');
  if (typeof o.type !== 'string') throw new ProtocolError('the server sent a message without a type');
  switch (o.type) {
    case 'lobby.state':
      return { type: 'lobby.state', state: parseState(o) };
    case 'welcome': {
      const t = 'welcome';
      return {
        type: 'welcome',
        welcome: Object.freeze({
          roomId: str(o, t, 'roomId'),
          userId: str(o, t, 'userId'),
          connection: count(o, t, 'connection'),
          heartbeatMs: o.heartbeatMs === undefined ? 0 : count(o, t, 'heartbeatMs'),
          graceMs: count(o, t, 'graceMs'),
          maxMessageBytes: optCount(o, t, 'maxMessageBytes'),
          maxChatBytes: optCount(o, t, 'maxChatBytes'),
        }),
      };
    }
    case 'chat.history': {
      if (!Array.isArray(o.messages)) fail('chat.history', 'messages');
      return { type: 'chat.history', messages: Object.freeze(o.messages.map((m) => parseChat(m, 'chat.history'))) };
    }
    case 'chat.message':
      return { type: 'chat.message', message: parseChat(o, 'chat.message') };
    case 'message.read':
      return {
        type: 'message.read',
        receipt: Object.freeze({ messageId: str(o, o.type, 'messageId'), userId: str(o, o.type, 'userId'), time: time(o.time) }),
      };
    case 'typing': {
      if (typeof o.typing !== 'boolean') fail('typing', 'typing');
      return {
        type: 'typing',
        change: Object.freeze({ userId: str(o, 'typing', 'userId'), typing: o.typing, userIds: Object.freeze(strings(o, 'typing', 'userIds')) }),
      };
    }
    case 'typing.state':
      return { type: 'typing.state', userIds: Object.freeze(strings(o, 'typing.state', 'userIds')) };
    case 'pong':
      return { type: 'pong' };
    case 'error':
      return {
        type: 'error',
        code: str(o, 'error', 'code'),
        message: typeof o.message === 'string' ? o.message : '',
        requestType: optStr(o, 'error', 'requestType'),
      };
    default:
      return { type: 'unknown' };
  }
}

/** The grace a lobby's own overrides set (`grace_ms`), or `null` when it follows the server's policy. */
export function overrideGraceMs(overrides: Readonly<Record<string, unknown>>): number | null {
  const g = overrides.grace_ms;
  return typeof g === 'number' && Number.isFinite(g) && g >= 0 ? g : null;
}
