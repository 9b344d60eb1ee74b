/**
 * The lobby client: one room, one player, one socket at a time.
 *
 * @packageDocumentation
 */
import { type BackoffOptions } from './backoff.js';
import { LobbyClientError, ServerError } from './errors.js';
import { type ChatMessage, type Member, type ReadReceipt, type StateReason, type TerminalCloseReason, type TypingChange, type WelcomeMessage } from './protocol.js';
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
    onmessage: ((ev: {
        data: unknown;
    }) => void) | null;
    onclose: ((ev: {
        code: number;
        reason: string;
    }) => void) | null;
    onerror: ((ev: unknown) => void) | null;
}
/** A constructor like the browser's `WebSocket`. */
export type SocketConstructor = new (url: string) => SocketLike;
/** What `getTicket` may return: the ticket, or the ticket endpoint's JSON answer. */
export type TicketResult = string | {
    readonly ticket: string;
};
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
export type ClosedReason = TerminalCloseReason
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
{
    readonly status: 'idle';
}
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
 | {
    readonly status: 'closed';
    readonly reason: ClosedReason;
    readonly code: number | null;
    readonly error: LobbyClientError | null;
};
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
StateReason
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
export declare class LobbyClient {
    private readonly roomId;
    private readonly getTicket;
    private readonly urlFor;
    private readonly clock;
    private readonly random;
    private readonly Socket;
    private readonly onListenerError;
    private readonly baseMs;
    private readonly capMs;
    private readonly connectTimeoutMs;
    private readonly attemptTimeoutMs;
    private readonly listeners;
    private readonly tracker;
    private state;
    private base;
    private cachedView;
    private self;
    private graceMs;
    private typingNow;
    /** The typing flag last sent on this socket. */
    private lastTyping;
    private token;
    private ws;
    private welcomed;
    private held;
    private leaving;
    private attemptTimer;
    private retryTimer;
    private beatTimer;
    private inbound;
    private inboundAtBeat;
    private silentBeats;
    private attempt;
    private everOpen;
    private droppedAt;
    private deadline;
    /** The retry scheduled is the last that fits before the deadline. */
    private lastTry;
    /** Creates a client; it does nothing until {@link LobbyClient.connect}. */
    constructor(options: LobbyClientOptions);
    /** The client's own connection. */
    get connection(): ConnectionState;
    /**
     * The lobby as last applied, or `null` before the first state. Its
     * `live` is true only while the socket is open.
     */
    get view(): LobbyView | null;
    /** This player's ID, from the server's welcome; `null` before the first join. */
    get userId(): string | null;
    /** The highest revision applied, or -1 before the first. */
    get revision(): number;
    /** Who is typing now (empty while the socket is not open). */
    get typingUserIds(): readonly string[];
    /**
     * Whether this player hosts the lobby: only while the socket is open and
     * the latest state names it. While disconnected this is false: the
     * server may have handed the role on in the meantime.
     */
    isHost(): boolean;
    /**
     * The time left until `member`'s reconnect deadline, in milliseconds,
     * counted on the server's clock (the state's `serverTime` plus the time
     * since it arrived), so a wrong local clock does not skew it. `null` for
     * a member that is not reconnecting.
     */
    reconnectRemainingMs(member: Member): number | null;
    /**
     * Registers a callback; returns a function that removes it. Callbacks
     * run synchronously, in registration order.
     */
    on<K extends keyof LobbyEvents>(event: K, listener: LobbyEvents[K]): () => void;
    /**
     * Starts connecting: idle or closed → connecting. A no-op while
     * connecting, open or reconnecting. After a close (a kick, say) it is
     * the application's decision to try again; the revision rule still
     * holds across it.
     */
    connect(): void;
    /**
     * Closes the socket and stops (closed reason `client`). The server
     * keeps the place for the grace, as after any drop; to give it up at
     * once, call {@link LobbyClient.leave} instead.
     */
    disconnect(): void;
    /** Sends a chat message; returns its `clientMsgId` (given or generated), echoed back on the `chat` event. */
    sendChat(text: string, clientMsgId?: string): string;
    /**
     * Says whether this user is typing. Typing is lossy: a change equal to
     * the last one sent on this socket is not sent again.
     */
    setTyping(typing: boolean): void;
    /** Sends a read receipt for a message. Repeating it does nothing on the server. */
    markRead(messageId: string): void;
    /**
     * Asks the server to make `userId` host. The server judges it on its
     * current state (only the host now may), whatever this view says; a
     * refusal arrives as a `serverError` (`not_host`, ...).
     */
    transferHost(userId: string): void;
    /** Asks the server to remove `userId` (host only), refusing its return for `blockMs` (0 to 86400000). */
    kick(userId: string, blockMs?: number): void;
    /** Asks the server to lock (refuse new players) or unlock the lobby (host only). */
    lock(locked: boolean): void;
    /**
     * Leaves the lobby for good: no grace, every socket of this user closes.
     * The client then stops with reason `left`, however the socket closes.
     */
    leave(): void;
    private send;
    private newClientMsgId;
    private startAttempt;
    /**
     * The current socket or attempt ended. A drop of an open socket starts
     * the grace; a failed attempt keeps the deadline it had. Then, by the
     * close code: stop, or retry (at once after a drain of an open socket).
     */
    private lost;
    private schedule;
    /** Gives up the current socket (closing it if open), its timers and its held states. */
    private dropSocket;
    private finish;
    private onFrame;
    /**
     * A state before the welcome: the server sends the lobby's state first,
     * then the welcome. It is applied when the welcome arrives, so that
     * callbacks see the new socket open, and the view is announced once.
     */
    private hold;
    private onWelcome;
    private applyState;
    /**
     * Announces what changed between two views. Members are matched by ID
     * and join sequence: a member that left and joined again in revisions
     * this client missed has a new join sequence, and is announced as a
     * leave and a join. A reconnecting member is still a member: its drop
     * and return are member changes, never a leave and a join.
     */
    private announceDiff;
    /**
     * Sends an app ping every `everyMs` (the interval the server announced;
     * none when it is 0). The server counts it as a heartbeat and answers
     * with a pong; a socket from which nothing at all arrives for
     * {@link SILENT_INTERVALS} intervals is taken for dead and given up
     * (close 4000), which a browser would otherwise notice only much later.
     */
    private startHeartbeat;
    private setState;
    private emit;
}
