package pgxstore

import (
	"testing"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/storetest"
)

// TestConformance runs the store conformance suite, each check on a Store in
// a schema of its own that is dropped afterwards; the retention checks get
// Stores with the retention they ask for.
func TestConformance(t *testing.T) {
	storetest.RunWith(t,
		func(t *testing.T) store.Store { return newTestStore(t) },
		storetest.Options{NewRetained: func(t *testing.T, r store.Retention) store.Store {
			return newTestStore(t, WithRetention(r))
		}})
}
