/**
 * The example server's wire protocol: message types, close codes, and
 * the parsing of server messages into checked values.
 *
 * @packageDocumentation
 */
/**
 * WebSocket close codes: the standard ones the client acts on, the
 * server's own (4001–4012), and two the client defines.
 */
export declare const CloseCode: {
    /** Normal closure. */
    readonly Normal: 1000;
    /** The server is shutting down: reconnect at once (another process, or this one restarted). */
    readonly GoingAway: 1001;
    /** The peer violated the WebSocket protocol. */
    readonly ProtocolError: 1002;
    /** The peer sent a data type it does not accept. */
    readonly UnsupportedData: 1003;
    /** No close frame: the connection broke (also every refused upgrade, as browsers report it). */
    readonly Abnormal: 1006;
    /** A frame that was not valid for its type (bad UTF-8). */
    readonly InvalidPayload: 1007;
    /** A policy violation. */
    readonly PolicyViolation: 1008;
    /** A frame over the server's hard limit: the client must send smaller ones. */
    readonly MessageTooBig: 1009;
    /** The server could not join the lobby (a store failure): retry later. */
    readonly InternalError: 1011;
    /** The service is restarting: like {@link CloseCode.GoingAway}. */
    readonly ServiceRestart: 1012;
    /** Try again later: retried with backoff. */
    readonly TryAgainLater: 1013;
    /**
     * Used by the client itself when it gives up on a socket that shows no
     * sign of life (no pong for a ping, or no welcome in time). Never sent by
     * the server.
     */
    readonly ClientTimeout: 4000;
    /** The socket's connection ended (heartbeat deadline, or a late heartbeat): reconnect. */
    readonly Rejoin: 4001;
    /** A newer tab of the same user took the place: do not reconnect. */
    readonly Superseded: 4002;
    /** The user left the lobby. */
    readonly Left: 4003;
    /** The server's ping went unanswered in time: reconnect. */
    readonly PingTimeout: 4004;
    /** The socket did not read fast enough: reconnect; the new socket gets the current state. */
    readonly SlowConsumer: 4008;
    /** The lobby is full. */
    readonly LobbyFull: 4009;
    /** The host removed the user. */
    readonly Kicked: 4010;
    /** The lobby is locked and refused a new player. */
    readonly LobbyLocked: 4011;
    /** A kick's block is still in force. */
    readonly Blocked: 4012;
    /**
     * A dedicated "drain" close: this process is being emptied, go to
     * another at once. The example server does not send it today (it closes
     * with {@link CloseCode.GoingAway} on shutdown); the client treats it
     * like 1001 so that a server may adopt it.
     */
    readonly Drain: 4013;
};
/** What the client does after a close, by code. */
export type CloseAction = {
    kind: 'reconnect';
    immediate: boolean;
} | {
    kind: 'stop';
    reason: TerminalCloseReason;
};
/** Reasons a close ends the client for good (no reconnect). */
export type TerminalCloseReason = 'superseded' | 'left' | 'lobby_full' | 'kicked' | 'lobby_locked' | 'blocked' | 'protocol_error';
/**
 * Classifies a close code: whether the client reconnects (and whether at
 * once) or stops, with which reason. Any code not named here (1000, 1005,
 * 1006, 1011, 1013, 4001, 4004, 4008, codes of proxies) is worth a
 * reconnect with backoff, within the grace.
 */
export declare function closeAction(code: number): CloseAction;
/** Lobby reasons: the cause of a committed change. */
export type LobbyReason = 'joined' | 'reconnected' | 'disconnected' | 'timed_out' | 'lease_expired' | 'left' | 'kicked' | 'updated' | 'locked' | 'unlocked' | 'configured' | 'host_transferred';
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
export type ServerMessage = {
    type: 'lobby.state';
    state: StateMessage;
} | {
    type: 'welcome';
    welcome: WelcomeMessage;
} | {
    type: 'chat.history';
    messages: readonly ChatMessage[];
} | {
    type: 'chat.message';
    message: ChatMessage;
} | {
    type: 'message.read';
    receipt: ReadReceipt;
} | {
    type: 'typing';
    change: TypingChange;
} | {
    type: 'typing.state';
    userIds: readonly string[];
} | {
    type: 'pong';
} | {
    type: 'error';
    code: string;
    message: string;
    requestType: string | null;
} | {
    type: 'unknown';
};
/**
 * Parses one text frame from the server. It throws a {@link ProtocolError}
 * for a frame that is not a JSON object with a string `type`, or for a
 * known type with malformed fields; it returns `{type: 'unknown'}` for a
 * type it does not know.
 */
export declare function parseServerMessage(data: unknown): ServerMessage;
/** The grace a lobby's own overrides set (`grace_ms`), or `null` when it follows the server's policy. */
export declare function overrideGraceMs(overrides: Readonly<Record<string, unknown>>): number | null;
