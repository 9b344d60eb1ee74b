package lobbyotel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/lobbyhost/lobbyhost/lobby"
	lobbyotel "github.com/lobbyhost/lobbyhost/observe/otel"
	"github.com/lobbyhost/lobbyhost/store"
)

func TestErrorClass(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("%w: %q does not host %q", lobby.ErrNotHost, "bob", "party-1"), "not_host"},
		{lobby.ErrLobbyFull, "lobby_full"},
		{lobby.ErrNotMember, "not_member"},
		{lobby.ErrNotEligible, "not_eligible"},
		{lobby.ErrNotEmpty, "not_empty"},
		{lobby.ErrBlocked, "blocked"},
		{lobby.ErrLocked, "locked"},
		{store.ErrCompacted, "store_compacted"},
		// As the Service builds it: contention wraps the store's conflict.
		{fmt.Errorf("%w: lobby %q after %d attempts: %w", lobby.ErrContention, "l", 32, store.ErrConflict), "contention"},
		{fmt.Errorf("lobby %q: %w", "l", lobby.ErrCorrupt), "corrupt"},
		{lobby.ErrInvalidID, "invalid_id"},
		{lobby.ErrInvalidAttrs, "invalid_attrs"},
		{lobby.ErrInvalidCommand, "invalid_command"},
		{lobby.ErrInvalidTime, "invalid_time"},
		{lobby.ErrInvalidPolicy, "invalid_policy"},
		{lobby.ErrInvalidOption, "invalid_option"},
		{fmt.Errorf("lobby %q: load: %w", "l", store.ErrNotFound), "store_not_found"},
		{store.ErrConflict, "store_conflict"},
		{store.ErrInvalid, "store_invalid"},
		{fmt.Errorf("lobby %q: load: %w", "l", context.Canceled), "canceled"},
		{context.DeadlineExceeded, "deadline_exceeded"},
		{errors.New("dial tcp 10.0.0.1:5432: connection refused"), "other"},
	} {
		if got := lobbyotel.ErrorClass(tt.err); got != tt.want {
			t.Errorf("ErrorClass(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
