package lobby_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// A Policy is written with the fields it needs, Grace and HeartbeatTTL
// among them, and validated when the Service is built.
func ExamplePolicy() {
	p := lobby.Policy{Grace: 20 * time.Second, HeartbeatTTL: 15 * time.Second, MaxMembers: 8}
	_, err := lobby.NewService(memstore.New(), lobby.WithPolicy(p))
	fmt.Println(err)

	p.Grace = 0
	_, err = lobby.NewService(memstore.New(), lobby.WithPolicy(p))
	fmt.Println(errors.Is(err, lobby.ErrInvalidPolicy))
	// Output:
	// <nil>
	// true
}

func TestOutcomeNames(t *testing.T) {
	for _, tt := range []struct {
		o    lobby.Outcome
		want string
	}{
		{0, "none"},
		{lobby.OutcomeApplied, "applied"},
		{lobby.OutcomeStale, "stale"},
		{200, "Outcome(200)"},
	} {
		if got := tt.o.String(); got != tt.want {
			t.Errorf("Outcome(%d).String() = %q, want %q", uint8(tt.o), got, tt.want)
		}
	}
}

// The server as an actor is a named constant, and Unlock reads as what it
// does.
func TestServerLocksAndUnlocks(t *testing.T) {
	ctx := t.Context()
	svc, err := lobby.NewService(memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Join(ctx, "l", "ana", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Lock(ctx, "l", lobby.ServerActor); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Join(ctx, "l", "bo", nil); !errors.Is(err, lobby.ErrLocked) {
		t.Fatalf("join of a new player into a locked lobby: %v, want ErrLocked", err)
	}
	if _, err := svc.Unlock(ctx, "l", lobby.ServerActor); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Join(ctx, "l", "bo", nil); err != nil {
		t.Fatalf("join after Unlock: %v", err)
	}
}
