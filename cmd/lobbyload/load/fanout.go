package load

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// FanoutConfig configures the fanout scenario.
type FanoutConfig struct {
	// Servers are the base URLs (http://host:port) of server processes
	// sharing one store.
	Servers []string
	// RoomsPerServer rooms have each server as their home.
	RoomsPerServer int
	// Rate is the target of visible changes per second, all rooms together.
	Rate float64
	// Duration of the churn phase.
	Duration time.Duration
	// HomeOnly keeps a room's watcher on its home process only; otherwise
	// every process has a watcher in every room.
	HomeOnly bool
	// Writers bounds the change commands in flight (default 256).
	Writers int
	// SetupConcurrency bounds the sockets being opened at once during setup
	// (default 64).
	SetupConcurrency int
	// Drain is how long to wait, after the last change, for every watcher
	// to have received it (default 10s).
	Drain time.Duration
	// Prefix starts every room ID (default: "load-" and a random number),
	// so that runs on one store do not meet.
	Prefix string
	// Seed for the choice of process per change (default: random).
	Seed uint64
	// Logf, if set, receives progress lines.
	Logf func(format string, args ...any)
}

// op is one visible change sent by the tool. Changes of a room are
// serialised, so the k-th change of a room has revision base+k+1.
type op struct {
	sentAt time.Time
	proc   int
	kind   string // "joined" or "left"
}

type room struct {
	id    string
	idx   int
	home  int
	ready atomic.Bool // base is set

	mu     sync.Mutex
	base   uint64
	ops    []op
	failed bool

	joined    bool
	churn     *websocket.Conn
	churnEnd  chan error
	churnProc int

	watchers []*watcher
}

func (r *room) opsLen() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ops)
}

func (r *room) opAt(v uint64) (op, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v <= r.base || v-r.base > uint64(len(r.ops)) {
		return op{}, false
	}
	return r.ops[v-r.base-1], true
}

// watcher is a socket kept open in a room; its reader goroutine owns
// everything but lastSeen.
type watcher struct {
	room *room
	proc int
	conn *websocket.Conn

	lastSeen atomic.Uint64
	done     chan struct{}
	endErr   error

	states, delivered, setupGaps, gaps, missed, dups, outOfOrder, snapshotJumps, unexpected int
	unexpectedSamples                                                                       []string
	lat                                                                                     [2][]time.Duration // same process, other process
	latSnapshot                                                                             [2][]time.Duration
}

const (
	sameProc  = 0
	crossProc = 1
)

func (w *watcher) ended() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

func (w *watcher) read() {
	defer close(w.done)
	var last uint64
	for {
		_, data, err := w.conn.Read(context.Background())
		if err != nil {
			w.endErr = err
			return
		}
		now := time.Now()
		s, ok := ParseState(data)
		if !ok {
			continue
		}
		w.states++
		v := s.Version
		switch {
		case last == 0:
		case v == last:
			w.dups++
			continue
		case v < last:
			w.outOfOrder++
			continue
		case v > last+1 && s.Reason != ReasonSnapshot && !w.room.ready.Load():
			w.setupGaps++ // among the watchers' own joins, before the churn
		case v > last+1 && s.Reason != ReasonSnapshot:
			w.gaps++
			w.missed += int(v - last - 1)
			w.deliver(v, now, false, s)
		default:
			snap := v > last+1
			if snap {
				w.snapshotJumps++
			}
			for u := last + 1; u <= v; u++ {
				w.deliver(u, now, snap, s)
			}
		}
		last = v
		w.lastSeen.Store(v)
	}
}

func (w *watcher) deliver(v uint64, now time.Time, viaSnapshot bool, s State) {
	if !w.room.ready.Load() {
		return
	}
	o, ok := w.room.opAt(v)
	if !ok {
		w.room.mu.Lock()
		base := w.room.base
		w.room.mu.Unlock()
		if v > base {
			w.unexpected++ // a change the tool did not make
			if len(w.unexpectedSamples) < 3 {
				w.unexpectedSamples = append(w.unexpectedSamples, fmt.Sprintf("%s@%d on process %d: revision %d %s %s (tool's last: %d)",
					w.room.id, v, w.proc, s.Version, s.Reason, s.Subject(), base+uint64(w.room.opsLen())))
			}
		}
		return
	}
	w.delivered++
	k := crossProc
	if o.proc == w.proc {
		k = sameProc
	}
	if viaSnapshot {
		w.latSnapshot[k] = append(w.latSnapshot[k], now.Sub(o.sentAt))
	} else {
		w.lat[k] = append(w.lat[k], now.Sub(o.sentAt))
	}
}

