package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lobbyhost/lobbyhost/lobby"
)

// Message types the server sends.
const (
	TypeLobbyState  = "lobby.state"
	TypeWelcome     = "welcome"
	TypeChatHistory = "chat.history"
	TypeChatMessage = "chat.message"
	TypeMessageRead = "message.read"
	TypeTyping      = "typing"
	TypeTypingState = "typing.state"
	TypePong        = "pong"
	TypeError       = "error"
)

// Message types clients send.
const (
	TypeHeartbeat    = "heartbeat"
	TypePing         = "ping"
	TypeTypingSet    = "typing.set"
	TypeChatSend     = "chat.send"
	TypeHostTransfer = "host.transfer"
	TypeLeave        = "leave"
	TypeKick         = "kick" // host only: remove "target", blocking its return for "block_ms"
	TypeLock         = "lock" // host only: "locked" true refuses new players, false admits them again
	// TypeMessageRead is also a client message.
)

// Error codes of {"type":"error"} messages.
const (
	CodeBadJSON        = "bad_json"        // not a JSON object, trailing data, a field of the wrong type
	CodeBadUTF8        = "bad_utf8"        // the frame is not valid UTF-8
	CodeUnsupported    = "unsupported"     // a binary frame
	CodeTooLarge       = "too_large"       // the frame exceeds MaxMessageBytes
	CodeMissingType    = "missing_type"    // no "type"
	CodeUnknownType    = "unknown_type"    // a type the server does not accept from clients
	CodeWrongRoom      = "wrong_room"      // "roomId" names another room than the ticket's
	CodeImpersonation  = "impersonation"   // a sender field names another user than the ticket's
	CodeForbiddenField = "forbidden_field" // a field clients may not set ("hostId")
	CodeBadField       = "bad_field"       // a required field is missing or out of range
	CodeTextEmpty      = "text_empty"
	CodeTextTooLong    = "text_too_long"
	CodeUnknownMessage = "unknown_message" // message.read of a message not in the history
	CodeNotHost        = "not_host"
	CodeNotMember      = "not_member"
	CodeNotEligible    = "not_eligible"
	CodeRateLimited    = "rate_limited"
	CodeLobbyFull      = "lobby_full"
	CodeLobbyLocked    = "lobby_locked" // the join of a new player into a locked lobby
	CodeBlocked        = "blocked"      // the join of a player the host kicked with a block still in force
	CodeInternal       = "internal"
)

// Close codes the server uses besides the standard ones.
const (
	// CloseRejoin: the socket's connection generation ended (heartbeat
	// deadline passed, or the server learned it is stale). Get a new ticket
	// and reconnect.
	CloseRejoin = 4001
	// CloseSuperseded: the user opened more sockets than the policy allows;
	// this, the oldest, was ended.
	CloseSuperseded = 4002
	// CloseLeft: the user left the lobby (from this or another socket).
	CloseLeft = 4003
	// ClosePingTimeout: the client did not answer a ping in time.
	ClosePingTimeout = 4004
	// CloseSlowConsumer: the client did not read fast enough and its send
	// queue overflowed.
	CloseSlowConsumer = 4008
	// CloseLobbyFull: the lobby refused a new member.
	CloseLobbyFull = 4009
	// CloseKicked: the host removed the user from the lobby. Joining
	// again may be refused (blocked) until the kick's block ends.
	CloseKicked = 4010
	// CloseLobbyLocked: the lobby is locked and refused a new member.
	CloseLobbyLocked = 4011
	// CloseBlocked: the user was kicked with a block still in force.
	CloseBlocked = 4012
)

// memberMsg is one member in a lobby.state message.
type memberMsg struct {
	UserID  string `json:"userId"`
	JoinSeq uint64 `json:"joinSeq"`
	Status  string `json:"status"` // "online" or "reconnecting"
	Host    bool   `json:"host"`
	// ReconnectBy is a reconnecting member's reconnect deadline: it is
	// removed then unless it comes back.
	ReconnectBy string `json:"reconnectBy,omitempty"`
	// Attrs and ReconnectDeadline are spelled as in the lobby's JSON form
	// (docs/rules.md); ReconnectDeadline equals ReconnectBy.
	Attrs             map[string]string `json:"attrs,omitempty"`
	ReconnectDeadline string            `json:"reconnect_deadline,omitempty"`
}

