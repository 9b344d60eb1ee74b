// Package server is lobbyhost's WebSocket lobby server: it lets browsers and
// other WebSocket clients join lobbies, keeps them informed of who is in each
// lobby and who hosts it, and carries typing indicators, chat and read
// receipts between them.
//
// It is the transport around a lobby.Service. The Service decides
// membership and host succession; this package only turns socket events into
// evidence for it (a socket attached, answered a ping, closed) and turns the
// Service's committed events into messages for the sockets of each lobby.
//
// # Flow
//
//  1. A client that the Authenticator accepts asks for a ticket:
//     POST /rooms/{roomId}/socket-ticket answers 201 {"ticket": "..."}.
//     A ticket is good for one upgrade, for that user and that room only,
//     for a short time (Config.TicketTTL).
//  2. The client opens a WebSocket with ?ticket=... on any path. The server
//     checks the Origin against Config.AllowedOrigins, redeems the ticket,
//     joins the user to the lobby (which allocates a connection generation
//     for this socket) and only then completes the upgrade: a client whose
//     upgrade completed is in the lobby. The room and the user come from
//     the ticket, never from the client's messages.
//  3. The socket first receives the lobby's current state (a lobby.state
//     message), then chat history and who is typing. Every committed change
//     of the lobby afterwards reaches every socket of the room as another
//     lobby.state, in revision order; a socket never receives a revision
//     older than one it already received.
//  4. The server pings each socket periodically; a pong, or any well-formed
//     client message, is a heartbeat for that socket's generation. When the
//     socket closes, its generation is reported closed, and the member
//     turns reconnecting for the grace before it is removed (and, if it
//     hosted, succeeded).
//
// docs/wsserver.md in the repository describes every message, status code
// and close code.
//
// # Several processes
//
// Every socket joins through the Server's lobby.Rooms, which follows each
// lobby with sockets in this process through one watcher, opened with its
// first socket and closed with its last. Every commit to the lobby,
// whichever process made it, reaches each socket in order: one lobby.state
// per revision, encoded once per room, and a close at once for each local
// socket whose connection the commit ended (superseded, left, kicked, timed
// out). With a store shared by
// several processes (PostgreSQL, Redis), commits made elsewhere arrive
// through the store's change notifications, which Server.Run listens to,
// and cost one read of the changed lobby's log; rooms that did not change
// cost nothing. Chat, typing and read receipts stay inside one process:
// only lobby state is shared. With the default MemoryTickets a
// ticket is redeemed only by the process that issued it; SignedTickets, with
// a key the processes share and a Redemptions they all see, lets any of
// them redeem it, once.
//
// # What it does not do
//
// It does not authenticate anybody by itself: the HeaderAuthenticator used
// by the demo trusts a request header and is only fit for a demo behind
// nothing. It keeps chat in memory, bounded, per process. It limits what
// one socket, one user and one room may cost (frame and message budgets,
// a send queue bounded in messages and bytes, a chat history bounded by its
// encoded size and shared by every joiner, ticket caps, a member cap, HTTP
// timeouts and a header cap through HTTPServer), but keeps no per-address
// limits: put those in the proxy in front.
package server
