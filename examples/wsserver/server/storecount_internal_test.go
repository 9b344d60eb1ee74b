package server

import (
	"time"

	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// plainStore hides every optional capability of the store it holds.
type plainStore struct{ store.Store }

func TestCountStoreKeepsCapabilities(t *testing.T) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "calls"}, []string{"method"})
	full := countStore(memstore.New(), vec)
	if _, ok := full.(store.Claimer); !ok {
		t.Error("wrapped memstore is not a store.Claimer")
	}
	if _, ok := full.(store.Notifier); !ok {
		t.Error("wrapped memstore is not a store.Notifier")
	}
	plain := countStore(plainStore{memstore.New()}, vec)
	if _, ok := plain.(store.Claimer); ok {
		t.Error("a store without Claim became a store.Claimer")
	}
	if _, ok := plain.(store.Notifier); ok {
		t.Error("a store without notifications became a store.Notifier")
	}
	if _, err := full.Load(t.Context(), "x"); err == nil {
		t.Log("loaded a lobby never written")
	}
	_, _ = full.(store.Claimer).Claim(t.Context(), time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), 1, 1)
	if got := testutil.ToFloat64(vec.WithLabelValues("Load")); got != 1 {
		t.Errorf("Load counted %v times, want 1", got)
	}
	if got := testutil.ToFloat64(vec.WithLabelValues("Claim")); got != 1 {
		t.Errorf("Claim counted %v times, want 1", got)
	}
}