// stateMsg is the lobby.state message. The first four fields are the
// common minimal protocol; the rest are additions.
type stateMsg struct {
	Type      string   `json:"type"`
	Version   uint64   `json:"version"`
	HostID    *string  `json:"hostId"`
	PlayerIDs []string `json:"playerIds"`
	RoomID    string   `json:"roomId"`
	// Term is the host term: one more with every change of host; a
	// client stamps host-only requests to other services with it.
	Term uint64 `json:"term"`
	// Locked: the lobby refuses new players. Overrides are the lobby's
	// own settings, in the lobby's JSON form ({} for none).
	Locked    bool            `json:"locked"`
	Overrides lobby.Overrides `json:"overrides"`
	Members   []memberMsg     `json:"members"`
	// Reason is the lobby reason of the change, or "snapshot" for a state
	// read without knowing the change that led to it.
	Reason string `json:"reason"`
	// SubjectID and PreviousHostID are present (possibly null) on states
	// that announce a change, absent on snapshots.
	SubjectID      json.RawMessage `json:"subjectId,omitempty"`
	PreviousHostID json.RawMessage `json:"previousHostId,omitempty"`
	// At is when the change happened (for an expiry: its deadline).
	At string `json:"at,omitempty"`
	// ServerTime is the server's clock when the message was made, so that
	// a client can count down to reconnectBy whatever its own clock says.
	ServerTime string `json:"serverTime"`
}

// ReasonSnapshot is the reason of a lobby.state built from a snapshot.
const ReasonSnapshot = "snapshot"

func nullableID(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func rawID(s string) json.RawMessage {
	if s == "" {
		return json.RawMessage("null")
	}
	b, _ := json.Marshal(s)
	return b
}

func newStateMsg(room string, rev uint64, host string, locked bool, o lobby.Overrides, members []lobby.MemberView, now time.Time) stateMsg {
	m := stateMsg{
		Type:      TypeLobbyState,
		Version:   rev,
		HostID:    nullableID(host),
		PlayerIDs: make([]string, len(members)),
		RoomID:    room,
		Locked:    locked,
		Overrides: o,
		Members:   make([]memberMsg, len(members)),
		// ServerTime: see stateMsg.
		ServerTime: formatTime(now),
	}
	for i, mv := range members {
		m.PlayerIDs[i] = mv.Player
		m.Members[i] = memberMsg{UserID: mv.Player, JoinSeq: mv.JoinSeq, Status: mv.Status.String(), Host: mv.Player == host, Attrs: mv.Attrs}
		if mv.Status == lobby.StatusReconnecting && !mv.ReconnectDeadline.IsZero() {
			at := formatTime(mv.ReconnectDeadline)
			m.Members[i].ReconnectBy, m.Members[i].ReconnectDeadline = at, at
		}
	}
	return m
}

// encodeEvent returns the lobby.state message for a committed event, with
// the server's time now.
func encodeEvent(e *lobby.Event, now time.Time) []byte {
	m := newStateMsg(e.Lobby, e.Revision, e.Host, e.Locked, e.Overrides, e.Members, now)
	m.Term = e.Term
	m.Reason = string(e.Reason)
	m.SubjectID = rawID(e.Subject)
	m.PreviousHostID = rawID(e.PrevHost)
	if !e.At.IsZero() {
		m.At = e.At.UTC().Format(time.RFC3339Nano)
	}
	return appendState(make([]byte, 0, stateSize(len(m.Members))), &m)
}

// encodeSnapshot returns the lobby.state message for a snapshot; see
// encodeEvent.
func encodeSnapshot(s *lobby.Snapshot, now time.Time) []byte {
	m := newStateMsg(s.Lobby, s.Revision, s.Host, s.Locked, s.Overrides, s.Members, now)
	m.Term = s.Term
	m.Reason = ReasonSnapshot
	return appendState(make([]byte, 0, stateSize(len(m.Members))), &m)
}

type welcomeMsg struct {
	Type   string `json:"type"`
	RoomID string `json:"roomId"`
	UserID string `json:"userId"`
	// Connection is this socket's connection generation in the lobby.
	Connection uint64 `json:"connection"`
	// HeartbeatMs suggests how often to send {"type":"heartbeat"} if the
	// client cannot answer WebSocket pings; 0 when heartbeats are off.
	HeartbeatMs int64 `json:"heartbeatMs"`
	// GraceMs is how long a dropped socket may take to reconnect and keep
	// its place (and the host role).
	GraceMs int64 `json:"graceMs"`
	// MaxMessageBytes and MaxChatBytes are the limits on client frames and
	// chat text.
	MaxMessageBytes int `json:"maxMessageBytes"`
	MaxChatBytes    int `json:"maxChatBytes"`
}

type chatMsg struct {
	Type        string   `json:"type,omitempty"`
	RoomID      string   `json:"roomId,omitempty"`
	MessageID   string   `json:"messageId"`
	UserID      string   `json:"userId"`
	Text        string   `json:"text"`
	Time        string   `json:"time"`
	ClientMsgID string   `json:"clientMsgId,omitempty"`
	ReadBy      []string `json:"readBy,omitempty"`
}

type chatHistoryMsg struct {
	Type     string    `json:"type"`
	RoomID   string    `json:"roomId"`
	Messages []chatMsg `json:"messages"`
}

type readMsg struct {
	Type      string `json:"type"`
	RoomID    string `json:"roomId"`
	MessageID string `json:"messageId"`
	UserID    string `json:"userId"`
	Time      string `json:"time"`
}

type typingMsg struct {
	Type   string `json:"type"`
	RoomID string `json:"roomId"`
	UserID string `json:"userId"`
	Typing bool   `json:"typing"`
	// UserIDs is everybody typing after this change.
	UserIDs []string `json:"userIds"`
}

type typingStateMsg struct {
	Type    string   `json:"type"`
	RoomID  string   `json:"roomId"`
	UserIDs []string `json:"userIds"`
}

type errorMsg struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// RequestType echoes the type of the refused message, when known.
	RequestType string `json:"requestType,omitempty"`
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own types are marshalled; none can fail.
		panic("server: marshal: " + err.Error())
	}
	return b
}

