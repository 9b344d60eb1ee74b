/**
 * Typed errors. Every error this package throws or reports is a
 * {@link LobbyClientError}; tell them apart with `instanceof` or by their
 * `code`, never by their message.
 *
 * @packageDocumentation
 */

/**
 * Codes of the errors the client itself raises. Errors the server sends
 * ({@link ServerError}) carry the server's code instead.
 */
export type ClientErrorCode =
  | 'invalid_argument'
  | 'not_connected'
  | 'protocol_error'
  | 'ticket_failed'
  | 'ticket_refused';

/** The base class of every error of this package. */
export class LobbyClientError extends Error {
  /** A stable machine-readable code; see the subclasses. */
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message);
    this.code = code;
    this.name = 'LobbyClientError';
    if (options && 'cause' in options) {
      // Set by hand: ES2020 has no Error constructor options.
      Object.defineProperty(this, 'cause', { value: options.cause, configurable: true, writable: true });
    }
    // Keeps instanceof working when a bundler lowers classes.
    Object.setPrototypeOf(this, new.target.prototype);
  }
}

/**
 * A bad argument: an option of the wrong type, an empty room ID, a chat
 * text that is not a string. Code `invalid_argument`. Thrown synchronously
 * by the call that received it.
 */
export class InvalidArgumentError extends LobbyClientError {
  declare readonly code: 'invalid_argument';
  constructor(message: string) {
    super('invalid_argument', message);
    this.name = 'InvalidArgumentError';
  }
}

/**
 * A message was sent while the client has no joined socket (connecting,
 * reconnecting or closed). Code `not_connected`. Nothing was sent: the
 * server never queues messages for a socket that is not there, so the
 * client does not either.
 */
export class NotConnectedError extends LobbyClientError {
  declare readonly code: 'not_connected';
  constructor(message = 'the client has no joined socket') {
    super('not_connected', message);
    this.name = 'NotConnectedError';
  }
}

/**
 * The server sent something the client cannot read: a frame that is not a
 * JSON object, or a known message type whose fields have the wrong types.
 * Code `protocol_error`. The client closes the socket and stops (closed
 * reason `protocol_error`): a server and a client that disagree on the
 * protocol do not get better by reconnecting. Unknown message types and
 * unknown fields are not errors; they are ignored.
 */
export class ProtocolError extends LobbyClientError {
  declare readonly code: 'protocol_error';
  constructor(message: string) {
    super('protocol_error', message);
    this.name = 'ProtocolError';
  }
}

/**
 * The application's `getTicket` failed (it threw, or returned no ticket).
 * Code `ticket_failed`. The attempt counts as a failed connection attempt
 * and is retried, with a fresh call to `getTicket`, while the grace lasts.
 * The original error is in `cause`.
 */
export class TicketError extends LobbyClientError {
  declare readonly code: 'ticket_failed';
  constructor(message: string, options?: { cause?: unknown }) {
    super('ticket_failed', message, options);
    this.name = 'TicketError';
  }
}

/**
 * Thrown by the application's `getTicket` to say that no ticket will ever
 * be issued (the user is signed out, say): the client stops at once with
 * closed reason `ticket_refused` instead of retrying. Code
 * `ticket_refused`.
 */
export class TicketRefusedError extends LobbyClientError {
  declare readonly code: 'ticket_refused';
  constructor(message = 'the ticket was refused', options?: { cause?: unknown }) {
    super('ticket_refused', message, options);
    this.name = 'TicketRefusedError';
  }
}

/**
 * An `error` message from the server: it refused one client message
 * (`not_host`, `rate_limited`, `bad_field`, ...) or, on attach, the join
 * (`lobby_full`, `lobby_locked`, `blocked`, followed by the socket's close).
 * `code` is the server's code; `requestType` the type of the refused
 * message when the server named it. A refused message has no effect and
 * the socket stays open.
 */
export class ServerError extends LobbyClientError {
  /** The type of the client message the server refused, if it said. */
  readonly requestType: string | null;
  constructor(code: string, message: string, requestType: string | null) {
    super(code, message);
    this.name = 'ServerError';
    this.requestType = requestType;
  }
}
