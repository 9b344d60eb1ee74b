package rules

import (
	"cmp"
	"maps"
	"slices"
	"time"
)

// refModel is a deliberately naive second implementation of the rules,
// written from their description with different data structures (maps, and a full sort
// of every pending deadline before each step), to compare the Machine
// against on random schedules. Clarity over speed.
type refModel struct {
	p       Policy
	id      string
	rev     uint64
	term    uint64 // one more per event whose host differs from its previous host
	nextSeq uint64
	nextGen uint64
	host    string
	updated time.Time
	members map[string]*refMember
	locked  bool
	lockBy  string // who locked: "" the server, else a member
	ov      Overrides
	blocks  map[string]time.Time // kicked player → end of its block
}

type refMember struct {
	seq         uint64
	attrs       map[string]string
	gens        map[uint64]time.Time // live generation → heartbeat deadline (zero: none)
	held        map[uint64]string    // live generation → the session holding it, if one does
	lastGen     uint64
	reconnectBy time.Time
}

type refDeadline struct {
	at     time.Time
	seq    uint64
	player string
	gen    uint64 // 0 for a reconnect deadline
}

func newRefModel(p Policy, id string) *refModel {
	return &refModel{p: p, id: id, nextSeq: 1, nextGen: 1, members: map[string]*refMember{}, blocks: map[string]time.Time{}}
}

// settings are the policy values in force: the lobby's overrides where it
// has them, the policy's otherwise.
func (m *refModel) settings() (grace, ttl time.Duration, maxMembers, maxConns int) {
	grace, ttl, maxMembers, maxConns = m.p.Grace, m.p.HeartbeatTTL, m.p.MaxMembers, m.p.MaxConnectionsPerPlayer
	if m.ov.Set&OverrideGrace != 0 {
		grace = m.ov.Grace
	}
	if m.ov.Set&OverrideHeartbeatTTL != 0 {
		ttl = m.ov.HeartbeatTTL
	}
	if m.ov.Set&OverrideMaxMembers != 0 {
		maxMembers = m.ov.MaxMembers
	}
	if m.ov.Set&OverrideMaxConnectionsPerPlayer != 0 {
		maxConns = m.ov.MaxConnectionsPerPlayer
	}
	return
}

func (m *refModel) grace() time.Duration {
	g, _, _, _ := m.settings()
	return g
}

