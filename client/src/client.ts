/**
 * The lobby client: one room, one player, one socket at a time.
 *
 * @packageDocumentation
 */

import { DEFAULT_BACKOFF_BASE_MS, DEFAULT_BACKOFF_CAP_MS, retryDelay, type BackoffOptions } from './backoff.js';
import {
  InvalidArgumentError,
  LobbyClientError,
  NotConnectedError,
  ProtocolError,
  ServerError,
  TicketError,
  TicketRefusedError,
} from './errors.js';
import {
  CloseCode,
  closeAction,
  overrideGraceMs,
  parseServerMessage,
  type ChatMessage,
  type Member,
  type ReadReceipt,
  type StateMessage,
  type StateReason,
  type TerminalCloseReason,
  type TypingChange,
  type WelcomeMessage,
} from './protocol.js';
import { RevisionTracker } from './revision.js';

/** The clock the client reads and sets timers on. Injected in tests. */
export interface Clock {
  /** Milliseconds since the epoch, like `Date.now`. */
  now(): number;
  /** Calls `fn` after `ms` milliseconds, like `setTimeout`; returns a handle for {@link Clock.clearTimeout}. */
  setTimeout(fn: () => void, ms: number): unknown;
  /** Cancels a timer; a handle already fired or cleared is ignored. */
  clearTimeout(handle: unknown): void;
}

/** The part of a browser `WebSocket` the client uses. */
export interface SocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
}

/** A constructor like the browser's `WebSocket`. */
export type SocketConstructor = new (url: string) => SocketLike;

/** What `getTicket` may return: the ticket, or the ticket endpoint's JSON answer. */
export type TicketResult = string | { readonly ticket: string };

/** Options of {@link LobbyClient}. Only `roomId` and `getTicket` are required. */
export interface LobbyClientOptions {
  /** The room to join. 1–128 bytes of UTF-8, compared byte for byte by the server. */
  readonly roomId: string;
  /**
   * Asks the application's own backend for a socket ticket for `roomId`
   * (with the example server: `POST /rooms/{roomId}/socket-ticket`). It is
   * called before every attempt, since a ticket is good for one upgrade
   * only. Throw a {@link TicketRefusedError} to stop the client for good;
   * any other failure is retried while the grace lasts.
   */
  readonly getTicket: (roomId: string) => Promise<TicketResult>;
  /**
   * Where to open the socket. A string is a WebSocket URL to which
   * `ticket=…` is added as a query parameter; a function builds the whole
   * URL. Default: `/rooms/{roomId}/socket` on the page's own host, `wss:`
   * under `https:`.
   */
  readonly url?: string | ((ticket: string, roomId: string) => string);
  /** The reconnect backoff. */
  readonly backoff?: BackoffOptions;
  /**
   * How long {@link LobbyClient.connect} keeps trying before its first
   * successful join, in milliseconds (there is no place to keep yet, so no
   * grace applies). Default 15000.
   */
  readonly connectTimeoutMs?: number;
  /**
   * How long one attempt may take, from asking for the ticket to the
   * server's welcome, in milliseconds. Default 10000.
   */
  readonly attemptTimeoutMs?: number;
  /** The clock. Default: `Date.now`, `setTimeout`, `clearTimeout`. */
  readonly clock?: Clock;
  /** Uniform random numbers in `[0, 1)`, for jitter. Default `Math.random`. */
  readonly random?: () => number;
  /** The WebSocket constructor. Default: the global `WebSocket`. */
  readonly WebSocket?: SocketConstructor;
  /**
   * Receives what a listener threw. Default: the global `reportError`
   * where there is one, else `console.error`. A throwing listener never
   * stops the others or the client.
   */
  readonly onListenerError?: (err: unknown) => void;
}

/** How the last socket or attempt ended. */
export interface CloseInfo {
  /** The close code, or `null` when no socket was opened (the ticket failed). */
  readonly code: number | null;
  /** The close reason the server gave, or the client's own words. */
  readonly reason: string;
  /** The error behind it, if any. */
  readonly error: LobbyClientError | null;
}

/** Why the client stopped. */
export type ClosedReason =
  | TerminalCloseReason
  /** The application called {@link LobbyClient.disconnect}. */
  | 'client'
  /** The grace ended before a reconnect succeeded: the server has given the place up. */
  | 'grace_ended'
  /** The first connect did not succeed within `connectTimeoutMs`. */
  | 'connect_failed'
  /** `getTicket` threw a {@link TicketRefusedError}. */
  | 'ticket_refused'
  /** The socket URL was refused by the WebSocket constructor. */
  | 'invalid_url';

