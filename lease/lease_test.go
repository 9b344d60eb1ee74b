package lease

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestValidity(t *testing.T) {
	d := t0.Add(time.Second)
	tests := []struct {
		name      string
		deadline  time.Time
		at        time.Time
		wantValid bool
	}{
		{"before the deadline", d, d.Add(-time.Nanosecond), true},
		{"at the deadline it has passed", d, d, false},
		{"after the deadline", d, d.Add(time.Nanosecond), false},
		{"no deadline never passes", time.Time{}, d.Add(100 * time.Hour), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Valid(tt.deadline, tt.at); got != tt.wantValid {
				t.Errorf("Valid(%v, %v) = %v, want %v", tt.deadline, tt.at, got, tt.wantValid)
			}
			if got := Passed(tt.deadline, tt.at); got == tt.wantValid {
				t.Errorf("Passed(%v, %v) = %v, want %v", tt.deadline, tt.at, got, !tt.wantValid)
			}
		})
	}
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		name    string
		p       Policy
		wantErr bool
	}{
		{"defaults", DefaultPolicy(), false},
		{"zero TTL disables heartbeats", Policy{Grace: time.Second}, false},
		{"zero grace", Policy{HeartbeatTTL: time.Second}, true},
		{"negative grace", Policy{Grace: -time.Second, HeartbeatTTL: time.Second}, true},
		{"negative TTL", Policy{Grace: time.Second, HeartbeatTTL: -1}, true},
		{"zero value", Policy{}, true},
		{"grace beyond MaxDuration", Policy{Grace: MaxDuration + 1}, true},
		{"TTL beyond MaxDuration", Policy{Grace: time.Second, HeartbeatTTL: MaxDuration + 1}, true},
		{"both at MaxDuration", Policy{Grace: MaxDuration, HeartbeatTTL: MaxDuration}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Validate() = %v, want error: %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidPolicy) {
				t.Errorf("Validate() = %v, want it to wrap ErrInvalidPolicy", err)
			}
		})
	}
}

func TestDeadlines(t *testing.T) {
	p := Policy{Grace: 8 * time.Second, HeartbeatTTL: 15 * time.Second}
	if got, want := p.HeartbeatDeadline(t0), t0.Add(15*time.Second); !got.Equal(want) {
		t.Errorf("HeartbeatDeadline = %v, want %v", got, want)
	}
	if got, want := p.ReconnectDeadline(t0), t0.Add(8*time.Second); !got.Equal(want) {
		t.Errorf("ReconnectDeadline = %v, want %v", got, want)
	}
	p.HeartbeatTTL = 0
	if got := p.HeartbeatDeadline(t0); !got.IsZero() {
		t.Errorf("HeartbeatDeadline with TTL 0 = %v, want the zero time", got)
	}
}

func TestAdvisorSuggestsCoveringGrace(t *testing.T) {
	var a Advisor
	if adv := a.Suggest(0.9); adv.Grace != 0 || adv.Returns != 0 {
		t.Fatalf("empty advisor suggested %+v, want nothing", adv)
	}
	// 90 quick returns around 1 s, 10 slow ones around 20 s.
	for i := 0; i < 90; i++ {
		a.ObserveReturn(time.Second)
	}
	for i := 0; i < 10; i++ {
		a.ObserveReturn(20 * time.Second)
	}
	a.ObserveExpiry()
	p90 := a.Suggest(0.9)
	if p90.Grace < time.Second || p90.Grace > 1250*time.Millisecond {
		t.Errorf("Suggest(0.9).Grace = %v, want within [1s, 1.25s]", p90.Grace)
	}
	p100 := a.Suggest(1)
	if p100.Grace < 20*time.Second || p100.Grace > 25*time.Second {
		t.Errorf("Suggest(1).Grace = %v, want within [20s, 25s]", p100.Grace)
	}
	if p100.Returns != 100 || p100.Expiries != 1 {
		t.Errorf("counts = %d returns, %d expiries; want 100, 1", p100.Returns, p100.Expiries)
	}
	// Out-of-range quantiles are clamped, never a panic.
	if got := a.Suggest(7).Grace; got != p100.Grace {
		t.Errorf("Suggest(7) = %v, want the Suggest(1) value %v", got, p100.Grace)
	}
	if got := a.Suggest(-1).Grace; got > 1250*time.Millisecond {
		t.Errorf("Suggest(-1) = %v, want the smallest observed bucket", got)
	}
}

func ExampleAdvisor() {
	var a Advisor
	for _, gap := range []time.Duration{300 * time.Millisecond, 2 * time.Second, 2500 * time.Millisecond, 4 * time.Second} {
		a.ObserveReturn(gap)
	}
	adv := a.Suggest(0.75)
	fmt.Println(adv.Grace >= 2500*time.Millisecond, adv.Returns)
	// Output: true 4
}