// sameAttrs compares attribute sets, no attributes and an empty set alike.
func sameAttrs(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func keptAttrs(a map[string]string) map[string]string {
	if len(a) == 0 {
		return nil
	}
	return maps.Clone(a)
}

func (m *refModel) view() []MemberView {
	var v []MemberView
	for id, mem := range m.members {
		st := StatusReconnecting
		if len(mem.gens) > 0 {
			st = StatusOnline
		}
		v = append(v, MemberView{Player: id, JoinSeq: mem.seq, Status: st, Attrs: keptAttrs(mem.attrs), ReconnectDeadline: mem.reconnectBy})
	}
	slices.SortFunc(v, func(a, b MemberView) int { return cmp.Compare(a.JoinSeq, b.JoinSeq) })
	return v
}

func (m *refModel) event(reason Reason, subject string, at time.Time, prev string) Event {
	m.rev++
	if m.host != prev {
		m.term++
	}
	return Event{Lobby: m.id, Revision: m.rev, Term: m.term, Host: m.host, PrevHost: prev, Locked: m.locked, Overrides: m.ov,
		Members: m.view(), Reason: reason, Subject: subject, At: at}
}

// ownDeadline is when generation g of mem ends on its own, given the
// session deadlines sd: its stored heartbeat deadline, or the deadline of
// the session holding it, never before the last transition; zero for none.
func (m *refModel) ownDeadline(mem *refMember, g uint64, sd SessionDeadlines) time.Time {
	sess, ok := mem.held[g]
	if !ok {
		return mem.gens[g]
	}
	d, ok := sd[sess]
	if !ok {
		return time.Time{}
	}
	if d.Before(m.updated) {
		return m.updated
	}
	return d
}

func (m *refModel) eligible(id string, t time.Time, sd SessionDeadlines) bool {
	mem := m.members[id]
	live := false
	for g := range mem.gens {
		if d := m.ownDeadline(mem, g, sd); d.IsZero() || t.Before(d) {
			live = true
		}
	}
	return live && m.p.Succession.IsEligible(succCand(id, mem))
}

func (m *refModel) fill(t time.Time, sd SessionDeadlines) {
	if m.host != "" {
		return
	}
	var ids []string
	for id := range m.members {
		if m.eligible(id, t, sd) {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b string) int {
		ca, cb := succCand(a, m.members[a]), succCand(b, m.members[b])
		if m.p.Succession.Less(ca, cb) {
			return -1
		}
		if m.p.Succession.Less(cb, ca) {
			return 1
		}
		return 0
	})
	if len(ids) > 0 {
		m.host = ids[0]
	}
}

func (m *refModel) pending(sd SessionDeadlines) []refDeadline {
	var ds []refDeadline
	for id, mem := range m.members {
		if !mem.reconnectBy.IsZero() {
			ds = append(ds, refDeadline{mem.reconnectBy, mem.seq, id, 0})
		}
		for g := range mem.gens {
			if d := m.ownDeadline(mem, g, sd); !d.IsZero() {
				ds = append(ds, refDeadline{d, mem.seq, id, g})
			}
		}
	}
	slices.SortFunc(ds, func(a, b refDeadline) int {
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.seq, b.seq), cmp.Compare(a.player, b.player), cmp.Compare(a.gen, b.gen))
	})
	return ds
}

// removeMember takes player out at t and fills the host seat it may leave.
func (m *refModel) removeMember(player string, reason Reason, t time.Time, sd SessionDeadlines) Event {
	prev := m.host
	delete(m.members, player)
	if m.host == player {
		m.host = ""
		m.fill(t, sd)
	}
	if len(m.members) == 0 && m.locked && m.lockBy != "" {
		// A member's lock goes with the last member.
		m.locked, m.lockBy = false, ""
	}
	return m.event(reason, player, t, prev)
}

