package pgxstore

import (
	"testing"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/storetest"
)

// TestConformance runs the store conformance suite, each check on a Store in
// a schema of its own that is dropped afterwards.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newTestStore(t) })
}