func encodeError(code, msg, requestType string) []byte {
	return mustJSON(errorMsg{Type: TypeError, Code: code, Message: msg, RequestType: requestType})
}

// clientMsg is any message a client sends. Fields a type does not use are
// ignored, except the identity fields, which are checked for every type.
type clientMsg struct {
	Type string `json:"type"`

	// typing.set's flag; isTyping is accepted as well.
	Typing   *bool `json:"typing"`
	IsTyping *bool `json:"isTyping"`
	// chat.send's text; body and content are accepted as well.
	Text    *string `json:"text"`
	Body    *string `json:"body"`
	Content *string `json:"content"`
	// The sender's own ID for a chat message, echoed back; clientMessageId
	// is accepted as well.
	ClientMsgID     string `json:"clientMsgId"`
	ClientMessageID string `json:"clientMessageId"`
	MessageID       string `json:"messageId"`

	// kick's target is "target" (or any of host.transfer's names) and
	// its block in milliseconds; lock's flag.
	Target  string `json:"target"`
	BlockMs *int64 `json:"block_ms"`
	Locked  *bool  `json:"locked"`

	// host.transfer's target, under any of these names.
	To           string `json:"to"`
	TargetUserID string `json:"targetUserId"`
	TargetID     string `json:"targetId"`
	NewHostID    string `json:"newHostId"`

	// Identity fields. The server takes the room and the sender from the
	// ticket; a message that names another is refused.
	RoomID   *string `json:"roomId"`
	UserID   *string `json:"userId"`
	PlayerID *string `json:"playerId"`
	SenderID *string `json:"senderId"`
	From     *string `json:"from"`
	// HostID is never accepted from a client: the server decides the host.
	HostID *string `json:"hostId"`
}

// refusal is a client message the server will not act on.
type refusal struct {
	code, msg, requestType string
}

func (r *refusal) Error() string { return r.code + ": " + r.msg }

