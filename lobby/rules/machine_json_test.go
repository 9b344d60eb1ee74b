package rules

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lobbyhost/lobbyhost/lease"
)

func TestEventJSONRoundTrip(t *testing.T) {
	for _, e := range eventsOfEveryReason(t) {
		data, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("Marshal %s: %v", e.Reason, err)
		}
		if !json.Valid(data) {
			t.Fatalf("invalid JSON: %s", data)
		}
		var got Event
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatalf("Unmarshal %s: %v", data, err)
		}
		if diff := cmp.Diff(e, got, cmpState); diff != "" {
			t.Fatalf("round trip of %s (-want +got):\n%s", data, diff)
		}
	}
}

// TestEventJSONGolden pins the exact bytes of the documented form.
func TestEventJSONGolden(t *testing.T) {
	e := Event{
		Lobby:     "lobby-1",
		Revision:  7,
		Term:      2,
		Host:      "p-23",
		PrevHost:  "",
		Locked:    true,
		Overrides: Overrides{}.WithGrace(1500*time.Millisecond + 250*time.Nanosecond).WithHeartbeatTTL(0).WithMaxMembers(8),
		Members: []MemberView{
			{Player: "p-23", JoinSeq: 2, Status: StatusOnline, Attrs: map[string]string{"team": "red", "role": "say \"hi\"\n"}},
			{Player: "ünï\u2028", JoinSeq: 3, Status: StatusReconnecting, ReconnectDeadline: time.Date(2026, 11, 29, 12, 0, 9, 0, time.UTC)},
		},
		Reason:  ReasonLocked,
		Subject: "",
		At:      time.Date(2026, 11, 29, 12, 0, 3, 500000000, time.UTC),
	}
	const want = `{"lobby":"lobby-1","revision":7,"term":2,"host":"p-23","previous_host":"","reason":"locked","subject":"",` +
		`"at":"2026-11-29T12:00:03.5Z","locked":true,"overrides":{"grace_ms":1500.00025,"heartbeat_ttl_ms":0,"max_members":8},` +
		`"members":[{"player":"p-23","join_seq":2,"status":"online","attrs":{"role":"say \"hi\"\n","team":"red"}},` +
		`{"player":"ünï\u2028","join_seq":3,"status":"reconnecting","reconnect_deadline":"2026-11-29T12:00:09Z"}]}`
	data, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != want {
		t.Fatalf("JSON form changed:\n got %s\nwant %s", data, want)
	}
	var got Event
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(e, got, cmpState); diff != "" {
		t.Fatalf("golden event does not decode back (-want +got):\n%s", diff)
	}

	// An empty lobby has members [], and a lobby without overrides {}.
	data, err = json.Marshal(Event{Lobby: "l", Revision: 1, Reason: ReasonLeft, Subject: "p", At: t0})
	if err != nil {
		t.Fatal(err)
	}
	const empty = `{"lobby":"l","revision":1,"term":0,"host":"","previous_host":"","reason":"left","subject":"p",` +
		`"at":"2026-11-29T12:00:00Z","locked":false,"overrides":{},"members":[]}`
	if string(data) != empty {
		t.Fatalf("empty lobby:\n got %s\nwant %s", data, empty)
	}
}

func TestEventJSONRefusesUnknownValues(t *testing.T) {
	for name, data := range map[string]string{
		"reason":           `{"reason":"exploded"}`,
		"status":           `{"reason":"left","members":[{"player":"a","status":"away"}]}`,
		"override field":   `{"reason":"left","overrides":{"grace":3}}`,
		"override range":   `{"reason":"left","overrides":{"max_members":-1}}`,
		"zero grace":       `{"reason":"left","overrides":{"grace_ms":0}}`,
		"exponent":         `{"reason":"left","overrides":{"grace_ms":1e3}}`,
		"fraction of a ns": `{"reason":"left","overrides":{"grace_ms":1.0000001}}`,
		"fractional cap":   `{"reason":"left","overrides":{"max_members":1.5}}`,
		"string override":  `{"reason":"left","overrides":{"max_members":"3"}}`,
		"too long":         `{"reason":"left","overrides":{"heartbeat_ttl_ms":99999999999999}}`,
	} {
		var e Event
		if err := json.Unmarshal([]byte(data), &e); err == nil {
			t.Errorf("%s: %s decoded as %+v", name, data, e)
		}
	}
	var e Event
	err := json.Unmarshal([]byte(`{"reason":"left","overrides":{"max_members":-1}}`), &e)
	if !errors.Is(err, ErrInvalidPolicy) {
		t.Errorf("out-of-range override: %v, want ErrInvalidPolicy", err)
	}
	if _, err := json.Marshal(Event{Reason: "exploded"}); err == nil {
		t.Error("an event with an unknown reason was encoded")
	}
	if _, err := json.Marshal(MemberView{Player: "a"}); err == nil {
		t.Error("a member view without a status was encoded")
	}
}

func TestOverridesJSON(t *testing.T) {
	for _, o := range []Overrides{
		{},
		Overrides{}.WithGrace(time.Nanosecond),
		Overrides{}.WithGrace(lease.MaxDuration).WithHeartbeatTTL(lease.MaxDuration - time.Nanosecond),
		Overrides{}.WithHeartbeatTTL(0).WithMaxMembers(0).WithMaxConnectionsPerPlayer(0),
		Overrides{}.WithHeartbeatTTL(1234567 * time.Microsecond).WithMaxConnectionsPerPlayer(3),
		Overrides{}.WithMaxBlocks(MaxBlocksLimit).WithMaxMembers(2),
	} {
		data, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		var got Overrides
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatalf("Unmarshal %s: %v", data, err)
		}
		if got != o {
			t.Fatalf("%s decoded as %+v, want %+v", data, got, o)
		}
	}
	if data, _ := json.Marshal(Overrides{}.WithMaxBlocks(7)); string(data) != `{"max_blocks":7}` {
		t.Fatalf("block bound: %s", data)
	}
	o := Overrides{}.WithMaxMembers(3)
	if err := json.Unmarshal([]byte(`null`), &o); err != nil || !o.IsZero() {
		t.Fatalf("null: %+v, %v", o, err)
	}
	if err := json.Unmarshal([]byte(` { "max_members" : 4 , "grace_ms" : 250 } `), &o); err != nil ||
		o != (Overrides{}.WithMaxMembers(4).WithGrace(250*time.Millisecond)) {
		t.Fatalf("spaced: %+v, %v", o, err)
	}
}

// FuzzEventJSON: decoding any input never panics, and whatever decodes
// and encodes again decodes to the same event.
func FuzzEventJSON(f *testing.F) {
	for _, e := range eventsOfEveryReason(&testing.T{}) {
		data, err := json.Marshal(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"overrides":{"grace_ms":1.5}}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"reason":"left","at":"9999-12-31T23:00:00-02:00"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var o Overrides
		_ = o.UnmarshalJSON(data) // never panics on its own either
		var e Event
		if err := json.Unmarshal(data, &e); err != nil {
			return
		}
		again, err := json.Marshal(e)
		if err != nil {
			return // e.g. a member without a status, or no reason
		}
		if !json.Valid(again) {
			t.Fatalf("invalid JSON: %s", again)
		}
		var e2 Event
		if err := json.Unmarshal(again, &e2); err != nil {
			t.Fatalf("re-encoded event %s does not decode: %v", again, err)
		}
		if diff := cmp.Diff(e, e2, cmpState); diff != "" {
			t.Fatalf("re-encoding changed the event (-first +second):\n%s", diff)
		}
	})
}
