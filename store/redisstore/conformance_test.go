package redisstore_test

import (
	"testing"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/redisstore"
	"github.com/lobbyhost/lobbyhost/storetest"
)

// conformance runs the storetest suite on stores of the shared server with
// the given shard count, the retention checks on stores with the retention
// they ask for.
func conformance(t *testing.T, shards int) {
	storetest.RunWith(t,
		func(t *testing.T) store.Store { return newStore(t, redisstore.WithShards(shards)) },
		storetest.Options{NewRetained: func(t *testing.T, r store.Retention) store.Store {
			return newStore(t, redisstore.WithShards(shards), redisstore.WithRetention(r))
		}})
}

// TestConformance runs the suite with every lobby in one shard, the
// default layout.
func TestConformance(t *testing.T) { conformance(t, 1) }

// TestConformanceSharded runs the suite with lobbies spread over shards,
// the layout for a Redis Cluster.
func TestConformanceSharded(t *testing.T) { conformance(t, 4) }