/** The client's own connection, as a tagged union on `status`. */
export type ConnectionState =
  /** Created, {@link LobbyClient.connect} not called yet. */
  | { readonly status: 'idle' }
  /**
   * Trying to join for the first time since `connect()`. `attempt` counts
   * the retries (0 for the first try); `retryAt` is when the current try
   * starts (or started); it gives up at `deadline`.
   */
  | {
      readonly status: 'connecting';
      readonly attempt: number;
      readonly delayMs: number;
      readonly retryAt: number;
      readonly deadline: number;
      readonly lastClose: CloseInfo | null;
    }
  /** Joined: the socket is open and the server welcomed it. The view is live. */
  | {
      readonly status: 'open';
      readonly userId: string;
      /** This socket's connection generation. */
      readonly connection: number;
      readonly heartbeatMs: number;
      readonly graceMs: number;
    }
  /**
   * The socket dropped at `droppedAt`; retry number `attempt` (from 1)
   * starts at `retryAt`. The server keeps this player's place (and host
   * role) until `graceDeadline`, after which the client stops.
   */
  | {
      readonly status: 'reconnecting';
      readonly attempt: number;
      readonly delayMs: number;
      readonly retryAt: number;
      readonly droppedAt: number;
      readonly graceDeadline: number;
      readonly lastClose: CloseInfo;
    }
  /** Stopped for good, with the reason. {@link LobbyClient.connect} starts again. */
  | { readonly status: 'closed'; readonly reason: ClosedReason; readonly code: number | null; readonly error: LobbyClientError | null };

/** The connection states' tags. */
export type ConnectionStatus = ConnectionState['status'];

/** The lobby as the client last applied it. */
export interface LobbyView {
  readonly roomId: string;
  /** The revision of the state shown: never goes back. */
  readonly revision: number;
  /** The host term: one more with every change of host. Stamp host-only requests to other services with it. */
  readonly term: number;
  /** The host in this state, or `null`. While the view is not live this is the last known host, not a claim. */
  readonly hostId: string | null;
  /** The lobby refuses new players. */
  readonly locked: boolean;
  /** The lobby's own settings over the server's policy (`grace_ms`, ...); empty when none. */
  readonly overrides: Readonly<Record<string, unknown>>;
  /** Every member in join order, reconnecting ones included. */
  readonly members: readonly Member[];
  /** The cause of the last change applied (`snapshot` when unknown). */
  readonly reason: StateReason;
  readonly subjectId: string | null;
  /** The host before the last change, as the server said. */
  readonly previousHostId: string | null;
  /** When the last change happened (server clock, ms since the epoch), if given. */
  readonly at: number | null;
  /** The server's clock when it made the state, if given. */
  readonly serverTime: number | null;
  /** The client's clock when the state arrived. */
  readonly receivedAt: number;
  /**
   * Whether the view is current: only while the client's own socket is
   * open. Otherwise the server may have moved on without telling it.
   */
  readonly live: boolean;
}

/** Why a member left the view. */
export type LeaveReason =
  /** The cause of the change that removed it (`left`, `kicked`, `lease_expired`, ...). */
  | StateReason
  /** It was removed in a revision this client never received (a gap). */
  | 'unknown';

/** A change of host. */
export interface HostChange {
  readonly hostId: string | null;
  /** The host of the view before this change (what this client had shown). */
  readonly previousHostId: string | null;
  /** The term of the new host. */
  readonly term: number;
  /** The term before this change, or `null` for the first state. */
  readonly previousTerm: number | null;
  readonly reason: StateReason;
}

/** Context of a `sync` callback. */
export interface SyncInfo {
  /**
   * `change`: a newer state was applied. `open`: the socket (re)joined and
   * the view is live again; this happens on every join, even when the
   * server had nothing newer to say.
   */
  readonly cause: 'change' | 'open';
  /** Revisions were skipped before the state now shown (it was applied as a full resync). */
  readonly gap: boolean;
}

/** A revision dropped by the revision rule. */
export interface DroppedRevision {
  readonly revision: number;
  readonly highest: number;
  readonly verdict: 'duplicate' | 'stale';
}

/** A detected gap: revisions after `from` and before `to` never arrived. */
export interface RevisionGap {
  readonly from: number;
  readonly to: number;
}

