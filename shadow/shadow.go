package shadow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/store"
)

// ErrInvalidConfig is returned (wrapped) by New for a bad Config.
var ErrInvalidConfig = errors.New("shadow: invalid config")

// Config configures a Shadow. The zero Config is usable: the real clock, a
// zero Switch (legacy authoritative everywhere), nothing published, no log.
type Config struct {
	// Clock is read for the time of evidence and given to the Service
	// (default: the real clock). Do not pass lobby.WithClock as well.
	Clock clockwork.Clock
	// Switch decides which side is authoritative per lobby (default: a
	// zero Switch, legacy everywhere).
	Switch *Switch
	// Publisher receives lobbyhost's events of the lobbies the Switch makes
	// lobbyhost-authoritative, through the Service's relay (run
	// Service().Run). Nil: nothing is published. Do not pass
	// lobby.WithPublisher as well.
	Publisher lobby.Publisher
	// Logger receives one line at Warn per recorded disagreement (default:
	// discard). Player IDs in it are pseudonyms.
	Logger *slog.Logger
	// Samples is how many decision-log lines the report keeps per class
	// (default 5; the first ones seen).
	Samples int
	// Timeline is how many entries are kept per lobby, newest last
	// (default 64).
	Timeline int
	// Lobbies is how many lobbies with disagreements keep their timeline
	// for the report (default 20; the first ones to disagree).
	Lobbies int
}

// Shadow runs a lobby.Service beside legacy host logic and compares their
// decisions. It is safe for concurrent use.
type Shadow struct {
	svc    *lobby.Service
	clock  clockwork.Clock
	sw     *Switch
	log    *slog.Logger
	ttl    time.Duration
	grace  time.Duration
	cfg    Config
	mu     sync.Mutex
	lobbs  map[string]*lobbyState
	kept   int // lobbies whose timeline is kept for the report
	counts [numClasses]uint64
	compar uint64
	sample [numClasses][]string
}

