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
	if _, ok := full.(store.BatchWriter); !ok {
		t.Error("wrapped memstore is not a store.BatchWriter")
	}
	plain := countStore(plainStore{memstore.New()}, vec)
	if _, ok := plain.(store.Claimer); ok {
		t.Error("a store without Claim became a store.Claimer")
	}
	if _, ok := plain.(store.Notifier); ok {
		t.Error("a store without notifications became a store.Notifier")
	}
	if _, ok := plain.(store.BatchWriter); ok {
		t.Error("a store without batches became a store.BatchWriter")
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
	errs := full.(store.BatchWriter).WriteBatch(t.Context(), []store.Write{{ID: "a", Data: []byte{1}}, {ID: "b", Data: []byte{1}}})
	if len(errs) != 2 || errs[0] != nil || errs[1] != nil {
		t.Errorf("WriteBatch = %v", errs)
	}
	if got := testutil.ToFloat64(vec.WithLabelValues("WriteBatch")); got != 1 {
		t.Errorf("a batch of two counted %v times, want 1", got)
	}
}
