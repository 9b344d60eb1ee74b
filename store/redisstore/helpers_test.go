package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/lobbyhost/lobbyhost/store/redisstore"
)

// The tests that need a server read its address from LOBBYHOST_REDIS_ADDR.
// Without it they skip, except under CI=true, where a missing or unreachable
// server fails them.

const addrEnv = "LOBBYHOST_REDIS_ADDR"

func underCI() bool { return os.Getenv("CI") == "true" }

// unavailable skips the test, or fails it under CI.
func unavailable(t testing.TB, why string) {
	t.Helper()
	if underCI() {
		t.Fatalf("Redis tests cannot run under CI: %s", why)
	}
	t.Skipf("skipping: %s (set %s=127.0.0.1:6379 to run the Redis tests)", why, addrEnv)
}

var shared struct {
	once   sync.Once
	client rueidis.Client
	err    error
}

// sharedClient returns one client for the whole test binary, connected to
// the server named by LOBBYHOST_REDIS_ADDR.
func sharedClient(t testing.TB) rueidis.Client {
	t.Helper()
	addr := os.Getenv(addrEnv)
	if addr == "" {
		unavailable(t, addrEnv+" is not set")
	}
	shared.once.Do(func() {
		shared.client, shared.err = newClient(addr)
	})
	if shared.err != nil {
		unavailable(t, "Redis at "+addr+" is unreachable: "+shared.err.Error())
	}
	return shared.client
}

func newClient(addr string) (rueidis.Client, error) {
	return newClientWith(addr, nil)
}

// newClientWith is newClient with options adjusted by opt, if not nil.
func newClientWith(addr string, opt func(*rueidis.ClientOption)) (rueidis.Client, error) {
	o := rueidis.ClientOption{
		InitAddress:  []string{addr},
		DisableCache: true,
	}
	if opt != nil {
		opt(&o)
	}
	c, err := rueidis.NewClient(o)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// newPrefix returns a key prefix no other test uses.
func newPrefix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "lhtest:" + hex.EncodeToString(b[:])
}

// newStore returns a Store on the shared server in a fresh namespace, and
// deletes the namespace's keys when the test ends.
func newStore(t testing.TB, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	c := sharedClient(t)
	prefix := newPrefix()
	s, err := redisstore.New(c, append([]redisstore.Option{redisstore.WithPrefix(prefix)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { purge(t, c, prefix) })
	return s
}

// purge deletes every key of a prefix with SCAN and DEL.
func purge(t testing.TB, c rueidis.Client, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, key := range scanKeys(t, ctx, c, prefix) {
		if err := c.Do(ctx, c.B().Del().Key(key).Build()).Error(); err != nil {
			t.Errorf("cleanup: DEL %q: %v", key, err)
			return
		}
	}
}

// scanKeys lists every key of a prefix. Test prefixes hold no glob
// characters, so they go into the pattern as they are.
func scanKeys(t testing.TB, ctx context.Context, c rueidis.Client, prefix string) []string {
	t.Helper()
	var keys []string
	var cursor uint64
	for {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match("{"+prefix+":*").Count(1000).Build()).AsScanEntry()
		if err != nil {
			t.Fatalf("SCAN: %v", err)
		}
		keys = append(keys, e.Elements...)
		if e.Cursor == 0 {
			return keys
		}
		cursor = e.Cursor
	}
}

// counting wraps a client and counts the commands sent through Do and
// DoMulti, by name.
type counting struct {
	rueidis.Client
	mu    sync.Mutex
	names []string
}

func (c *counting) record(cmds ...rueidis.Completed) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cmd := range cmds {
		c.names = append(c.names, cmd.Commands()[0])
	}
}

func (c *counting) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.record(cmd)
	return c.Client.Do(ctx, cmd)
}

func (c *counting) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.record(cmds...)
	return c.Client.DoMulti(ctx, cmds...)
}

// take returns the commands sent so far and forgets them.
func (c *counting) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.names
	c.names = nil
	return n
}
