package server_test

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"
	"github.com/redis/rueidis"

	"github.com/lobbyhost/lobbyhost/examples/wsserver/server"
)

var (
	keyA = []byte(strings.Repeat("a", 32))
	keyB = []byte(strings.Repeat("b", 32))
)

func newSigned(t *testing.T, keys [][]byte, clock clockwork.Clock, used server.Redemptions) *server.SignedTickets {
	t.Helper()
	s, err := server.NewSignedTickets(keys, clock, 30*time.Second, used)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewSignedTicketsRejectsBadConfig(t *testing.T) {
	used := server.NewMemoryRedemptions()
	for name, f := range map[string]func() error{
		"no key": func() error { _, err := server.NewSignedTickets(nil, nil, time.Second, used); return err },
		"short key": func() error {
			_, err := server.NewSignedTickets([][]byte{keyA, keyA[:31]}, nil, time.Second, used)
			return err
		},
		"zero TTL":      func() error { _, err := server.NewSignedTickets([][]byte{keyA}, nil, 0, used); return err },
		"no redemption": func() error { _, err := server.NewSignedTickets([][]byte{keyA}, nil, time.Second, nil); return err },
	} {
		if f() == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// Two instances sharing a key and a Redemptions stand for two processes: a
// ticket one issues, the other accepts, once.
func TestSignedTicketsAcrossInstances(t *testing.T) {
	clock := clockwork.NewFakeClock()
	used := server.NewMemoryRedemptions()
	a := newSigned(t, [][]byte{keyA}, clock, used)
	b := newSigned(t, [][]byte{keyA}, clock, used)
	ctx := context.Background()
	tk, err := a.Issue(ctx, "room", "alice")
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Redeem(ctx, tk.Value)
	if err != nil {
		t.Fatalf("redeem on the other instance: %v", err)
	}
	if got.Room != "room" || got.User != "alice" || !got.Expires.Equal(tk.Expires) {
		t.Errorf("redeemed %+v, want %+v", got, tk)
	}
	for _, s := range []*server.SignedTickets{a, b} {
		if _, err := s.Redeem(ctx, tk.Value); !errors.Is(err, server.ErrTicketUsed) {
			t.Errorf("replay: %v, want ErrTicketUsed", err)
		}
	}
}

func TestSignedTicketsRefusals(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Unix(1_000_000, 0))
	s := newSigned(t, [][]byte{keyA}, clock, server.NewMemoryRedemptions())
	ctx := context.Background()
	issue := func(user string) string {
		tk, err := s.Issue(ctx, "room", user)
		if err != nil {
			t.Fatal(err)
		}
		return tk.Value
	}
	forged, _ := newSigned(t, [][]byte{keyB}, clock, server.NewMemoryRedemptions()).Issue(ctx, "room", "alice")
	tamper := func(v string) string {
		body, sig, _ := strings.Cut(v, ".")
		raw, _ := base64.RawURLEncoding.DecodeString(body)
		raw[len(raw)-1] ^= 1
		return base64.RawURLEncoding.EncodeToString(raw) + "." + sig
	}
	badSig := func(v string) string {
		body, sig, _ := strings.Cut(v, ".")
		raw, _ := base64.RawURLEncoding.DecodeString(sig)
		raw[0] ^= 1
		return body + "." + base64.RawURLEncoding.EncodeToString(raw)
	}
	for _, tt := range []struct {
		name, value string
		want        error
	}{
		{"empty", "", server.ErrTicketUnknown},
		{"no dot", "abc", server.ErrTicketUnknown},
		{"not base64", "!!.!!", server.ErrTicketUnknown},
		{"truncated body", issue("a")[4:], server.ErrTicketUnknown},
		{"another key", forged.Value, server.ErrTicketSignature},
		{"body changed", tamper(issue("b")), server.ErrTicketSignature},
		{"signature changed", badSig(issue("c")), server.ErrTicketSignature},
	} {
		if _, err := s.Redeem(ctx, tt.value); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	v := issue("d")
	clock.Advance(30*time.Second - time.Millisecond)
	w := issue("e")
	if _, err := s.Redeem(ctx, v); err != nil {
		t.Errorf("a millisecond before expiry: %v", err)
	}
	clock.Advance(30 * time.Second)
	if _, err := s.Redeem(ctx, w); !errors.Is(err, server.ErrTicketExpired) {
		t.Errorf("at expiry: %v, want ErrTicketExpired", err)
	}
}

// Rotation: the first key signs, every key verifies; a ticket signed with
// a key that was dropped is refused.
func TestSignedTicketsKeyRotation(t *testing.T) {
	clock := clockwork.NewFakeClock()
	used := server.NewMemoryRedemptions()
	ctx := context.Background()
	old := newSigned(t, [][]byte{keyA}, clock, used)
	both := newSigned(t, [][]byte{keyB, keyA}, clock, used)
	onlyNew := newSigned(t, [][]byte{keyB}, clock, used)
	t1, _ := old.Issue(ctx, "r", "u")
	if _, err := both.Redeem(ctx, t1.Value); err != nil {
		t.Errorf("old key's ticket during rotation: %v", err)
	}
	t2, _ := both.Issue(ctx, "r", "u")
	if _, err := onlyNew.Redeem(ctx, t2.Value); err != nil {
		t.Errorf("rotating process's ticket after the old key is dropped: %v", err)
	}
	t3, _ := old.Issue(ctx, "r", "u")
	if _, err := onlyNew.Redeem(ctx, t3.Value); !errors.Is(err, server.ErrTicketSignature) {
		t.Errorf("dropped key's ticket: %v, want ErrTicketSignature", err)
	}
}

func TestMemoryRedemptionsCollect(t *testing.T) {
	m := server.NewMemoryRedemptions()
	ctx := context.Background()
	now := time.Unix(1000, 0)
	m.Claim(ctx, []byte("a"), now)
	m.Claim(ctx, []byte("b"), now.Add(time.Second))
	m.Collect(now.Add(time.Millisecond))
	if m.Len() != 1 {
		t.Fatalf("%d remembered after collecting one, want 1", m.Len())
	}
	if ok, _ := m.Claim(ctx, []byte("b"), now); ok {
		t.Error("b claimed twice")
	}
}

// claimRace claims one nonce from many goroutines at once; exactly one
// must win.
func claimRace(t *testing.T, r server.Redemptions) {
	t.Helper()
	nonce := []byte(time.Now().String())
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := r.Claim(context.Background(), nonce, time.Now().Add(time.Minute))
			if err != nil {
				t.Error(err)
			}
			if ok {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := wins.Load(); n != 1 {
		t.Errorf("%d of 16 concurrent claims won, want exactly 1", n)
	}
}

func TestRedemptionsClaimOnce(t *testing.T) {
	t.Run("memory", func(t *testing.T) { claimRace(t, server.NewMemoryRedemptions()) })
	t.Run("postgres", func(t *testing.T) {
		dsn := os.Getenv("LOBBYHOST_POSTGRES_DSN")
		if dsn == "" {
			t.Skip("set LOBBYHOST_POSTGRES_DSN to run it")
		}
		ctx := context.Background()
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		schema := "wsredeem_" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
		defer pool.Exec(ctx, `DROP SCHEMA IF EXISTS "`+schema+`" CASCADE`)
		p, err := server.NewPostgresRedemptions(ctx, pool, schema)
		if err != nil {
			t.Fatal(err)
		}
		claimRace(t, p)
		// Collect deletes what was kept long enough, and only that.
		now := time.Now()
		p.Claim(ctx, []byte("old"), now.Add(-time.Second))
		p.Claim(ctx, []byte("new"), now.Add(time.Hour))
		p.Collect(now)
		if ok, _ := p.Claim(ctx, []byte("old"), now.Add(time.Hour)); !ok {
			t.Error("a collected nonce is still recorded")
		}
		if ok, _ := p.Claim(ctx, []byte("new"), now.Add(time.Hour)); ok {
			t.Error("a nonce kept until later was collected")
		}
	})
	t.Run("redis", func(t *testing.T) {
		addr := os.Getenv("LOBBYHOST_REDIS_ADDR")
		if addr == "" {
			t.Skip("set LOBBYHOST_REDIS_ADDR to run it")
		}
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		r, err := server.NewRedisRedemptions(c, "wsredeem-test-"+time.Now().Format("150405.000000")+":")
		if err != nil {
			t.Fatal(err)
		}
		claimRace(t, r)
	})
}
