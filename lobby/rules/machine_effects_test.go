package rules

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func sampleEffects(t *testing.T) []Effects {
	evs := eventsOfEveryReason(t)
	at := time.Date(2026, 12, 1, 12, 0, 0, 5, time.UTC)
	return []Effects{
		{},
		{Events: evs[:1]},
		{Ended: []Ended{{Player: "p-1", Gen: 7, Cause: EndSuperseded, At: at}}},
		{Events: consecutive(evs), Ended: []Ended{
			{Player: "p-1", Gen: 1, Cause: EndClosed, At: at},
			{Player: "p\x00two", Gen: 1 << 62, Cause: EndTimedOut, At: at},
			{Player: "ü", Gen: 3, Cause: EndKicked, At: at},
			{Player: "x", Gen: 4, Cause: EndLeft, At: at},
		}},
	}
}

// consecutive renumbers events so their revisions follow each other, as
// the events of one commit do.
func consecutive(evs []Event) []Event {
	out := make([]Event, len(evs))
	for i, e := range evs {
		e.Revision = uint64(100 + i)
		e.Term = min(e.Term, e.Revision)
		out[i] = e
	}
	return out
}

func TestEffectsRoundTrip(t *testing.T) {
	for i, fx := range sampleEffects(t) {
		data := AppendEffects([]byte("prefix"), &fx)[len("prefix"):]
		got, err := DecodeEffects(data)
		if err != nil {
			t.Fatalf("effects %d: %v", i, err)
		}
		if diff := cmp.Diff(fx, got, cmpState); diff != "" {
			t.Fatalf("effects %d round trip (-want +got):\n%s", i, diff)
		}
		if got.Empty() != (len(fx.Events) == 0 && len(fx.Ended) == 0) {
			t.Fatalf("effects %d: Empty = %v", i, got.Empty())
		}
	}
}

func TestEffectsRefuseCorruption(t *testing.T) {
	fx := sampleEffects(t)[3]
	good := AppendEffects(nil, &fx)
	bad := map[string][]byte{
		"empty":          nil,
		"wrong magic":    append([]byte("LHS"), good[3:]...),
		"future format":  append(append([]byte(effectsMagic), 9), good[4:]...),
		"truncated":      good[:len(good)-1],
		"trailing bytes": append(append([]byte(nil), good...), 0),
	}
	// Events out of revision order.
	swapped := Effects{Events: []Event{fx.Events[1], fx.Events[0]}}
	bad["events out of order"] = AppendEffects(nil, &swapped)
	// An ended connection with generation 0, or an unknown cause.
	bad["generation 0"] = AppendEffects(nil, &Effects{Ended: []Ended{{Player: "p", Cause: EndClosed, At: time.Unix(1, 0)}}})
	bad["unknown cause"] = AppendEffects(nil, &Effects{Ended: []Ended{{Player: "p", Gen: 1, Cause: 99, At: time.Unix(1, 0)}}})
	for name, data := range bad {
		if _, err := DecodeEffects(data); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: DecodeEffects = %v, want ErrCorrupt", name, err)
		}
	}
}

func FuzzDecodeEffects(f *testing.F) {
	for _, fx := range sampleEffects(&testing.T{}) {
		f.Add(AppendEffects(nil, &fx))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fx, err := DecodeEffects(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		// What decodes encodes back to the same value (events of an
		// older format re-encode in the current one).
		again, err := DecodeEffects(AppendEffects(nil, &fx))
		if err != nil {
			t.Fatalf("re-encoded effects do not decode: %v", err)
		}
		if diff := cmp.Diff(fx, again, cmpState); diff != "" {
			t.Fatalf("effects changed by re-encoding:\n%s", diff)
		}
	})
}
