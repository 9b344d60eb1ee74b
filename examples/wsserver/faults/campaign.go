package faults

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lobbyhost/lobbyhost/examples/wsserver/faults/history"
)

// Faults a campaign can schedule.
const (
	FaultStoreCut     = history.StoreCut
	FaultClientCut    = history.ClientCut
	FaultPause        = history.Pause
	FaultKill         = history.Kill
	FaultStoreRestart = "store-restart"
	FaultNetem        = "netem"  // delay and loss on one process's client link
	FaultDouble       = "double" // two of the process faults at once, on two processes
)

// ShortEpisodes is the short campaign: every fault once, and one double.
var ShortEpisodes = []string{FaultStoreCut, FaultClientCut, FaultPause, FaultKill, FaultNetem, FaultStoreRestart, FaultDouble}

// Config is one campaign on one store.
type Config struct {
	Store       string // "postgres" or "redis"
	Bin         string // the example server binary
	Dir         string // a scratch directory
	PostgresDSN string // for -store postgres: reached from the root namespace
	RedisPort   int    // for -store redis: the port of the harness's own redis-server
	Seed        uint64
	// Episodes lists the faults in order; with none, random faults are
	// drawn until Duration has passed.
	Episodes []string
	Duration time.Duration
	// PostgresRestart, if set, is a shell command that restarts the
	// PostgreSQL server; without it the store restart is skipped on
	// PostgreSQL (the server is shared).
	PostgresRestart string
	// Break selects deliberately broken client paths, to show that the
	// checker catches them: "revision" (the client loses some states),
	// "fence" (the fenced resource checks nothing and a former host keeps
	// acting with its old term).
	Break map[string]bool
	TTL   time.Duration // heartbeat (and session) TTL of the servers
	Grace time.Duration
	Logf  func(format string, args ...any)
}

// Episode is one fault as it ran.
type Episode struct {
	Kind    string
	Procs   []int
	From    time.Time
	Healed  time.Time
	Detail  string
	Skipped string // why it did not run, if it did not
}

// Ops counts what the driver did.
type Ops struct {
	Joins, Closes, Tabs, Transfers, Kicks, Reconnects, Actions, DialFailures atomic.Int64
}

func (o *Ops) String() string {
	return fmt.Sprintf("joins %d, closes %d, second tabs %d, transfers %d, kicks %d, reconnects %d, fenced actions %d, failed dials %d",
		o.Joins.Load(), o.Closes.Load(), o.Tabs.Load(), o.Transfers.Load(), o.Kicks.Load(), o.Reconnects.Load(), o.Actions.Load(), o.DialFailures.Load())
}

// Total is every operation the driver started.
func (o *Ops) Total() int64 {
	return o.Joins.Load() + o.Closes.Load() + o.Tabs.Load() + o.Transfers.Load() + o.Kicks.Load() + o.Reconnects.Load() + o.Actions.Load()
}

// Result is a campaign's history, the bounds it was held to and what the
// checker said.
type Result struct {
	Store    string
	Seed     uint64
	History  history.History
	Bounds   history.Bounds
	Report   history.Report
	Episodes []Episode
	Ops      *Ops
	Took     time.Duration
	Offsets  []time.Duration // each process's clock offset (the last one it ran with)
}

// Bounds are the limits the checks use for servers with the given TTL and
// grace: a lost member must be shown gone within one TTL plus the ping
// interval and 2 s of propagation; a cut-off process must close its
// sockets within one TTL and 2 s; a lobby converges within TTL + grace +
// 3 s of a heal (a stale socket is closed, its client reconnects).
func DefaultBounds(ttl, grace time.Duration) history.Bounds {
	return history.Bounds{
		Ghost:       ttl + ttl/3 + 2*time.Second,
		StopServing: ttl + 2*time.Second,
		Converge:    ttl + grace + 3*time.Second,
	}
}

// campaign is one run's moving parts.
type campaign struct {
	cfg   Config
	logf  func(string, ...any)
	net   *Net
	procs []*Proc
	fwd   []*forwarder
	redis *redisServer
	fence *Fence
	ops   *Ops

	rmu sync.Mutex
	rng *mrand.Rand

	lobbies []string
	players []string

	mu      sync.Mutex
	socks   []*sock
	outages []history.Outage
	convs   []history.Convergence
	quiet   atomic.Bool // the driver holds its scripted operations
	stopped atomic.Bool
	wg      sync.WaitGroup
	schema  string
}