// apply mirrors Machine.Apply on the model. It returns the events, the
// outcome, and the sentinel of the rule that refused the command (nil if
// none). On refusal the model must be discarded by the caller (it does not
// roll back).
func (m *refModel) apply(cmd Command, now time.Time) (events []Event, out Outcome, refused error) {
	if now.Before(m.updated) {
		now = m.updated
	}
	// m.updated stays the last transition before this one until the end,
	// so session deadlines are judged against it all through.
	sd := cmd.SessionDeadlines
	var last time.Time
	for {
		ds := m.pending(sd)
		if len(ds) == 0 || ds[0].at.After(now) {
			break
		}
		d := ds[0]
		last = d.at
		mem := m.members[d.player]
		if cmd.Op == OpExpireLease && d.player == cmd.Player && ((d.gen != 0 && d.gen == cmd.Gen) || (d.gen == 0 && mem.lastGen == cmd.Gen)) {
			out = OutcomeDone
		}
		if d.gen != 0 {
			delete(mem.gens, d.gen)
			delete(mem.held, d.gen)
			if len(mem.gens) == 0 {
				mem.reconnectBy = d.at.Add(m.grace())
				events = append(events, m.event(ReasonTimedOut, d.player, d.at, m.host))
			}
			continue
		}
		events = append(events, m.removeMember(d.player, ReasonLeaseExpired, d.at, sd))
	}
	caughtUp := !last.IsZero()
	changed := false
	_, ttl, maxMembers, maxConns := m.settings()
	hb := func() time.Time {
		if ttl == 0 {
			return time.Time{}
		}
		return now.Add(ttl)
	}
	switch cmd.Op {
	case OpExpireLease:
		// Judged on the caught-up lobby: applied above, still pending, or
		// naming nothing pending.
		if out != OutcomeDone {
			out = OutcomeStale
			if mem := m.members[cmd.Player]; mem != nil {
				if d := mem.gens[cmd.Gen]; !d.IsZero() {
					out = OutcomeNotDue
				} else if len(mem.gens) == 0 && mem.lastGen == cmd.Gen && !mem.reconnectBy.IsZero() {
					out = OutcomeNotDue
				}
			}
		}
	case OpTick:
		out = OutcomeNoop
		if caughtUp {
			out = OutcomeApplied
		}
	case OpJoin:
		if cmd.Session != "" {
			if d, ok := sd[cmd.Session]; ok && (!now.Before(d) || d.Before(m.updated)) {
				return nil, 0, ErrSessionEnded
			}
		}
		prev := m.host
		mem := m.members[cmd.Player]
		if mem == nil {
			if end, ok := m.blocks[cmd.Player]; ok && now.Before(end) {
				return nil, 0, ErrBlocked
			}
			if m.locked {
				return nil, 0, ErrLocked
			}
			if maxMembers > 0 && len(m.members) >= maxMembers {
				return nil, 0, ErrLobbyFull
			}
			mem = &refMember{seq: m.nextSeq, gens: map[uint64]time.Time{}, held: map[uint64]string{}}
			m.nextSeq++
			m.members[cmd.Player] = mem
			mem.attrs = keptAttrs(cmd.Attrs)
			m.attach(mem, cmd.Session, hb())
			m.fill(now, sd)
			events = append(events, m.event(ReasonJoined, cmd.Player, now, prev))
		} else {
			attrsChanged := cmd.Attrs != nil && !sameAttrs(cmd.Attrs, mem.attrs)
			if cmd.Attrs != nil {
				mem.attrs = keptAttrs(cmd.Attrs)
			}
			wasOff := len(mem.gens) == 0
			if n := maxConns; n > 0 {
				for len(mem.gens) >= n {
					oldest := slices.Min(slices.Collect(mapsKeys(mem.gens)))
					delete(mem.gens, oldest)
					delete(mem.held, oldest)
				}
			}
			m.attach(mem, cmd.Session, hb())
			mem.reconnectBy = time.Time{}
			m.fill(now, sd)
			if wasOff {
				events = append(events, m.event(ReasonReconnected, cmd.Player, now, prev))
			} else if attrsChanged {
				events = append(events, m.event(ReasonUpdated, cmd.Player, now, prev))
			}
		}
		out, changed = OutcomeApplied, true
	case OpHeartbeat:
		out = OutcomeStale
		if mem := m.members[cmd.Player]; mem != nil {
			if d, ok := mem.gens[cmd.Gen]; ok {
				out = OutcomeApplied
				if _, held := mem.held[cmd.Gen]; held {
					// Its process keeps its heartbeat deadline.
					break
				}
				if nd := hb(); !nd.Equal(d) {
					mem.gens[cmd.Gen] = nd
					changed = true
				}
			}
		}
	case OpDisconnect, OpTimeOut:
		out = OutcomeStale
		if mem := m.members[cmd.Player]; mem != nil {
			if _, ok := mem.gens[cmd.Gen]; ok {
				out, changed = OutcomeApplied, true
				delete(mem.gens, cmd.Gen)
				delete(mem.held, cmd.Gen)
				if len(mem.gens) == 0 {
					mem.reconnectBy = now.Add(m.grace())
					reason := ReasonDisconnected
					if cmd.Op == OpTimeOut {
						reason = ReasonTimedOut
					}
					events = append(events, m.event(reason, cmd.Player, now, m.host))
				}
			}
		}
	case OpDrain:
		out = OutcomeNoop
		// Members in join-sequence order, as the events must come.
		var order []*refMember
		names := map[*refMember]string{}
		for id, mem := range m.members {
			order = append(order, mem)
			names[mem] = id
		}
		slices.SortFunc(order, func(a, b *refMember) int { return cmp.Compare(a.seq, b.seq) })
		for _, mem := range order {
			for g, sess := range mem.held {
				if sess == cmd.Session {
					delete(mem.gens, g)
					delete(mem.held, g)
					out, changed = OutcomeApplied, true
					if len(mem.gens) == 0 {
						mem.reconnectBy = now.Add(m.grace())
						events = append(events, m.event(ReasonDisconnected, names[mem], now, m.host))
					}
				}
			}
		}
	case OpLeave:
		out = OutcomeNoop
		if m.members[cmd.Player] != nil {
			out, changed = OutcomeApplied, true
			events = append(events, m.removeMember(cmd.Player, ReasonLeft, now, sd))
		}
	case OpUpdate:
		mem := m.members[cmd.Player]
		switch {
		case mem == nil:
			return nil, 0, ErrNotMember
		case sameAttrs(cmd.Attrs, mem.attrs):
			out = OutcomeNoop
		default:
			prev := m.host
			mem.attrs = keptAttrs(cmd.Attrs)
			m.fill(now, sd)
			out, changed = OutcomeApplied, true
			events = append(events, m.event(ReasonUpdated, cmd.Player, now, prev))
		}
	case OpKick:
		switch {
		case cmd.Player != "" && m.host != cmd.Player:
			return nil, 0, ErrNotHost
		case m.members[cmd.To] == nil:
			return nil, 0, ErrNotMember
		case cmd.To == cmd.Player:
			out, changed = OutcomeApplied, true
			events = append(events, m.removeMember(cmd.To, ReasonLeft, now, sd))
		default:
			if cmd.Block > 0 {
				// Blocks in force other than the target's own, against
				// the bound (1,024 when the policy names none).
				inForce := 0
				for p, end := range m.blocks {
					if p != cmd.To && now.Before(end) {
						inForce++
					}
				}
				limit := m.p.MaxBlocks
				if m.ov.Set&OverrideMaxBlocks != 0 {
					limit = m.ov.MaxBlocks
				}
				if limit == 0 {
					limit = 1024
				}
				if inForce >= limit {
					return nil, 0, ErrTooManyBlocks
				}
				m.blocks[cmd.To] = now.Add(cmd.Block)
			}
			out, changed = OutcomeApplied, true
			events = append(events, m.removeMember(cmd.To, ReasonKicked, now, sd))
		}
	case OpLock:
		switch {
		case cmd.Player != "" && m.host != cmd.Player:
			return nil, 0, ErrNotHost
		case m.locked == cmd.Locked:
			out = OutcomeNoop
		default:
			m.locked, m.lockBy = cmd.Locked, ""
			reason := ReasonUnlocked
			if m.locked {
				reason = ReasonLocked
				m.lockBy = cmd.Player
			}
			out, changed = OutcomeApplied, true
			events = append(events, m.event(reason, cmd.Player, now, m.host))
		}
	case OpConfigure:
		// Only the settings marked as set count.
		o := Overrides{Set: cmd.Overrides.Set}
		if o.Set&OverrideGrace != 0 {
			o.Grace = cmd.Overrides.Grace
		}
		if o.Set&OverrideHeartbeatTTL != 0 {
			o.HeartbeatTTL = cmd.Overrides.HeartbeatTTL
		}
		if o.Set&OverrideMaxMembers != 0 {
			o.MaxMembers = cmd.Overrides.MaxMembers
		}
		if o.Set&OverrideMaxConnectionsPerPlayer != 0 {
			o.MaxConnectionsPerPlayer = cmd.Overrides.MaxConnectionsPerPlayer
		}
		if o.Set&OverrideMaxBlocks != 0 {
			o.MaxBlocks = cmd.Overrides.MaxBlocks
		}
		out = OutcomeNoop
		if o != m.ov {
			m.ov = o
			out, changed = OutcomeApplied, true
			events = append(events, m.event(ReasonConfigured, "", now, m.host))
		}
	case OpTransferHost:
		switch {
		case m.host == "" || m.host != cmd.Player:
			return nil, 0, ErrNotHost
		case m.members[cmd.To] == nil:
			return nil, 0, ErrNotMember
		case !m.eligible(cmd.To, now, sd):
			return nil, 0, ErrNotEligible
		case cmd.To == cmd.Player:
			out = OutcomeNoop
		default:
			prev := m.host
			m.host = cmd.To
			out, changed = OutcomeApplied, true
			events = append(events, m.event(ReasonHostTransferred, cmd.To, now, prev))
		}
	}
	switch {
	case changed:
		m.updated = now
	case caughtUp:
		m.updated = last
	}
	if changed || caughtUp {
		for p, end := range m.blocks {
			if !m.updated.Before(end) {
				delete(m.blocks, p)
			}
		}
	}
	return events, out, nil
}