/** The client's callbacks, by event name. Register with {@link LobbyClient.on}. */
export interface LobbyEvents {
  /** The client's own connection changed. */
  connection: (state: ConnectionState) => void;
  /** The view changed, or became live again after a (re)join. */
  sync: (view: LobbyView, info: SyncInfo) => void;
  /** A member entered the view (on the first state, every member does). */
  join: (member: Member, view: LobbyView) => void;
  /** A member was removed from the lobby. A member that drops and comes back within its grace never leaves. */
  leave: (member: Member, reason: LeaveReason, view: LobbyView) => void;
  /** A member's status (online ↔ reconnecting), host flag, deadline or attributes changed. */
  memberChange: (member: Member, previous: Member, view: LobbyView) => void;
  /** The host or its term changed. */
  hostChange: (change: HostChange, view: LobbyView) => void;
  /** The server welcomed a socket (its generation, heartbeat and grace). */
  welcome: (welcome: WelcomeMessage) => void;
  /** A state not newer than the view was dropped. */
  revisionDropped: (info: DroppedRevision) => void;
  /** Revisions were skipped; the next state is applied as a full resync. */
  gap: (info: RevisionGap) => void;
  /** The room's recent chat, on every join. */
  chatHistory: (messages: readonly ChatMessage[]) => void;
  /** A chat message (this user's own included). */
  chat: (message: ChatMessage) => void;
  /** A read receipt. */
  read: (receipt: ReadReceipt) => void;
  /** Someone started or stopped typing. */
  typing: (change: TypingChange) => void;
  /** Who is typing now: on join, after each change, and `[]` when the socket drops. */
  typingState: (userIds: readonly string[]) => void;
  /** The server refused a message (or, on attach, the join). */
  serverError: (error: ServerError) => void;
}

const OPEN = 1;
const DEFAULT_CONNECT_TIMEOUT_MS = 15000;
const DEFAULT_ATTEMPT_TIMEOUT_MS = 10000;
/** Heartbeat intervals without any frame from the server, pings sent, after which the socket is taken for dead. */
const SILENT_INTERVALS = 2;

type Base = Omit<LobbyView, 'live'>;
type Listeners = { [K in keyof LobbyEvents]?: Array<LobbyEvents[K]> };

const defaultClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

function defaultListenerError(err: unknown): void {
  const report = (globalThis as { reportError?: (e: unknown) => void }).reportError;
  if (typeof report === 'function') report(err);
  else console.error(err);
}

function positive(name: string, v: number | undefined, def: number): number {
  if (v === undefined) return def;
  if (typeof v !== 'number' || !(v >= 0) || !Number.isFinite(v)) throw new InvalidArgumentError(`${name} must be a finite number ≥ 0`);
  return v;
}

function sameAttrs(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => a[k] === b[k]);
}

/**
 * A client of the example server's lobby protocol, for one room.
 *
 * It keeps the rules every game would otherwise write again:
 *
 * - a fresh ticket from `getTicket` for every attempt;
 * - the revision rule: the view only moves forward; a duplicate or older
 *   state is dropped, a skipped revision is reported and the next state is
 *   applied in full;
 * - heartbeats at the interval the server announces, and a socket that
 *   stays silent is taken for dead;
 * - reconnects after a drop with exponential backoff and full jitter, a
 *   fresh ticket each time, for as long as the server keeps the place (the
 *   grace, counted from the drop); at once after a "going away" close;
 *   never after a kick, a supersede, a refused join or a protocol error;
 * - an honest view: while the socket is not open the view says it is not
 *   live and {@link LobbyClient.isHost} is false, whatever the last state
 *   said.
 *
 * It holds no global state: every client is independent.
 */
export class LobbyClient {
  private readonly roomId: string;
  private readonly getTicket: (roomId: string) => Promise<TicketResult>;
  private readonly urlFor: (ticket: string, roomId: string) => string;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly Socket: SocketConstructor | undefined;
  private readonly onListenerError: (err: unknown) => void;
  private readonly baseMs: number;
  private readonly capMs: number;
  private readonly connectTimeoutMs: number;
  private readonly attemptTimeoutMs: number;

  private readonly listeners: Listeners = {};
  private readonly tracker = new RevisionTracker();
  private state: ConnectionState = { status: 'idle' };
  private base: Base | null = null;
  private cachedView: LobbyView | null = null;
  private self: string | null = null;
  private graceMs: number | null = null;
  private typingNow: readonly string[] = [];
  /** The typing flag last sent on this socket. */
  private lastTyping: boolean | null = null;

  // The current attempt or socket. `token` changes whenever the client
  // gives one up, so late callbacks of an old one are ignored.
  private token = 0;
  private ws: SocketLike | null = null;
  private welcomed = false;
  private held: StateMessage[] = [];
  private leaving = false;
  private attemptTimer: unknown = null;
  private retryTimer: unknown = null;
  private beatTimer: unknown = null;
  private inbound = 0;
  private inboundAtBeat = 0;
  private silentBeats = 0;