func (c *campaign) intn(n int) int {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	return c.rng.IntN(n)
}

func (c *campaign) dur(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(c.intn(int(hi-lo)+1))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Run runs one campaign and checks its history.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.TTL == 0 {
		cfg.TTL = 3 * time.Second
	}
	if cfg.Grace == 0 {
		cfg.Grace = 4 * time.Second
	}
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	c := &campaign{cfg: cfg, logf: logf, fence: &Fence{Unchecked: cfg.Break["fence"]}, ops: &Ops{},
		rng: mrand.New(mrand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}
	start := time.Now()
	defer c.teardown()
	if err := c.setup(ctx); err != nil {
		return nil, err
	}
	for i := range 4 {
		c.lobbies = append(c.lobbies, fmt.Sprintf("lobby%d-%s", i, randomHex(3)))
	}
	c.players = []string{"ann", "bob", "cat", "dan", "eve", "fay"}
	// Every lobby starts with one member on each process.
	for _, l := range c.lobbies {
		for i, p := range c.procs {
			if _, err := c.open(p, l, c.players[i]); err != nil {
				return nil, fmt.Errorf("first members: %w", err)
			}
		}
	}
	c.wg.Add(2)
	go c.drive()
	go c.act()

	var eps []Episode
	bounds := DefaultBounds(cfg.TTL, cfg.Grace)
	deadline := start.Add(cfg.Duration)
	for i := 0; ; i++ {
		var kind string
		if cfg.Episodes != nil {
			if i >= len(cfg.Episodes) {
				break
			}
			kind = cfg.Episodes[i]
		} else {
			if time.Now().After(deadline) {
				break
			}
			all := append(slices.Clone(ShortEpisodes), FaultStoreCut, FaultPause, FaultDouble)
			kind = all[c.intn(len(all))]
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c.sleep(c.dur(1500*time.Millisecond, 3*time.Second)) // calm driving
		ep := c.episode(kind)
		logf("%s: episode %d %s on %v: %s%s", cfg.Store, i, ep.Kind, ep.Procs, ep.Detail, skipped(ep.Skipped))
		if ep.Skipped == "" {
			c.converge(ep.Healed, bounds.Converge)
		}
		eps = append(eps, ep)
	}
	c.sleep(time.Second)
	c.mu.Lock()
	c.stopped.Store(true) // under mu: no reconnect is added to wg after this
	c.mu.Unlock()
	c.wg.Wait()
	end := time.Now()
	h := c.history(end)
	res := &Result{Store: cfg.Store, Seed: cfg.Seed, History: h, Bounds: bounds, Report: history.Check(h, bounds),
		Episodes: eps, Ops: c.ops, Took: end.Sub(start)}
	for _, p := range c.procs {
		res.Offsets = append(res.Offsets, p.Offset)
	}
	dropped := 0
	for _, s := range c.all() {
		if s != nil {
			s.mu.Lock()
			dropped += s.dropped
			s.mu.Unlock()
		}
	}
	if dropped > 0 {
		logf("%s: the broken client path left out %d states", cfg.Store, dropped)
	}
	return res, nil
}

func skipped(s string) string {
	if s == "" {
		return ""
	}
	return " (skipped: " + s + ")"
}

func (c *campaign) sleep(d time.Duration) { time.Sleep(d) }

func (c *campaign) setup(ctx context.Context) error {
	nt, err := NewNet(3)
	if err != nil {
		return err
	}
	c.net = nt
	var storeArgs []string
	var target string
	switch c.cfg.Store {
	case "redis":
		dir, err := os.MkdirTemp(c.cfg.Dir, "redis")
		if err != nil {
			return err
		}
		if c.redis, err = startRedis(dir, c.cfg.RedisPort); err != nil {
			return err
		}
		target = c.redis.addr()
	case "postgres":
		schema := "lhfaults_" + randomHex(4)
		c.cfg.PostgresDSN = strings.TrimSpace(c.cfg.PostgresDSN)
		storeArgs = []string{"-store", "postgres", "-postgres-schema", schema}
		target = "127.0.0.1:5432"
		c.schema = schema
	default:
		return fmt.Errorf("store %q: want postgres or redis", c.cfg.Store)
	}
	keys := randomHex(32)
	for i := range 3 {
		sl := nt.Store[i]
		port := 15432
		if c.cfg.Store == "redis" {
			port = 16390
		}
		f, err := newForwarder(fmt.Sprintf("%s:%d", sl.RootAddr, port), target)
		if err != nil {
			return err
		}
		c.fwd = append(c.fwd, f)
		args := []string{"-log-level", "warn", "-grace", c.cfg.Grace.String(), "-heartbeat-ttl", c.cfg.TTL.String(),
			"-max-tabs", "1", "-ticket-keys", keys, "-shutdown-wait", "3s"}
		switch c.cfg.Store {
		case "redis":
			args = append(args, "-store", "redis", "-redis-addr", f.Addr(), "-redis-prefix", "lhf:")
		case "postgres":
			dsn, err := redirectDSN(c.cfg.PostgresDSN, f.Addr())
			if err != nil {
				return err
			}
			args = append(args, append(storeArgs, "-postgres-dsn", dsn)...)
		}
		p := &Proc{Idx: i, ns: nt.NS[i], addr: nt.Client[i].PeerAddr + ":8080", bin: c.cfg.Bin, args: args}
		if i == 2 {
			p.Offset = c.offset()
		}
		if err := p.start(); err != nil {
			return err
		}
		c.procs = append(c.procs, p)
	}
	for _, p := range c.procs {
		if err := p.healthy(ctx); err != nil {
			return err
		}
	}
	c.logf("%s: 3 processes up in namespaces %v; process 2's clock is off by %v", c.cfg.Store, nt.NS, c.procs[2].Offset)
	return nil
}

// offset draws a clock offset of 200 ms to 1 s, ahead or behind.
func (c *campaign) offset() time.Duration {
	d := c.dur(200*time.Millisecond, time.Second).Round(time.Millisecond)
	if c.intn(2) == 0 {
		d = -d
	}
	return d
}

// redirectDSN points a PostgreSQL URL at addr.
func redirectDSN(dsn, addr string) (string, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return "", err
	}
	cc := cfg.ConnConfig
	host, port, _ := strings.Cut(addr, ":")
	u := fmt.Sprintf("postgres://%s@%s:%s/%s?sslmode=disable&connect_timeout=2", cc.User, host, port, cc.Database)
	return u, nil
}

func (c *campaign) teardown() {
	for _, p := range c.procs {
		p.Stop(5 * time.Second)
	}
	for _, s := range c.all() {
		if s != nil {
			s.conn.CloseNow()
		}
	}
	for _, f := range c.fwd {
		f.Close()
	}
	if c.net != nil {
		if err := c.net.Close(); err != nil {
			c.logf("cleaning up namespaces: %v", err)
		}
	}
	if c.redis != nil {
		c.redis.kill()
		_ = os.RemoveAll(c.redis.dir)
	}
	if c.schema != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if pool, err := pgxpool.New(ctx, c.cfg.PostgresDSN); err == nil {
			if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS "`+c.schema+`" CASCADE`); err != nil {
				c.logf("dropping schema %s: %v", c.schema, err)
			}
			pool.Close()
		}
	}
}

func (c *campaign) all() []*sock {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.socks)
}

// open opens a socket on p, with a ticket from another process that is up.
func (c *campaign) open(p *Proc, lobby, player string) (*sock, error) {
	issuer := p
	for _, j := range c.perm(len(c.procs)) {
		if q := c.procs[j]; q != p && q.Up() {
			issuer = q
			break
		}
	}
	c.mu.Lock()
	id := len(c.socks)
	c.socks = append(c.socks, nil) // reserve the id
	c.mu.Unlock()
	s, err := dial(issuer, p, lobby, player, id, dialOpts{
		silence:      c.cfg.TTL,
		dropRevision: c.cfg.Break["revision"],
		onEnd:        c.ended,
	})
	c.mu.Lock()
	c.socks[id] = s
	c.mu.Unlock()
	if err != nil {
		c.ops.DialFailures.Add(1)
	}
	return s, err
}

func (c *campaign) perm(n int) []int {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	return c.rng.Perm(n)
}

// openAnywhere tries the processes that are up, in random order.
func (c *campaign) openAnywhere(lobby, player string, not *Proc) (*sock, error) {
	var errs []error
	for _, j := range c.perm(len(c.procs)) {
		p := c.procs[j]
		if p == not || !p.Up() {
			continue
		}
		s, err := c.open(p, lobby, player)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
		if c.stopped.Load() {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// noReconnect are the close codes after which a client does not come back.
var noReconnect = map[int]bool{4002: true, 4003: true, 4009: true, 4010: true, 4011: true, 4012: true}

// ended is called when a socket ends: a client whose socket the server or
// the network ended reconnects (three times in four), after a short pause,
// to any process that is up.
func (c *campaign) ended(s *sock) {
	s.mu.Lock()
	byClient, why, code, attached := s.byClient, s.why, s.code, len(s.states) > 0
	s.mu.Unlock()
	if !attached {
		return // never attached: the driver's own attempt, already counted
	}
	if c.stopped.Load() || (byClient && why != "silent server") || noReconnect[code] || c.intn(4) == 0 {
		return
	}
	c.mu.Lock()
	if c.stopped.Load() {
		c.mu.Unlock()
		return
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		time.Sleep(c.dur(200*time.Millisecond, 1500*time.Millisecond))
		if c.stopped.Load() || c.hasSocket(s.lobby, s.player) {
			return
		}
		c.ops.Reconnects.Add(1)
		_, _ = c.openAnywhere(s.lobby, s.player, nil)
	}()
}

func (c *campaign) live(lobby string) []*sock {
	var out []*sock
	for _, s := range c.all() {
		if s == nil || s.ended() || s.lobby != lobby {
			continue
		}
		s.mu.Lock()
		ok := !s.byClient && len(s.states) > 0
		s.mu.Unlock()
		if ok {
			out = append(out, s)
		}
	}
	return out
}

func (c *campaign) hasSocket(lobby, player string) bool {
	for _, s := range c.live(lobby) {
		if s.player == player {
			return true
		}
	}
	return false
}

// drive plays the scripted-random operations until the campaign stops.
func (c *campaign) drive() {
	defer c.wg.Done()
	for !c.stopped.Load() {
		time.Sleep(c.dur(120*time.Millisecond, 350*time.Millisecond))
		if c.quiet.Load() || c.stopped.Load() {
			continue
		}
		c.step()
	}
}

func (c *campaign) step() {
	lobby := c.lobbies[c.intn(len(c.lobbies))]
	live := c.live(lobby)
	pick := func() *sock { return live[c.intn(len(live))] }
	host := func() *sock {
		for _, s := range live {
			if st, ok := s.last(); ok && st.Host == s.player {
				return s
			}
		}
		return nil
	}
	switch a := c.intn(100); {
	case a < 30: // a player with no socket joins
		var free []string
		for _, p := range c.players {
			if !c.hasSocket(lobby, p) {
				free = append(free, p)
			}
		}
		if len(free) == 0 {
			return
		}
		c.ops.Joins.Add(1)
		_, _ = c.openAnywhere(lobby, free[c.intn(len(free))], nil)
	case a < 42: // a client closes its socket
		if len(live) <= 2 {
			return
		}
		c.ops.Closes.Add(1)
		pick().closeBy("closed by the client", true)
	case a < 54: // a second tab on another process supersedes the first
		if len(live) == 0 {
			return
		}
		s := pick()
		c.ops.Tabs.Add(1)
		_, _ = c.openAnywhere(lobby, s.player, s.proc)
	case a < 72: // the host hands the role to another online member
		h := host()
		if h == nil {
			return
		}
		st, _ := h.last()
		var to []string
		for _, m := range st.Members {
			if m.Online && m.ID != h.player {
				to = append(to, m.ID)
			}
		}
		if len(to) == 0 {
			return
		}
		c.ops.Transfers.Add(1)
		_ = h.send(map[string]string{"type": "host.transfer", "to": to[c.intn(len(to))]})
	case a < 80: // the host kicks another member
		h := host()
		if h == nil || len(live) <= 3 {
			return
		}
		st, _ := h.last()
		var to []string
		for _, m := range st.Members {
			if m.ID != h.player {
				to = append(to, m.ID)
			}
		}
		if len(to) == 0 {
			return
		}
		c.ops.Kicks.Add(1)
		_ = h.send(map[string]any{"type": "kick", "target": to[c.intn(len(to))]})
	}
}

// act makes every socket whose last state names its player host act on
// the fenced resource with that state's term, every 200 ms.
func (c *campaign) act() {
	defer c.wg.Done()
	for !c.stopped.Load() {
		time.Sleep(200 * time.Millisecond)
		for _, s := range c.all() {
			if s == nil || s.ended() {
				continue
			}
			st, ok := s.last()
			if !ok {
				continue
			}
			term := uint64(0)
			if st.Host == s.player {
				term = st.Term
			} else if c.cfg.Break["fence"] {
				s.mu.Lock()
				term = s.hostTerm // the broken client acts on what it once was
				s.mu.Unlock()
			}
			if term == 0 {
				continue
			}
			c.ops.Actions.Add(1)
			c.fence.Act(s.lobby, s.player, term, time.Now())
		}
	}
}

// pickProcs draws n distinct processes that are up.
func (c *campaign) pickProcs(n int) []*Proc {
	var out []*Proc
	for _, j := range c.perm(len(c.procs)) {
		if c.procs[j].Up() && len(out) < n {
			out = append(out, c.procs[j])
		}
	}
	return out
}

func (c *campaign) outage(p *Proc, kind string, from, to time.Time) {
	c.mu.Lock()
	c.outages = append(c.outages, history.Outage{Proc: p.Idx, Kind: kind, From: from, To: to})
	c.mu.Unlock()
}

// episode runs one fault and heals it.
func (c *campaign) episode(kind string) Episode {
	ep := Episode{Kind: kind, From: time.Now()}
	ttl := c.cfg.TTL
	switch kind {
	case FaultDouble:
		ps := c.pickProcs(2)
		kinds := []string{FaultStoreCut, FaultPause, FaultClientCut, FaultKill}
		k0, k1 := kinds[c.intn(len(kinds))], kinds[c.intn(len(kinds))]
		var wg sync.WaitGroup
		var details [2]string
		for i, k := range []string{k0, k1} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i == 1 {
					time.Sleep(c.dur(0, ttl)) // overlapping, not simultaneous
				}
				details[i] = c.processFault(k, ps[i])
			}()
		}
		wg.Wait()
		ep.Procs = []int{ps[0].Idx, ps[1].Idx}
		ep.Detail = k0 + ": " + details[0] + "; " + k1 + ": " + details[1]
	case FaultStoreRestart:
		ep.Detail, ep.Skipped = c.storeRestart()
	case FaultNetem:
		p := c.pickProcs(1)[0]
		ep.Procs = []int{p.Idx}
		hold := c.dur(2*ttl, 3*ttl)
		how, err := c.net.Client[p.Idx].Degrade()
		if err != nil {
			ep.Detail = "degrading the link: " + err.Error()
			break
		}
		time.Sleep(hold)
		_ = c.net.Client[p.Idx].Heal()
		ep.Detail = fmt.Sprintf("client link %s for %v", how, hold.Round(time.Millisecond))
	default:
		p := c.pickProcs(1)[0]
		ep.Procs = []int{p.Idx}
		ep.Detail = c.processFault(kind, p)
	}
	ep.Healed = time.Now()
	return ep
}

// processFault runs one fault on one process and heals it; it returns what
// it did.
func (c *campaign) processFault(kind string, p *Proc) string {
	ttl := c.cfg.TTL
	switch kind {
	case FaultStoreCut, FaultClientCut:
		link := c.net.Store[p.Idx]
		if kind == FaultClientCut {
			link = c.net.Client[p.Idx]
		}
		hold := c.dur(ttl+ttl/2, 3*ttl) // past the session TTL
		from := time.Now()
		how, err := link.Cut()
		if err != nil {
			return "cut: " + err.Error()
		}
		time.Sleep(hold)
		if err := link.Heal(); err != nil {
			return "heal: " + err.Error()
		}
		c.outage(p, kind, from, time.Now())
		return fmt.Sprintf("process %d cut for %v (%s)", p.Idx, hold.Round(time.Millisecond), how)
	case FaultPause:
		hold := c.dur(ttl+ttl/2, 3*ttl)
		from := time.Now()
		if err := p.Pause(); err != nil {
			return "pause: " + err.Error()
		}
		time.Sleep(hold)
		if err := p.Resume(); err != nil {
			return "resume: " + err.Error()
		}
		c.outage(p, kind, from, time.Now())
		return fmt.Sprintf("process %d paused for %v", p.Idx, hold.Round(time.Millisecond))
	case FaultKill:
		from := time.Now()
		if err := p.Kill(); err != nil {
			return "kill: " + err.Error()
		}
		time.Sleep(c.dur(ttl, 2*ttl))
		if p.Idx == 2 {
			p.Offset = c.offset()
		}
		err := p.start()
		if err == nil {
			err = p.healthy(context.Background())
		}
		c.outage(p, kind, from, time.Now())
		if err != nil {
			return "restart: " + err.Error()
		}
		return fmt.Sprintf("process %d killed, started again after %v (clock offset %v)", p.Idx, time.Since(from).Round(time.Millisecond), p.Offset)
	}
	return "unknown fault " + kind
}

// storeRestart restarts the store under every process. It returns what it
// did, or why it did nothing.
func (c *campaign) storeRestart() (done, skipped string) {
	switch {
	case c.redis != nil:
		from := time.Now()
		c.redis.kill()
		time.Sleep(c.dur(500*time.Millisecond, 2*time.Second))
		if err := c.redis.start(); err != nil {
			return "redis restart: " + err.Error(), ""
		}
		return fmt.Sprintf("redis-server killed (SIGKILL) and started again on its append-only file after %v", time.Since(from).Round(time.Millisecond)), ""
	case c.cfg.PostgresRestart != "":
		from := time.Now()
		out, err := exec.Command("sh", "-c", c.cfg.PostgresRestart).CombinedOutput()
		if err != nil {
			return fmt.Sprintf("postgres restart: %v: %s", err, out), ""
		}
		return fmt.Sprintf("PostgreSQL restarted (%s) in %v", c.cfg.PostgresRestart, time.Since(from).Round(time.Millisecond)), ""
	}
	return "", "the PostgreSQL server is shared; set LOBBYHOST_FAULTS_PG_RESTART to a restart command to include it"
}

// converge holds the scripted operations (reconnects and host actions go
// on) and waits until, in every lobby, every process reads the same
// revision and every open socket shows it. It records each lobby's time.
func (c *campaign) converge(healed time.Time, bound time.Duration) {
	c.quiet.Store(true)
	defer c.quiet.Store(false)
	wait := bound + 10*time.Second // past the bound, to measure by how much
	pending := map[string]bool{}
	for _, l := range c.lobbies {
		pending[l] = true
	}
	detail := map[string]string{}
	for len(pending) > 0 && time.Since(healed) < wait {
		for _, l := range c.lobbies {
			if !pending[l] {
				continue
			}
			ok, why := c.converged(l)
			if ok {
				delete(pending, l)
				c.mu.Lock()
				c.convs = append(c.convs, history.Convergence{Lobby: l, HealedAt: healed, ConvergedAt: time.Now()})
				c.mu.Unlock()
			} else {
				detail[l] = why
			}
		}
		time.Sleep(100 * time.Millisecond) // polling the processes and the recorded streams
	}
	keys := make([]string, 0, len(pending))
	for l := range pending {
		keys = append(keys, l)
	}
	sort.Strings(keys)
	for _, l := range keys {
		c.mu.Lock()
		c.convs = append(c.convs, history.Convergence{Lobby: l, HealedAt: healed, Detail: detail[l]})
		c.mu.Unlock()
	}
}

func (c *campaign) converged(lobby string) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var rev uint64
	for i, p := range c.procs {
		if !p.Up() {
			return false, fmt.Sprintf("process %d is not up", p.Idx)
		}
		r, err := snapshot(ctx, p, lobby)
		if err != nil {
			return false, err.Error()
		}
		if i > 0 && r != rev {
			return false, fmt.Sprintf("processes read revisions %d and %d", rev, r)
		}
		rev = r
	}
	for _, s := range c.live(lobby) {
		st, _ := s.last()
		if st.Revision != rev {
			return false, fmt.Sprintf("%v shows revision %d, the lobby is at %d", s, st.Revision, rev)
		}
	}
	return true, ""
}

// history assembles everything recorded.
func (c *campaign) history(end time.Time) history.History {
	h := history.History{Actions: c.fence.Log(), End: end}
	for _, s := range c.all() {
		if s != nil {
			h.Sockets = append(h.Sockets, s.record())
		}
	}
	c.mu.Lock()
	h.Outages = slices.Clone(c.outages)
	h.Convergences = slices.Clone(c.convs)
	c.mu.Unlock()
	return h
}
