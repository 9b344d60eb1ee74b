package lobbyotel_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
)

// No span name, attribute, status, event or link and no metric label names
// a player, even when an error's message does: a lobby's whole life, a
// refusal and a store failure whose message carries the player ID.
func TestNoPlayerIDLeaves(t *testing.T) {
	r := newRig(t)
	lifeOfALobby(context.Background(), t, r)
	r.store.set(func(s *faultyStore) { s.fail = fmt.Errorf("write for %s and %s failed", alice, bob) })
	if _, err := r.svc.Join(context.Background(), room, alice, map[string]string{"name": bob}); err == nil || !strings.Contains(err.Error(), alice) {
		t.Fatalf("Join on a failing store: %v; want an error naming the player, for this test to mean anything", err)
	}

	var seen []string
	kvs := func(where string, attrs []attribute.KeyValue) {
		for _, kv := range attrs {
			seen = append(seen, fmt.Sprintf("%s: %s=%s", where, kv.Key, kv.Value.String()))
		}
	}
	spans := r.spans.Ended()
	if len(spans) != 12 {
		t.Fatalf("%d spans, want 12", len(spans))
	}
	for _, s := range spans {
		seen = append(seen, "name: "+s.Name(), "status: "+s.Status().Description)
		kvs(s.Name(), s.Attributes())
		for _, e := range s.Events() {
			seen = append(seen, "event: "+e.Name)
			kvs(s.Name()+" event", e.Attributes)
		}
		for _, l := range s.Links() {
			kvs(s.Name()+" link", l.Attributes)
		}
	}
	for _, l := range r.allLabels(t) {
		seen = append(seen, "metric label: "+l)
	}
	for _, s := range seen {
		for _, player := range []string{alice, bob, "alice", "bob"} {
			if strings.Contains(s, player) {
				t.Errorf("%s names player %q", s, player)
			}
		}
	}
}
