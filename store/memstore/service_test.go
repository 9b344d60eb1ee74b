package memstore_test

import (
	"testing"

	"github.com/lobbyhost/lobbyhost/lobbytest"
	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// harness gives the Service-level suite in-memory stores. Two Services of
// one process share a Store, so Connect hands out the same one; the store
// has no server to restart or round trips to count.
type harness struct{}

func (harness) NewStore(testing.TB) store.Store                 { return memstore.New() }
func (harness) Connect(_ testing.TB, s store.Store) store.Store { return s }

// TestService runs the Service-level suite (lobbytest) on memstore.
func TestService(t *testing.T) { lobbytest.RunService(t, harness{}) }

// BenchmarkServiceHeartbeat and BenchmarkServiceTransition measure
// lobby.Service on memstore the way every adapter does (package lobbytest).
func BenchmarkServiceHeartbeat(b *testing.B)   { lobbytest.BenchHeartbeat(b, harness{}) }
func BenchmarkServiceExpiryBurst(b *testing.B) { lobbytest.BenchExpiryBurst(b, harness{}) }
func BenchmarkServiceTransition(b *testing.B)  { lobbytest.BenchTransition(b, harness{}) }
