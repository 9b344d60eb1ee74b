/**
 * A browser client for the lobbyhost example server's WebSocket protocol.
 *
 * ```ts
 * import { LobbyClient } from './lobbyhost-client.js';
 *
 * const client = new LobbyClient({
 *   roomId: 'room-1',
 *   getTicket: async (roomId) => {
 *     const res = await fetch(`/rooms/${encodeURIComponent(roomId)}/socket-ticket`, { method: 'POST' });
 *     if (!res.ok) throw new Error(`ticket: ${res.status}`);
 *     return res.json(); // {"ticket": "...", ...}
 *   },
 * });
 * client.on('sync', (view) => render(view, client.isHost()));
 * client.on('connection', (state) => renderConnection(state));
 * client.connect();
 * ```
 *
 * @packageDocumentation
 */

export {
  LobbyClient,
  type Clock,
  type CloseInfo,
  type ClosedReason,
  type ConnectionState,
  type ConnectionStatus,
  type DroppedRevision,
  type HostChange,
  type LeaveReason,
  type LobbyClientOptions,
  type LobbyEvents,
  type LobbyView,
  type RevisionGap,
  type SocketConstructor,
  type SocketLike,
  type SyncInfo,
  type TicketResult,
} from './client.js';
export {
  InvalidArgumentError,
  LobbyClientError,
  NotConnectedError,
  ProtocolError,
  ServerError,
  TicketError,
  TicketRefusedError,
  type ClientErrorCode,
} from './errors.js';
export {
  CloseCode,
  closeAction,
  parseServerMessage,
  type ChatMessage,
  type CloseAction,
  type LobbyReason,
  type Member,
  type MemberStatus,
  type ReadReceipt,
  type ServerMessage,
  type StateMessage,
  type StateReason,
  type TerminalCloseReason,
  type TypingChange,
  type WelcomeMessage,
} from './protocol.js';
export { RevisionTracker, type RevisionVerdict } from './revision.js';
export {
  backoffBound,
  retryDelay,
  unitRandom,
  DEFAULT_BACKOFF_BASE_MS,
  DEFAULT_BACKOFF_CAP_MS,
  type BackoffOptions,
  type RetryDelay,
} from './backoff.js';