// attach gives mem the next generation, held by session if one is named
// (then with no stored heartbeat deadline), else with deadline hb.
func (m *refModel) attach(mem *refMember, session string, hb time.Time) {
	if session != "" {
		mem.held[m.nextGen] = session
		hb = time.Time{}
	}
	mem.gens[m.nextGen] = hb
	mem.lastGen = m.nextGen
	m.nextGen++
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// matches reports differences between the model and a machine state.
func (m *refModel) diffState(s *State) []string {
	var diffs []string
	add := func(format string, args ...any) { diffs = append(diffs, sprintf(format, args...)) }
	if s.Revision != m.rev || s.NextJoinSeq != m.nextSeq || s.NextGen != m.nextGen || s.Host != m.host || s.Term != m.term {
		add("counters/host: machine rev %d term %d seq %d gen %d host %q; model rev %d term %d seq %d gen %d host %q",
			s.Revision, s.Term, s.NextJoinSeq, s.NextGen, s.Host, m.rev, m.term, m.nextSeq, m.nextGen, m.host)
	}
	if !s.Updated.Equal(m.updated) {
		add("updated: machine %v, model %v", s.Updated, m.updated)
	}
	if s.Locked != m.locked || s.LockedBy != m.lockBy || s.Overrides != m.ov {
		add("lock/overrides: machine %v by %q %+v, model %v by %q %+v", s.Locked, s.LockedBy, s.Overrides, m.locked, m.lockBy, m.ov)
	}
	if s.Blocks.Len() != len(m.blocks) {
		add("blocks: machine %v, model %v", s.Blocks, m.blocks)
	}
	for p, end := range m.blocks {
		if got, ok := s.Blocks.Until(p); !ok || !got.Equal(end) {
			add("block of %q: machine %v (present %v), model %v", p, got, ok, end)
		}
	}
	if len(s.Members) != len(m.members) {
		add("machine has %d members, model %d", len(s.Members), len(m.members))
		return diffs
	}
	for _, mem := range s.Members {
		rm := m.members[mem.Player]
		if rm == nil {
			add("member %q missing from the model", mem.Player)
			continue
		}
		if rm.seq != mem.JoinSeq || rm.lastGen != mem.LastGen || !rm.reconnectBy.Equal(mem.ReconnectBy) || len(rm.gens) != len(mem.Conns) ||
			!sameAttrs(rm.attrs, mem.Attrs) {
			add("member %q: machine %+v, model %+v", mem.Player, mem, *rm)
			continue
		}
		for _, c := range mem.Conns {
			if d, ok := rm.gens[c.Gen]; !ok || !d.Equal(c.Deadline) {
				add("member %q gen %d: machine deadline %v, model %v (present %v)", mem.Player, c.Gen, c.Deadline, d, ok)
			}
			if sess := rm.held[c.Gen]; sess != c.Session {
				add("member %q gen %d: machine session %q, model %q", mem.Player, c.Gen, c.Session, sess)
			}
		}
	}
	return diffs
}