// Fanout runs the fanout scenario and returns its report.
func Fanout(ctx context.Context, c *Client, cfg FanoutConfig) (*Report, error) {
	if len(cfg.Servers) == 0 || cfg.RoomsPerServer <= 0 || cfg.Rate <= 0 || cfg.Duration <= 0 {
		return nil, errors.New("fanout needs servers, rooms per server, a rate and a duration")
	}
	if cfg.Writers <= 0 {
		cfg.Writers = 512
	}
	if cfg.SetupConcurrency <= 0 {
		cfg.SetupConcurrency = 128
	}
	if cfg.Drain <= 0 {
		cfg.Drain = 10 * time.Second
	}
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64()
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "load-" + strconv.FormatUint(cfg.Seed%1_000_000_000, 36) + "-"
	}
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	n := len(cfg.Servers)
	rep := &Report{Scenario: "fanout", Servers: cfg.Servers, RoomsPerServer: cfg.RoomsPerServer,
		Rooms: n * cfg.RoomsPerServer, TargetRate: cfg.Rate, Duration: cfg.Duration.Seconds(),
		HomeOnly: cfg.HomeOnly, Seed: cfg.Seed}

	// Rooms and their watchers.
	rooms := make([]*room, 0, n*cfg.RoomsPerServer)
	for h := range n {
		for i := range cfg.RoomsPerServer {
			rooms = append(rooms, &room{id: fmt.Sprintf("%s%d-%d", cfg.Prefix, h, i), home: h, idx: len(rooms)})
		}
	}
	var all []*watcher
	defer func() {
		for _, w := range all {
			w.conn.CloseNow()
		}
		for _, r := range rooms {
			if r.churn != nil {
				r.churn.CloseNow()
			}
		}
	}()
	start := time.Now()
	sem := make(chan struct{}, cfg.SetupConcurrency)
	var mu sync.Mutex
	var setupErr error
	var wg sync.WaitGroup
	for _, r := range rooms {
		procs := []int{r.home}
		if !cfg.HomeOnly {
			procs = procs[:0]
			for p := range n {
				procs = append(procs, p)
			}
		}
		for _, p := range procs {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				conn, err := c.Join(ctx, cfg.Servers[p], r.id, fmt.Sprintf("w%d.%d", p, r.idx))
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					setupErr = errors.Join(setupErr, fmt.Errorf("watcher in %s on %s: %w", r.id, cfg.Servers[p], err))
					return
				}
				w := &watcher{room: r, proc: p, conn: conn, done: make(chan struct{})}
				r.watchers = append(r.watchers, w)
				all = append(all, w)
				go w.read()
			}()
		}
		mu.Lock()
		stop := setupErr != nil
		mu.Unlock()
		if stop {
			break
		}
	}
	wg.Wait()
	if setupErr != nil {
		return nil, setupErr
	}
	// Settle: every watcher of a room has the room's newest revision.
	settle := time.Now().Add(60 * time.Second)
	for _, r := range rooms {
		for {
			var hi, lo uint64 = 0, ^uint64(0)
			for _, w := range r.watchers {
				v := w.lastSeen.Load()
				hi, lo = max(hi, v), min(lo, v)
			}
			if hi > 0 && hi == lo && hi >= uint64(len(r.watchers)) {
				r.mu.Lock()
				r.base = hi
				r.mu.Unlock()
				r.ready.Store(true)
				break
			}
			if time.Now().After(settle) {
				return nil, fmt.Errorf("room %s: watchers did not agree on a revision within 60s", r.id)
			}
			time.Sleep(10 * time.Millisecond) // polling the readers
		}
	}
	rep.Watchers = len(all)
	rep.SetupSeconds = time.Since(start).Seconds()
	logf("setup: %d rooms, %d watcher sockets in %.1fs", len(rooms), len(all), rep.SetupSeconds)

	before := scrape(ctx, c, cfg.Servers)

	// Churn.
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed+1))
	free := make(chan *room, len(rooms))
	for _, i := range rng.Perm(len(rooms)) {
		free <- rooms[i]
	}
	writers := make(chan struct{}, cfg.Writers)
	var sent, failed, behindTicks atomic.Int64
	var opErrs sync.Map
	var opWG sync.WaitGroup
	churnStart := time.Now()
	tick := time.NewTicker(time.Millisecond)
	dispatched := int64(0)
	for {
		now := <-tick.C
		el := now.Sub(churnStart)
		if el >= cfg.Duration {
			break
		}
		due := int64(el.Seconds()*cfg.Rate) - dispatched
		for ; due > 0; due-- {
			var r *room
			select {
			case r = <-free:
			default:
			}
			if r == nil {
				behindTicks.Add(1)
				break
			}
			select {
			case writers <- struct{}{}:
			default:
				free <- r
				r = nil
			}
			if r == nil {
				behindTicks.Add(1)
				break
			}
			dispatched++
			p := rng.IntN(n)
			opWG.Add(1)
			go func() {
				defer opWG.Done()
				err := change(ctx, c, cfg.Servers, r, p)
				<-writers
				if err != nil {
					failed.Add(1)
					opErrs.Store(err.Error(), true)
					r.mu.Lock()
					r.failed = true
					r.mu.Unlock()
					return // the room's revisions are no longer known: no more changes there
				}
				sent.Add(1)
				free <- r
			}()
		}
	}
	tick.Stop()
	opWG.Wait()
	churnEnd := time.Now()
	rep.ChangesSent = sent.Load()
	rep.ChangesFailed = failed.Load()
	rep.AchievedRate = float64(rep.ChangesSent) / churnEnd.Sub(churnStart).Seconds()
	opErrs.Range(func(k, _ any) bool {
		if len(rep.Errors) < 10 {
			rep.Errors = append(rep.Errors, k.(string))
		}
		return true
	})
	logf("churn: %d changes sent (%.0f/s), %d failed", rep.ChangesSent, rep.AchievedRate, rep.ChangesFailed)

	// Drain: every watcher gets its room's last change.
	drainEnd := time.Now().Add(cfg.Drain)
	for _, r := range rooms {
		r.mu.Lock()
		final := r.base + uint64(len(r.ops))
		r.mu.Unlock()
		for _, w := range r.watchers {
			for w.lastSeen.Load() < final && time.Now().Before(drainEnd) && !w.ended() {
				time.Sleep(5 * time.Millisecond) // polling the reader
			}
		}
	}
	rep.DrainSeconds = time.Since(churnEnd).Seconds()
	after := scrape(ctx, c, cfg.Servers)

	// Watchers the server closed before the end, then close everything and
	// read the watchers' tallies.
	lost := map[string]bool{}
	for _, w := range all {
		if w.ended() {
			rep.WatchersLost++
			lost[fmt.Sprintf("close %d", websocket.CloseStatus(w.endErr))] = true
		}
	}
	for k := range lost {
		rep.WatchersLostBy = append(rep.WatchersLostBy, k)
	}
	sort.Strings(rep.WatchersLostBy)
	for _, w := range all {
		w.conn.CloseNow()
		<-w.done
	}
	var lat, latSnap [2][]time.Duration
	served := make([]int64, n) // changes in rooms a process had a watcher in
	for _, r := range rooms {
		r.mu.Lock()
		nops := len(r.ops)
		r.mu.Unlock()
		for _, w := range r.watchers {
			served[w.proc] += int64(nops)
			rep.Deliveries.Expected += int64(nops)
			rep.Deliveries.Received += int64(w.delivered)
			rep.Deliveries.Gaps += int64(w.gaps)
			rep.Deliveries.SetupGaps += int64(w.setupGaps)
			rep.Deliveries.Missed += int64(w.missed)
			rep.Deliveries.Duplicates += int64(w.dups)
			rep.Deliveries.OutOfOrder += int64(w.outOfOrder)
			rep.Deliveries.SnapshotJumps += int64(w.snapshotJumps)
			rep.Deliveries.Unexpected += int64(w.unexpected)
			for _, u := range w.unexpectedSamples {
				if len(rep.UnexpectedSamples) < 10 {
					rep.UnexpectedSamples = append(rep.UnexpectedSamples, u)
				}
			}
			for k := range 2 {
				lat[k] = append(lat[k], w.lat[k]...)
				latSnap[k] = append(latSnap[k], w.latSnapshot[k]...)
			}
		}
		rep.ChangesRecorded += int64(nops)
	}
	rep.Latency.SameProcess = summarize(lat[sameProc])
	rep.Latency.CrossProcess = summarize(lat[crossProc])
	rep.Latency.SameProcessSnapshot = summarize(latSnap[sameProc])
	rep.Latency.CrossProcessSnapshot = summarize(latSnap[crossProc])

	for p, base := range cfg.Servers {
		pr := ProcessReport{Server: base, ChangesInServedRooms: served[p]}
		b, a := before[p], after[p]
		if b.ok && a.ok {
			pr.StoreCallsMeasured = true
			pr.StoreCalls = map[string]float64{}
			for m, v := range a.calls {
				pr.StoreCalls[m] = v - b.calls[m]
			}
			pr.StoreReads = Reads(a.calls) - Reads(b.calls)
			if rep.ChangesSent > 0 {
				pr.ReadsPerChange = pr.StoreReads / float64(rep.ChangesSent)
			}
			if served[p] > 0 {
				pr.ReadsPerServedChange = pr.StoreReads / float64(served[p])
			}
		} else {
			pr.Note = "no " + StoreCallsMetric + " on /metrics: store reads not measurable"
			if b.err != nil || a.err != nil {
				pr.Note = fmt.Sprintf("scrape failed: %v %v", b.err, a.err)
			}
		}
		rep.Processes = append(rep.Processes, pr)
	}
	return rep, nil
}