// New returns a Shadow over a new lobby.Service on st. opts configure the
// Service (policy, pseudonym key, decision logger, observer...); the clock
// and publisher come from cfg, and New sets them after opts.
func New(st store.Store, cfg Config, opts ...lobby.Option) (*Shadow, error) {
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Switch == nil {
		cfg.Switch = &Switch{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Samples < 0 || cfg.Timeline < 0 || cfg.Lobbies < 0 {
		return nil, fmt.Errorf("%w: negative Samples, Timeline or Lobbies", ErrInvalidConfig)
	}
	if cfg.Samples == 0 {
		cfg.Samples = 5
	}
	if cfg.Timeline == 0 {
		cfg.Timeline = 64
	}
	if cfg.Lobbies == 0 {
		cfg.Lobbies = 20
	}
	all := append(append([]lobby.Option(nil), opts...),
		lobby.WithClock(cfg.Clock),
		lobby.WithPublisher(cfg.Switch.Publisher(cfg.Publisher)))
	svc, err := lobby.NewService(st, all...)
	if err != nil {
		return nil, err
	}
	p := svc.Policy()
	return &Shadow{
		svc:   svc,
		clock: cfg.Clock,
		sw:    cfg.Switch,
		log:   cfg.Logger,
		ttl:   p.HeartbeatTTL,
		grace: p.Grace,
		cfg:   cfg,
		lobbs: make(map[string]*lobbyState),
	}, nil
}

// Service returns the Service the Shadow drives: run its Run loop (expiries,
// and the relay that drops or publishes events), read Snapshots from it.
// Commands sent to it directly bypass the Shadow's evidence.
func (s *Shadow) Service() *lobby.Service { return s.svc }

// Switch returns the Shadow's Switch.
func (s *Shadow) Switch() *Switch { return s.sw }

// conn is one generation as the evidence shows it: kept from its join
// until its close (or its player's Leave); one that timed out stays, since
// it explains a legacy logic that still counts it.
type conn struct {
	player   string
	deadline time.Time // heartbeat deadline; zero under TTL 0
}

// closeRec is a player's last reported close.
type closeRec struct {
	gen   uint64
	at    time.Time
	stale bool // a newer generation of the same player existed when it arrived
	// wasHost: the player hosted the lobby in lobbyhost's view when the
	// close arrived (so the legacy logic may have acted on it).
	wasHost bool
}

// lobbyState is what the Shadow keeps per lobby to classify.
type lobbyState struct {
	conns     map[uint64]*conn
	newest    map[string]uint64    // player → newest generation
	joinedAt  map[string]time.Time // player → time of its newest join
	lastClose map[string]closeRec
	legacy    string
	lhHost    string
	revision  uint64
	pair      [2]string // the last compared (legacy, lobbyhost)
	agreeing  bool
	timeline  []Entry
	keep      bool // timeline kept for the report
}

func newLobbyState() *lobbyState {
	return &lobbyState{
		conns:     make(map[uint64]*conn),
		newest:    make(map[string]uint64),
		joinedAt:  make(map[string]time.Time),
		lastClose: make(map[string]closeRec),
		agreeing:  true,
	}
}

func (s *Shadow) lobby(id string) *lobbyState {
	l := s.lobbs[id]
	if l == nil {
		l = newLobbyState()
		s.lobbs[id] = l
	}
	return l
}

func (s *Shadow) note(l *lobbyState, e Entry) {
	if len(l.timeline) >= s.cfg.Timeline {
		copy(l.timeline, l.timeline[1:])
		l.timeline = l.timeline[:len(l.timeline)-1]
	}
	l.timeline = append(l.timeline, e)
}

func (s *Shadow) noteEvents(l *lobbyState, res lobby.Result) {
	for _, ev := range res.Events {
		if ev.Revision <= l.revision {
			continue
		}
		l.revision = ev.Revision
		if ev.Reason == lobby.ReasonTimedOut {
			s.note(l, Entry{At: ev.At, Kind: KindTimedOut, Player: ev.Subject, Revision: ev.Revision})
		}
		if ev.Host != ev.PrevHost {
			l.lhHost = ev.Host
			s.note(l, Entry{At: ev.At, Kind: KindLobbyhost, Player: ev.Host, Revision: ev.Revision, Note: string(ev.Reason)})
		}
	}
	for _, e := range res.Ended {
		if e.Cause != lobby.EndTimedOut {
			delete(l.conns, e.Gen)
		}
	}
}

// Join reports that player opened a connection to lobby id, and returns
// what lobbyhost made of it (Result.Gen is the generation every later report
// about that connection names). Errors are the Service's.
func (s *Shadow) Join(ctx context.Context, id, player string, attrs map[string]string) (lobby.Result, error) {
	res, err := s.svc.Join(ctx, id, player, attrs)
	if err != nil {
		return res, err
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lobby(id)
	c := &conn{player: player}
	if s.ttl > 0 {
		c.deadline = now.Add(s.ttl)
	}
	l.conns[res.Gen] = c
	if res.Gen > l.newest[player] {
		l.newest[player] = res.Gen
		l.joinedAt[player] = now
	}
	s.note(l, Entry{At: now, Kind: KindJoin, Player: player, Gen: res.Gen})
	s.noteEvents(l, res)
	return res, nil
}

// Heartbeat reports a heartbeat on generation gen of player.
func (s *Shadow) Heartbeat(ctx context.Context, id, player string, gen uint64) (lobby.Result, error) {
	res, err := s.svc.Heartbeat(ctx, id, player, gen)
	if err != nil {
		return res, err
	}
	if res.Outcome != lobby.OutcomeApplied && len(res.Events) == 0 {
		return res, nil
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lobby(id)
	if c := l.conns[gen]; c != nil && c.player == player && res.Outcome == lobby.OutcomeApplied && s.ttl > 0 {
		c.deadline = now.Add(s.ttl)
	}
	s.noteEvents(l, res)
	return res, nil
}

// Disconnect reports that generation gen of player closed.
func (s *Shadow) Disconnect(ctx context.Context, id, player string, gen uint64) (lobby.Result, error) {
	res, err := s.svc.Disconnect(ctx, id, player, gen)
	if err != nil {
		return res, err
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lobby(id)
	stale := l.newest[player] > gen
	if c := l.conns[gen]; c != nil && c.player == player {
		delete(l.conns, gen)
	}
	note := ""
	if stale {
		note = "newer generation exists"
	}
	s.note(l, Entry{At: now, Kind: KindClose, Player: player, Gen: gen, Note: note})
	// A close never moves the host, so the host after the command (the
	// catch-up before it may have moved it) is the host the close hit.
	s.noteEvents(l, res)
	l.lastClose[player] = closeRec{gen: gen, at: now, stale: stale, wasHost: l.lhHost == player}
	return res, nil
}

// Leave reports that player left lobby id on purpose.
func (s *Shadow) Leave(ctx context.Context, id, player string) (lobby.Result, error) {
	res, err := s.svc.Leave(ctx, id, player)
	if err != nil {
		return res, err
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lobby(id)
	s.forget(l, player)
	s.note(l, Entry{At: now, Kind: KindLeave, Player: player})
	s.noteEvents(l, res)
	return res, nil
}

func (s *Shadow) forget(l *lobbyState, player string) {
	for g, c := range l.conns {
		if c.player == player {
			delete(l.conns, g)
		}
	}
	delete(l.newest, player)
	delete(l.joinedAt, player)
	delete(l.lastClose, player)
}

// Decision is the outcome of comparing one legacy decision with lobbyhost's.
type Decision struct {
	// Authority is the side authoritative for the lobby now.
	Authority Authority
	// Host is the host the server acts on and publishes: Legacy's or
	// Lobbyhost's, by Authority ("" for none).
	Host string
	// Legacy and Lobbyhost are the two hosts; Revision is lobbyhost's
	// revision of the lobby.
	Legacy, Lobbyhost string
	Revision          uint64
	// Class is why they disagree; zero when they agree.
	Class Class
	// Recorded reports whether this comparison recorded a new disagreement
	// (a disagreement that continues with the same two hosts is recorded
	// once).
	Recorded bool
}

// ReportLegacyHost reports the host the legacy logic chose for lobby id
// ("" for none) after a decision it made at at, compares it with lobbyhost's
// host now (catching up on due deadlines first, as a Snapshot does), records
// and classifies a disagreement, and returns the host to act on. Call it
// after every piece of evidence the legacy logic handled, also when its host
// did not change.
func (s *Shadow) ReportLegacyHost(ctx context.Context, id, host string, at time.Time) (Decision, error) {
	snap, err := s.svc.Snapshot(ctx, id)
	if err != nil {
		return Decision{}, err
	}
	now := s.clock.Now()
	d := Decision{Authority: s.sw.Authority(id), Legacy: host, Lobbyhost: snap.Host, Revision: snap.Revision}
	d.Host = host
	if d.Authority == Lobbyhost {
		d.Host = snap.Host
	}

	s.mu.Lock()
	l := s.lobby(id)
	s.compar++
	if host != l.legacy {
		l.legacy = host
		s.note(l, Entry{At: at, Kind: KindLegacy, Player: host})
	}
	if snap.Revision > l.revision {
		l.revision = snap.Revision
		if snap.Host != l.lhHost {
			l.lhHost = snap.Host
			s.note(l, Entry{At: now, Kind: KindLobbyhost, Player: snap.Host, Revision: snap.Revision})
		}
	}
	if host != snap.Host {
		d.Class = s.classify(l, host, snap.Host, snap.Members, now)
		pair := [2]string{host, snap.Host}
		if l.agreeing || pair != l.pair {
			d.Recorded = true
			s.record(id, l, d, at)
		}
		l.pair, l.agreeing = pair, false
	} else {
		l.agreeing = true
	}
	if len(snap.Members) == 0 && host == "" && !l.keep {
		delete(s.lobbs, id)
	}
	s.mu.Unlock()
	return d, nil
}

// timedOut reports whether player's evidence shows an unclosed connection
// that missed its heartbeat deadline by now (all: and no live one).
func timedOut(l *lobbyState, player string, now time.Time, all bool) bool {
	found := false
	for _, c := range l.conns {
		if c.player != player {
			continue
		}
		if c.deadline.IsZero() || now.Before(c.deadline) {
			if all {
				return false
			}
			continue
		}
		found = true
	}
	return found
}

// classify names the likely cause of legacy ≠ lh, checking the classes in
// their documented order.
func (s *Shadow) classify(l *lobbyState, legacy, lh string, members []lobby.MemberView, now time.Time) Class {
	status := func(p string) lobby.Status {
		for _, m := range members {
			if m.Player == p {
				return m.Status
			}
		}
		return 0 // not a member
	}
	if lh != "" {
		lc, closed := l.lastClose[lh]
		closed = closed && lc.wasHost
		switch status(lh) {
		case lobby.StatusOnline:
			if closed && lc.stale {
				return StaleClose
			}
			if closed && l.joinedAt[lh].After(lc.at) && l.joinedAt[lh].Sub(lc.at) < s.grace {
				return Grace
			}
		case lobby.StatusReconnecting:
			if timedOut(l, lh, now, true) {
				return MissingHeartbeat
			}
			if closed {
				return Grace
			}
		}
	}
	// The legacy logic may be counting any connection lobbyhost timed out.
	if legacy != "" && timedOut(l, legacy, now, false) {
		return MissingHeartbeat
	}
	if legacy != "" && lh != "" && status(legacy) == lobby.StatusOnline && status(lh) == lobby.StatusOnline {
		return Ordering
	}
	return Unexplained
}

// record counts a disagreement, logs it and keeps a sample line.
func (s *Shadow) record(id string, l *lobbyState, d Decision, at time.Time) {
	s.counts[d.Class]++
	if !l.keep && s.kept < s.cfg.Lobbies {
		l.keep = true
		s.kept++
	}
	s.note(l, Entry{At: at, Kind: KindDisagreement, Player: d.Legacy, Other: d.Lobbyhost, Revision: d.Revision, Class: d.Class})
	attrs := []any{
		"lobby", id,
		"class", d.Class.String(),
		"legacy_host", s.svc.Pseudonym(d.Legacy),
		"lobbyhost_host", s.svc.Pseudonym(d.Lobbyhost),
		"revision", d.Revision,
		"authority", d.Authority.String(),
		"at", at.UTC().Format(time.RFC3339Nano),
	}
	if len(s.sample[d.Class]) < s.cfg.Samples {
		var b strings.Builder
		h := slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: dropTime})
		slog.New(h).Warn("shadow disagreement", attrs...)
		s.sample[d.Class] = append(s.sample[d.Class], strings.TrimSuffix(b.String(), "\n"))
	}
	s.log.Warn("shadow disagreement", attrs...)
}

// dropTime removes the handler's wall-clock time: lines carry the
// decision's own time ("at"), so samples are reproducible.
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