  // Reconnect bookkeeping.
  private attempt = 0;
  private everOpen = false;
  private droppedAt = 0;
  private deadline = 0;
  /** The retry scheduled is the last that fits before the deadline. */
  private lastTry = false;

  /** Creates a client; it does nothing until {@link LobbyClient.connect}. */
  constructor(options: LobbyClientOptions) {
    if (typeof options !== 'object' || options === null) throw new InvalidArgumentError('options are required');
    if (typeof options.roomId !== 'string' || options.roomId === '') throw new InvalidArgumentError('roomId must be a non-empty string');
    if (typeof options.getTicket !== 'function') throw new InvalidArgumentError('getTicket must be a function');
    this.roomId = options.roomId;
    this.getTicket = options.getTicket;
    const url = options.url;
    if (typeof url === 'function') {
      this.urlFor = url;
    } else if (typeof url === 'string') {
      this.urlFor = (ticket) => `${url}${url.includes('?') ? '&' : '?'}ticket=${encodeURIComponent(ticket)}`;
    } else if (url === undefined) {
      this.urlFor = (ticket, room) => {
        const loc = (globalThis as { location?: { protocol: string; host: string } }).location;
        if (!loc) throw new InvalidArgumentError('no url option and no page location to derive one from');
        const proto = loc.protocol === 'https:' ? 'wss:' : 'ws:';
        return `${proto}//${loc.host}/rooms/${encodeURIComponent(room)}/socket?ticket=${encodeURIComponent(ticket)}`;
      };
    } else {
      throw new InvalidArgumentError('url must be a string or a function');
    }
    this.clock = options.clock ?? defaultClock;
    this.random = options.random ?? Math.random;
    this.Socket = options.WebSocket ?? (globalThis as { WebSocket?: SocketConstructor }).WebSocket;
    this.onListenerError = options.onListenerError ?? defaultListenerError;
    this.baseMs = positive('backoff.baseMs', options.backoff?.baseMs, DEFAULT_BACKOFF_BASE_MS);
    this.capMs = positive('backoff.capMs', options.backoff?.capMs, DEFAULT_BACKOFF_CAP_MS);
    this.connectTimeoutMs = positive('connectTimeoutMs', options.connectTimeoutMs, DEFAULT_CONNECT_TIMEOUT_MS);
    this.attemptTimeoutMs = positive('attemptTimeoutMs', options.attemptTimeoutMs, DEFAULT_ATTEMPT_TIMEOUT_MS);
  }

  // ---- reading ----

  /** The client's own connection. */
  get connection(): ConnectionState {
    return this.state;
  }

  /**
   * The lobby as last applied, or `null` before the first state. Its
   * `live` is true only while the socket is open.
   */
  get view(): LobbyView | null {
    if (!this.base) return null;
    const live = this.state.status === 'open';
    if (!this.cachedView || this.cachedView.revision !== this.base.revision || this.cachedView.live !== live || this.cachedView.receivedAt !== this.base.receivedAt) {
      this.cachedView = Object.freeze({ ...this.base, live });
    }
    return this.cachedView;
  }

  /** This player's ID, from the server's welcome; `null` before the first join. */
  get userId(): string | null {
    return this.self;
  }

  /** The highest revision applied, or -1 before the first. */
  get revision(): number {
    return this.tracker.highest;
  }

  /** Who is typing now (empty while the socket is not open). */
  get typingUserIds(): readonly string[] {
    return this.typingNow;
  }

  /**
   * Whether this player hosts the lobby: only while the socket is open and
   * the latest state names it. While disconnected this is false: the
   * server may have handed the role on in the meantime.
   */
  isHost(): boolean {
    return this.state.status === 'open' && this.base !== null && this.self !== null && this.base.hostId === this.self;
  }

  /**
   * The time left until `member`'s reconnect deadline, in milliseconds,
   * counted on the server's clock (the state's `serverTime` plus the time
   * since it arrived), so a wrong local clock does not skew it. `null` for
   * a member that is not reconnecting.
   */
  reconnectRemainingMs(member: Member): number | null {
    if (member.reconnectBy === null || !this.base) return null;
    const now = this.clock.now();
    const serverNow = this.base.serverTime === null ? now : this.base.serverTime + (now - this.base.receivedAt);
    return Math.max(0, member.reconnectBy - serverNow);
  }

  /**
   * Registers a callback; returns a function that removes it. Callbacks
   * run synchronously, in registration order.
   */
  on<K extends keyof LobbyEvents>(event: K, listener: LobbyEvents[K]): () => void {
    if (typeof listener !== 'function') throw new InvalidArgumentError('listener must be a function');
    const list = (this.listeners[event] ??= []) as Array<LobbyEvents[K]>;
    list.push(listener);
    return () => {
      const i = list.indexOf(listener);
      if (i >= 0) list.splice(i, 1);
    };
  }

