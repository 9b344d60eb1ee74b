package redisstore_test

import (
	"testing"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/redisstore"
	"github.com/lobbyhost/lobbyhost/storetest"
)

// TestConformance runs the storetest suite with every lobby in one shard,
// the default layout.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t) })
}

// TestConformanceSharded runs the suite with lobbies spread over shards,
// the layout for a Redis Cluster.
func TestConformanceSharded(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t, redisstore.WithShards(4)) })
}
