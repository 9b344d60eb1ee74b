package memstore_test

import (
	"testing"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
	"github.com/lobbyhost/lobbyhost/storetest"
)

func TestConformance(t *testing.T) {
	storetest.RunWith(t,
		func(*testing.T) store.Store { return memstore.New() },
		storetest.Options{NewRetained: func(_ *testing.T, r store.Retention) store.Store {
			return memstore.New(memstore.WithRetention(r))
		}})
}