  // ---- connecting ----

  /**
   * Starts connecting: idle or closed → connecting. A no-op while
   * connecting, open or reconnecting. After a close (a kick, say) it is
   * the application's decision to try again; the revision rule still
   * holds across it.
   */
  connect(): void {
    const s = this.state.status;
    if (s === 'connecting' || s === 'open' || s === 'reconnecting') return;
    this.leaving = false;
    this.everOpen = false;
    this.attempt = 0;
    this.lastTry = false;
    const now = this.clock.now();
    this.deadline = now + this.connectTimeoutMs;
    const token = this.token;
    this.setState({ status: 'connecting', attempt: 0, delayMs: 0, retryAt: now, deadline: this.deadline, lastClose: null });
    // A listener may have called disconnect() meanwhile.
    if (token === this.token) void this.startAttempt();
  }

  /**
   * Closes the socket and stops (closed reason `client`). The server
   * keeps the place for the grace, as after any drop; to give it up at
   * once, call {@link LobbyClient.leave} instead.
   */
  disconnect(): void {
    if (this.state.status === 'closed' || this.state.status === 'idle') return;
    this.finish('client', null, null, 'closed by the application');
  }

  // ---- sending ----

  /** Sends a chat message; returns its `clientMsgId` (given or generated), echoed back on the `chat` event. */
  sendChat(text: string, clientMsgId?: string): string {
    if (typeof text !== 'string') throw new InvalidArgumentError('text must be a string');
    if (clientMsgId !== undefined && (typeof clientMsgId !== 'string' || clientMsgId === '')) {
      throw new InvalidArgumentError('clientMsgId must be a non-empty string');
    }
    const id = clientMsgId ?? this.newClientMsgId();
    this.send({ type: 'chat.send', text, clientMsgId: id });
    return id;
  }

  /**
   * Says whether this user is typing. Typing is lossy: a change equal to
   * the last one sent on this socket is not sent again.
   */
  setTyping(typing: boolean): void {
    if (typeof typing !== 'boolean') throw new InvalidArgumentError('typing must be a boolean');
    if (this.lastTyping === typing) return;
    this.send({ type: 'typing.set', typing });
    this.lastTyping = typing;
  }

  /** Sends a read receipt for a message. Repeating it does nothing on the server. */
  markRead(messageId: string): void {
    if (typeof messageId !== 'string' || messageId === '') throw new InvalidArgumentError('messageId must be a non-empty string');
    this.send({ type: 'message.read', messageId });
  }

  /**
   * Asks the server to make `userId` host. The server judges it on its
   * current state (only the host now may), whatever this view says; a
   * refusal arrives as a `serverError` (`not_host`, ...).
   */
  transferHost(userId: string): void {
    if (typeof userId !== 'string' || userId === '') throw new InvalidArgumentError('userId must be a non-empty string');
    this.send({ type: 'host.transfer', to: userId });
  }

  /** Asks the server to remove `userId` (host only), refusing its return for `blockMs` (0 to 86400000). */
  kick(userId: string, blockMs?: number): void {
    if (typeof userId !== 'string' || userId === '') throw new InvalidArgumentError('userId must be a non-empty string');
    if (blockMs !== undefined && (!Number.isSafeInteger(blockMs) || blockMs < 0 || blockMs > 86400000)) {
      throw new InvalidArgumentError('blockMs must be an integer from 0 to 86400000');
    }
    this.send(blockMs === undefined ? { type: 'kick', target: userId } : { type: 'kick', target: userId, block_ms: blockMs });
  }

  /** Asks the server to lock (refuse new players) or unlock the lobby (host only). */
  lock(locked: boolean): void {
    if (typeof locked !== 'boolean') throw new InvalidArgumentError('locked must be a boolean');
    this.send({ type: 'lock', locked });
  }

  /**
   * Leaves the lobby for good: no grace, every socket of this user closes.
   * The client then stops with reason `left`, however the socket closes.
   */
  leave(): void {
    this.send({ type: 'leave' });
    this.leaving = true;
  }

  private send(msg: Record<string, unknown>): void {
    const ws = this.ws;
    if (this.state.status !== 'open' || !ws || ws.readyState !== OPEN) throw new NotConnectedError();
    ws.send(JSON.stringify(msg));
  }

  private newClientMsgId(): string {
    const r = Math.floor(this.random() * 0x100000000).toString(36);
    return `${this.clock.now().toString(36)}-${r}`;
  }