func refuse(code, msg string) *refusal { return &refusal{code: code, msg: msg} }

// decodeClientMsg parses one text frame and checks it against the
// socket's identity (room and user from the ticket). It returns a refusal
// for anything it will not accept; it never panics on any input.
func decodeClientMsg(data []byte, room, user string) (clientMsg, *refusal) {
	var m clientMsg
	if !utf8.Valid(data) {
		return m, refuse(CodeBadUTF8, "frame is not valid UTF-8")
	}
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return m, refuse(CodeBadJSON, "message must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil {
		return clientMsg{}, refuse(CodeBadJSON, "malformed JSON: "+jsonProblem(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return clientMsg{}, refuse(CodeBadJSON, "trailing data after the JSON object")
	}
	if m.Type == "" {
		return m, refuse(CodeMissingType, `"type" is required`)
	}
	withType := func(r *refusal) *refusal { r.requestType = m.Type; return r }
	if m.RoomID != nil && *m.RoomID != room {
		return m, withType(refuse(CodeWrongRoom, "this socket belongs to another room"))
	}
	for _, f := range []*string{m.UserID, m.PlayerID, m.SenderID, m.From} {
		if f != nil && *f != user {
			return m, withType(refuse(CodeImpersonation, "the sender is the socket's user; it cannot be set"))
		}
	}
	if m.HostID != nil {
		return m, withType(refuse(CodeForbiddenField, "clients cannot name the host; use host.transfer"))
	}
	return m, nil
}

// jsonProblem names the kind of JSON error without echoing input.
func jsonProblem(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return "syntax error"
	case errors.As(err, &typ):
		if typ.Field != "" && len(typ.Field) <= 32 && isPlainField(typ.Field) {
			return "field " + typ.Field + " has the wrong type"
		}
		return "a field has the wrong type"
	default:
		return "cannot decode"
	}
}

func isPlainField(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && r != '.'
	}) < 0
}

// typing returns typing.set's flag under either name, nil if absent.
func (m *clientMsg) typing() *bool {
	if m.Typing != nil {
		return m.Typing
	}
	return m.IsTyping
}

// text returns chat.send's text under any of its names, nil if absent.
func (m *clientMsg) text() *string {
	for _, t := range []*string{m.Text, m.Body, m.Content} {
		if t != nil {
			return t
		}
	}
	return nil
}

func (m *clientMsg) clientID() string {
	if m.ClientMsgID != "" {
		return m.ClientMsgID
	}
	return m.ClientMessageID
}

// transferTarget returns the host.transfer target named by m.
func (m *clientMsg) transferTarget() (string, *refusal) {
	to := ""
	for _, v := range []string{m.To, m.TargetUserID, m.TargetID, m.NewHostID} {
		if v == "" {
			continue
		}
		if to != "" && v != to {
			return "", refuse(CodeBadField, "conflicting transfer targets")
		}
		to = v
	}
	if to == "" {
		return "", refuse(CodeBadField, `"to" is required`)
	}
	if lobby.ValidateID(to) != nil {
		return "", refuse(CodeBadField, `"to" is not a valid user ID`)
	}
	return to, nil
}

// maxBlock bounds the block a kick may ask for.
const maxBlock = 24 * time.Hour

// kickTarget returns the kick's target and block.
func (m *clientMsg) kickTarget() (string, time.Duration, *refusal) {
	to := m.Target
	if to == "" {
		for _, v := range []string{m.To, m.TargetUserID, m.TargetID} {
			if v != "" {
				to = v
				break
			}
		}
	}
	if to == "" {
		return "", 0, refuse(CodeBadField, `"target" is required`)
	}
	if lobby.ValidateID(to) != nil {
		return "", 0, refuse(CodeBadField, `"target" is not a valid user ID`)
	}
	var block time.Duration
	if m.BlockMs != nil {
		if *m.BlockMs < 0 || *m.BlockMs > maxBlock.Milliseconds() {
			return "", 0, refuse(CodeBadField, `"block_ms" must be 0 to 86400000`)
		}
		block = time.Duration(*m.BlockMs) * time.Millisecond
	}
	return to, block, nil
}
