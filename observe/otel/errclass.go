package lobbyotel

import (
	"context"
	"errors"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/store"
)

// classes maps the documented sentinels to their class, the most specific
// first: ErrContention wraps store.ErrConflict, and a store error may wrap a
// context's error.
var classes = []struct {
	err   error
	class string
}{
	{lobby.ErrLobbyFull, "lobby_full"},
	{lobby.ErrNotHost, "not_host"},
	{lobby.ErrNotMember, "not_member"},
	{lobby.ErrNotEligible, "not_eligible"},
	{lobby.ErrNotEmpty, "not_empty"},
	{lobby.ErrBlocked, "blocked"},
	{lobby.ErrLocked, "locked"},
	{lobby.ErrContention, "contention"},
	{lobby.ErrCorrupt, "corrupt"},
	{lobby.ErrInvalidID, "invalid_id"},
	{lobby.ErrInvalidAttrs, "invalid_attrs"},
	{lobby.ErrInvalidCommand, "invalid_command"},
	{lobby.ErrInvalidTime, "invalid_time"},
	{lobby.ErrInvalidPolicy, "invalid_policy"},
	{lobby.ErrInvalidOption, "invalid_option"},
	{store.ErrNotFound, "store_not_found"},
	{store.ErrConflict, "store_conflict"},
	{store.ErrInvalid, "store_invalid"},
	{store.ErrCompacted, "store_compacted"},
	{context.Canceled, "canceled"},
	{context.DeadlineExceeded, "deadline_exceeded"},
}

// ErrorClass names the documented sentinel err matches (errors.Is), in a
// closed set of short names safe to use as a span attribute or a metric
// label: "lobby_full", "not_host", "not_member", "not_eligible",
// "not_empty" (the refusals), "contention", "corrupt", "invalid_id",
// "invalid_attrs", "invalid_command", "invalid_time", "invalid_policy",
// "invalid_option" (package lobby), "store_not_found", "store_conflict",
// "store_invalid" (package store), "canceled", "deadline_exceeded"
// (package context), and "other" for any other error, such as a store's
// I/O failure. It returns "" for a nil err. The error's message is never
// used: it may name players.
func ErrorClass(err error) string {
	if err == nil {
		return ""
	}
	for _, c := range classes {
		if errors.Is(err, c.err) {
			return c.class
		}
	}
	return "other"
}