  // ---- attempts ----

  private async startAttempt(): Promise<void> {
    const token = ++this.token;
    this.retryTimer = null;
    this.attemptTimer = this.clock.setTimeout(() => {
      if (token !== this.token) return;
      this.lost(CloseCode.ClientTimeout, 'no welcome from the server in time', null);
    }, this.attemptTimeoutMs);
    let ticket: string;
    try {
      const got = await this.getTicket(this.roomId);
      ticket = typeof got === 'string' ? got : (got as { ticket?: unknown } | null)?.ticket as string;
      if (typeof ticket !== 'string' || ticket === '') throw new TypeError('getTicket returned no ticket');
    } catch (err) {
      if (token !== this.token) return;
      if (err instanceof TicketRefusedError) {
        this.finish('ticket_refused', null, err, err.message);
        return;
      }
      this.lost(null, 'getTicket failed', new TicketError('getTicket failed', { cause: err }));
      return;
    }
    if (token !== this.token) return;
    let ws: SocketLike;
    try {
      if (!this.Socket) throw new InvalidArgumentError('no WebSocket constructor');
      ws = new this.Socket(this.urlFor(ticket, this.roomId));
    } catch (err) {
      const e = err instanceof LobbyClientError ? err : new InvalidArgumentError(`the socket URL was refused: ${String(err)}`);
      this.finish('invalid_url', null, e, e.message);
      return;
    }
    this.ws = ws;
    this.welcomed = false;
    this.held = [];
    ws.onmessage = (ev) => {
      if (token === this.token) this.onFrame(ev.data);
    };
    ws.onclose = (ev) => {
      if (token !== this.token) return;
      this.ws = null; // closed already: nothing to close
      this.lost(typeof ev.code === 'number' ? ev.code : CloseCode.Abnormal, typeof ev.reason === 'string' ? ev.reason : '', null);
    };
    ws.onerror = () => {
      // A close event always follows; it carries the code.
    };
  }

  /**
   * The current socket or attempt ended. A drop of an open socket starts
   * the grace; a failed attempt keeps the deadline it had. Then, by the
   * close code: stop, or retry (at once after a drain of an open socket).
   */
  private lost(code: number | null, reason: string, error: LobbyClientError | null): void {
    const wasOpen = this.state.status === 'open';
    this.dropSocket(CloseCode.ClientTimeout, reason);
    if (this.leaving) {
      this.finish('left', code, error, reason);
      return;
    }
    if (wasOpen) {
      // The place is kept from the moment the socket dropped, for the
      // lobby's own grace if it overrides the server's.
      this.droppedAt = this.clock.now();
      const grace = (this.base ? overrideGraceMs(this.base.overrides) : null) ?? this.graceMs ?? 0;
      this.deadline = this.droppedAt + grace;
      this.attempt = 0;
      this.lastTry = false;
      if (this.typingNow.length > 0) {
        this.typingNow = Object.freeze([]);
        this.emit('typingState', this.typingNow);
      }
    }
    const last: CloseInfo = Object.freeze({ code, reason, error });
    const action = code === null ? ({ kind: 'reconnect', immediate: false } as const) : closeAction(code);
    if (action.kind === 'stop') {
      this.finish(action.reason, code, error ?? null, reason);
      return;
    }
    this.schedule(action.immediate && wasOpen, last);
  }

  private schedule(immediate: boolean, last: CloseInfo): void {
    const now = this.clock.now();
    const window = this.deadline - now;
    if (window <= 0 || this.lastTry) {
      // A deadline has passed at its own instant: at the grace's end the
      // server removes the member, so a join then would be a new player.
      this.finish(this.everOpen ? 'grace_ended' : 'connect_failed', last.code, last.error, last.reason);
      return;
    }
    this.attempt++;
    let delayMs = 0;
    if (!immediate) {
      const d = retryDelay(this.attempt, this.baseMs, this.capMs, window, this.random);
      delayMs = d.delayMs;
      this.lastTry = d.last;
    }
    const retryAt = now + delayMs;
    const token = this.token;
    if (this.everOpen) {
      this.setState({ status: 'reconnecting', attempt: this.attempt, delayMs, retryAt, droppedAt: this.droppedAt, graceDeadline: this.deadline, lastClose: last });
    } else {
      this.setState({ status: 'connecting', attempt: this.attempt, delayMs, retryAt, deadline: this.deadline, lastClose: last });
    }
    // A listener of the state above may have called disconnect() or
    // connect(): then this schedule is not the client's any more.
    if (token !== this.token) return;
    if (immediate) {
      void this.startAttempt();
      return;
    }
    this.retryTimer = this.clock.setTimeout(() => {
      if (token !== this.token) return;
      // Timers may fire late (a background tab's are throttled): an
      // attempt never starts once the deadline has passed.
      if (this.clock.now() >= this.deadline) {
        this.retryTimer = null;
        this.finish(this.everOpen ? 'grace_ended' : 'connect_failed', last.code, last.error, last.reason);
        return;
      }
      void this.startAttempt();
    }, delayMs);
  }