// change makes the room's next visible change from process p: the churn
// player joins (upgrade on p) or leaves (a leave on its socket, wherever it
// joined).
func change(ctx context.Context, c *Client, servers []string, r *room, p int) error {
	user := "c." + strconv.Itoa(r.idx) // one user per room: the server allows 8 unused tickets per user
	if !r.joined {
		t, err := c.Ticket(ctx, servers[p], r.id, user)
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.ops = append(r.ops, op{sentAt: time.Now(), proc: p, kind: "joined"})
		r.mu.Unlock()
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		conn, err := c.Dial(dctx, servers[p], t)
		cancel()
		if err != nil {
			return fmt.Errorf("churn join on %s: %w", servers[p], err)
		}
		r.churn, r.churnProc, r.joined = conn, p, true
		r.churnEnd = make(chan error, 1)
		go func() {
			for {
				if _, _, err := conn.Read(context.Background()); err != nil {
					r.churnEnd <- err
					return
				}
			}
		}()
		return nil
	}
	r.mu.Lock()
	r.ops = append(r.ops, op{sentAt: time.Now(), proc: r.churnProc, kind: "left"})
	r.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := r.churn.Write(wctx, websocket.MessageText, []byte(`{"type":"leave"}`)); err != nil {
		// Most likely the server had closed the churn socket: say how.
		select {
		case end := <-r.churnEnd:
			return fmt.Errorf("churn leave: the socket had ended (close %d): %w", websocket.CloseStatus(end), err)
		case <-time.After(time.Second):
			return fmt.Errorf("churn leave: %w", err)
		}
	}
	select {
	case err := <-r.churnEnd:
		if websocket.CloseStatus(err) != 4003 {
			return fmt.Errorf("churn leave: socket ended with close %d (%v), want 4003", websocket.CloseStatus(err), err)
		}
	case <-wctx.Done():
		return errors.New("churn leave: no close 4003 within 30s")
	}
	r.churn.CloseNow()
	r.churn, r.joined = nil, false
	return nil
}

type scrapeResult struct {
	calls map[string]float64
	ok    bool
	err   error
}

func scrape(ctx context.Context, c *Client, servers []string) []scrapeResult {
	out := make([]scrapeResult, len(servers))
	for i, base := range servers {
		calls, ok, err := c.StoreCalls(ctx, base)
		out[i] = scrapeResult{calls, ok && err == nil, err}
	}
	return out
}

func summarize(d []time.Duration) LatencySummary {
	if len(d) == 0 {
		return LatencySummary{}
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	ms := func(x time.Duration) float64 { return float64(x.Microseconds()) / 1000 }
	q := func(f float64) float64 { return ms(d[min(len(d)-1, int(f*float64(len(d))))]) }
	return LatencySummary{Count: int64(len(d)), P50Ms: q(0.50), P99Ms: q(0.99), MaxMs: ms(d[len(d)-1])}
}
