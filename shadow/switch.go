package shadow

import (
	"context"
	"sync/atomic"

	"github.com/lobbyhost/lobbyhost/lobby"
)

// Authority names the decision path a server acts on for a lobby.
type Authority uint8

const (
	// Legacy: the server acts on and publishes the legacy logic's host.
	Legacy Authority = iota
	// Lobbyhost: the server acts on and publishes lobbyhost's host.
	Lobbyhost
)

func (a Authority) String() string {
	if a == Lobbyhost {
		return "lobbyhost"
	}
	return "legacy"
}

// Switch decides per lobby which decision path is authoritative, by a
// cohort predicate the server supplies and may replace at any time, in
// either direction. The zero Switch makes the legacy logic authoritative
// everywhere (pure shadow mode). A Switch is safe for concurrent use.
//
// Switching changes nothing stored: lobbyhost computes and commits its
// decisions whichever side is authoritative, so a lobby's revisions stay
// consecutive and identical across any number of switches.
type Switch struct {
	cohort atomic.Pointer[func(lobbyID string) bool]
}

// NewSwitch returns a Switch with the given cohort (nil: none).
func NewSwitch(cohort func(lobbyID string) bool) *Switch {
	w := &Switch{}
	w.Set(cohort)
	return w
}

// Set replaces the cohort: lobbies for which cohort returns true are
// lobbyhost-authoritative from the next decision on; nil makes every lobby
// legacy-authoritative again (the rollback). cohort must be fast, pure and
// safe for concurrent use.
func (w *Switch) Set(cohort func(lobbyID string) bool) {
	if cohort == nil {
		w.cohort.Store(nil)
		return
	}
	w.cohort.Store(&cohort)
}

// Authority returns the authoritative path for lobbyID now.
func (w *Switch) Authority(lobbyID string) Authority {
	if p := w.cohort.Load(); p != nil && (*p)(lobbyID) {
		return Lobbyhost
	}
	return Legacy
}

// Publisher returns a Publisher that passes to next the events of the
// lobbies that are lobbyhost-authoritative when the events are relayed, and
// drops (acknowledges) every other event. next nil drops everything.
func (w *Switch) Publisher(next lobby.Publisher) lobby.Publisher {
	return lobby.PublisherFunc(func(ctx context.Context, events []lobby.Event) error {
		if next == nil {
			return nil
		}
		var keep []lobby.Event
		for i := range events {
			if w.Authority(events[i].Lobby) == Lobbyhost {
				keep = append(keep, events[i])
			}
		}
		if len(keep) == 0 {
			return nil
		}
		return next.Publish(ctx, keep)
	})
}