  /** Gives up the current socket (closing it if open), its timers and its held states. */
  private dropSocket(code: number, reason: string): void {
    this.token++;
    const ws = this.ws;
    this.ws = null;
    if (ws) {
      ws.onmessage = null;
      ws.onclose = null;
      ws.onerror = null;
      try {
        ws.close(code, reason.slice(0, 60));
      } catch {
        // Already closing, or a code the socket refuses: nothing more to do.
      }
    }
    for (const t of [this.attemptTimer, this.retryTimer, this.beatTimer]) if (t !== null) this.clock.clearTimeout(t);
    this.attemptTimer = this.retryTimer = this.beatTimer = null;
    this.welcomed = false;
    this.held = [];
    this.lastTyping = null;
  }

  private finish(reason: ClosedReason, code: number | null, error: LobbyClientError | null, why: string): void {
    const wasOpen = this.state.status === 'open';
    this.dropSocket(CloseCode.Normal, why);
    if (wasOpen && this.typingNow.length > 0) {
      this.typingNow = Object.freeze([]);
      this.emit('typingState', this.typingNow);
    }
    this.setState({ status: 'closed', reason, code, error });
  }

  // ---- messages ----

  private onFrame(data: unknown): void {
    this.inbound++;
    let msg;
    try {
      msg = parseServerMessage(data);
    } catch (err) {
      const e = err instanceof ProtocolError ? err : new ProtocolError(String(err));
      this.finish('protocol_error', null, e, 'protocol error');
      return;
    }
    switch (msg.type) {
      case 'lobby.state':
        if (this.welcomed) this.applyState(msg.state, true);
        else this.hold(msg.state);
        return;
      case 'welcome':
        this.onWelcome(msg.welcome);
        return;
      case 'chat.history':
        this.emit('chatHistory', msg.messages);
        return;
      case 'chat.message':
        this.emit('chat', msg.message);
        return;
      case 'message.read':
        this.emit('read', msg.receipt);
        return;
      case 'typing':
        this.typingNow = msg.change.userIds;
        this.emit('typing', msg.change);
        this.emit('typingState', this.typingNow);
        return;
      case 'typing.state':
        this.typingNow = msg.userIds;
        this.emit('typingState', this.typingNow);
        return;
      case 'error':
        this.emit('serverError', new ServerError(msg.code, msg.message, msg.requestType));
        return;
      default:
        return; // pong (counted above) and types newer than this client
    }
  }

  /**
   * A state before the welcome: the server sends the lobby's state first,
   * then the welcome. It is applied when the welcome arrives, so that
   * callbacks see the new socket open, and the view is announced once.
   */
  private hold(s: StateMessage): void {
    this.held.push(s);
  }

  private onWelcome(w: WelcomeMessage): void {
    if (this.welcomed) return;
    if (w.roomId !== this.roomId) {
      this.finish('protocol_error', null, new ProtocolError(`welcome names room ${JSON.stringify(w.roomId)}, not this client's`), 'protocol error');
      return;
    }
    this.welcomed = true;
    this.everOpen = true;
    this.self = w.userId;
    this.graceMs = w.graceMs;
    this.attempt = 0;
    if (this.attemptTimer !== null) this.clock.clearTimeout(this.attemptTimer);
    this.attemptTimer = null;
    this.startHeartbeat(w.heartbeatMs);
    const token = this.token;
    this.setState({ status: 'open', userId: w.userId, connection: w.connection, heartbeatMs: w.heartbeatMs, graceMs: w.graceMs });
    this.emit('welcome', w);
    if (token !== this.token) return; // a listener gave the socket up
    const held = this.held;
    this.held = [];
    let gap = false;
    for (const s of held) gap = this.applyState(s, false) === 'gap' || gap;
    const view = this.view;
    // Re-announce the view as live, even if nothing newer came: the
    // application showed it as stale while the socket was down.
    if (view && this.state.status === 'open') this.emit('sync', view, { cause: 'open', gap });
  }

  private applyState(s: StateMessage, announce: boolean): 'gap' | 'apply' | 'dropped' {
    const highest = this.tracker.highest;
    const verdict = this.tracker.offer(s.version);
    if (verdict === 'duplicate' || verdict === 'stale') {
      this.emit('revisionDropped', { revision: s.version, highest, verdict });
      return 'dropped';
    }
    if (verdict === 'gap') this.emit('gap', { from: highest, to: s.version });
    const old = this.base;
    this.base = Object.freeze({
      roomId: this.roomId,
      revision: s.version,
      term: s.term,
      hostId: s.hostId,
      locked: s.locked,
      overrides: s.overrides,
      members: s.members,
      reason: s.reason,
      subjectId: s.subjectId,
      previousHostId: s.previousHostId,
      at: s.at,
      serverTime: s.serverTime,
      receivedAt: this.clock.now(),
    });
    const view = this.view as LobbyView;
    this.announceDiff(old, view, verdict === 'gap');
    if (announce && this.state.status === 'open') this.emit('sync', view, { cause: 'change', gap: verdict === 'gap' });
    return verdict;
  }

  /**
   * Announces what changed between two views. Members are matched by ID
   * and join sequence: a member that left and joined again in revisions
   * this client missed has a new join sequence, and is announced as a
   * leave and a join. A reconnecting member is still a member: its drop
   * and return are member changes, never a leave and a join.
   */
  private announceDiff(old: Base | null, view: LobbyView, gap: boolean): void {
    const before = new Map<string, Member>();
    for (const m of old?.members ?? []) before.set(m.userId, m);
    const after = new Map<string, Member>();
    for (const m of view.members) after.set(m.userId, m);
    for (const m of before.values()) {
      const now = after.get(m.userId);
      if (now && now.joinSeq === m.joinSeq) continue;
      // The state's reason is the cause of everything in its revision; after
      // a gap it explains only the removal of its own subject.
      // A member back with a new join sequence left in a revision between.
      const reason: LeaveReason = !gap || (!now && view.subjectId === m.userId) ? view.reason : 'unknown';
      this.emit('leave', m, reason, view);
    }
    for (const m of view.members) {
      const was = before.get(m.userId);
      if (!was || was.joinSeq !== m.joinSeq) {
        this.emit('join', m, view);
      } else if (was.status !== m.status || was.host !== m.host || was.reconnectBy !== m.reconnectBy || !sameAttrs(was.attrs, m.attrs)) {
        this.emit('memberChange', m, was, view);
      }
    }
    const oldHost = old ? old.hostId : null;
    if (!old ? view.hostId !== null || view.term !== 0 : oldHost !== view.hostId || old.term !== view.term) {
      this.emit('hostChange', Object.freeze({ hostId: view.hostId, previousHostId: oldHost, term: view.term, previousTerm: old ? old.term : null, reason: view.reason }), view);
    }
  }

  // ---- heartbeats ----

  /**
   * Sends an app ping every `everyMs` (the interval the server announced;
   * none when it is 0). The server counts it as a heartbeat and answers
   * with a pong; a socket from which nothing at all arrives for
   * {@link SILENT_INTERVALS} intervals is taken for dead and given up
   * (close 4000), which a browser would otherwise notice only much later.
   */
  private startHeartbeat(everyMs: number): void {
    if (!(everyMs > 0)) return;
    const token = this.token;
    let pinged = false;
    this.inboundAtBeat = this.inbound;
    this.silentBeats = 0;
    const beat = (): void => {
      if (token !== this.token) return;
      // Silence counts only while a ping is out: the server answers each.
      if (pinged && this.inbound === this.inboundAtBeat) this.silentBeats++;
      else this.silentBeats = 0;
      this.inboundAtBeat = this.inbound;
      if (this.silentBeats >= SILENT_INTERVALS) {
        this.lost(CloseCode.ClientTimeout, 'no answer from the server', null);
        return;
      }
      const ws = this.ws;
      if (ws && ws.readyState === OPEN) {
        ws.send('{"type":"ping"}');
        pinged = true;
      }
      this.beatTimer = this.clock.setTimeout(beat, everyMs);
    };
    this.beatTimer = this.clock.setTimeout(beat, everyMs);
  }

  // ---- events ----

  private setState(s: ConnectionState): void {
    this.state = Object.freeze(s);
    this.emit('connection', this.state);
  }

  private emit<K extends keyof LobbyEvents>(event: K, ...args: Parameters<LobbyEvents[K]>): void {
    const list = this.listeners[event];
    if (!list || list.length === 0) return;
    for (const fn of [...list]) {
      try {
        (fn as (...a: Parameters<LobbyEvents[K]>) => void)(...args);
      } catch (err) {
        try {
          this.onListenerError(err);
        } catch {
          // The error reporter itself failed: nothing safer to do.
        }
      }
    }
  }
}
