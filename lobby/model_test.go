package lobby

import (
	"cmp"
	"slices"
	"time"
)

// refModel is a deliberately naive second implementation of the rules,
// written from DESIGN with different data structures (maps, and a full sort
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
}

type refMember struct {
	seq         uint64
	attrs       map[string]string
	gens        map[uint64]time.Time // live generation → heartbeat deadline (zero: none)
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
	return &refModel{p: p, id: id, nextSeq: 1, nextGen: 1, members: map[string]*refMember{}}
}

func (m *refModel) view() []MemberView {
	var v []MemberView
	for id, mem := range m.members {
		st := StatusReconnecting
		if len(mem.gens) > 0 {
			st = StatusOnline
		}
		v = append(v, MemberView{Player: id, JoinSeq: mem.seq, Status: st})
	}
	slices.SortFunc(v, func(a, b MemberView) int { return cmp.Compare(a.JoinSeq, b.JoinSeq) })
	return v
}

func (m *refModel) event(reason Reason, subject string, at time.Time, prev string) Event {
	m.rev++
	if m.host != prev {
		m.term++
	}
	return Event{Lobby: m.id, Revision: m.rev, Term: m.term, Host: m.host, PrevHost: prev, Members: m.view(), Reason: reason, Subject: subject, At: at}
}

func (m *refModel) eligible(id string, t time.Time) bool {
	mem := m.members[id]
	live := false
	for _, d := range mem.gens {
		if d.IsZero() || t.Before(d) {
			live = true
		}
	}
	return live && m.p.Succession.IsEligible(succCand(id, mem))
}

func (m *refModel) fill(t time.Time) {
	if m.host != "" {
		return
	}
	var ids []string
	for id := range m.members {
		if m.eligible(id, t) {
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

func (m *refModel) pending() []refDeadline {
	var ds []refDeadline
	for id, mem := range m.members {
		if !mem.reconnectBy.IsZero() {
			ds = append(ds, refDeadline{mem.reconnectBy, mem.seq, id, 0})
		}
		for g, d := range mem.gens {
			if !d.IsZero() {
				ds = append(ds, refDeadline{d, mem.seq, id, g})
			}
		}
	}
	slices.SortFunc(ds, func(a, b refDeadline) int {
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.seq, b.seq), cmp.Compare(a.player, b.player), cmp.Compare(a.gen, b.gen))
	})
	return ds
}

// apply mirrors Machine.Apply on the model. It returns the events, the
// outcome, and whether the command was refused. On refusal the model must
// be discarded by the caller (it does not roll back).
func (m *refModel) apply(cmd Command, now time.Time) (events []Event, out Outcome, refused bool) {
	if now.Before(m.updated) {
		now = m.updated
	}
	var last time.Time
	for {
		ds := m.pending()
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
			if len(mem.gens) == 0 {
				mem.reconnectBy = d.at.Add(m.p.Grace)
				events = append(events, m.event(ReasonTimedOut, d.player, d.at, m.host))
			}
			continue
		}
		prev := m.host
		delete(m.members, d.player)
		if m.host == d.player {
			m.host = ""
			m.fill(d.at)
		}
		events = append(events, m.event(ReasonLeaseExpired, d.player, d.at, prev))
	}
	caughtUp := !last.IsZero()
	changed := false
	hb := func() time.Time {
		if m.p.HeartbeatTTL == 0 {
			return time.Time{}
		}
		return now.Add(m.p.HeartbeatTTL)
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
		prev := m.host
		mem := m.members[cmd.Player]
		if mem == nil {
			if m.p.MaxMembers > 0 && len(m.members) >= m.p.MaxMembers {
				return nil, 0, true
			}
			mem = &refMember{seq: m.nextSeq, gens: map[uint64]time.Time{}}
			m.nextSeq++
			m.members[cmd.Player] = mem
			if cmd.Attrs != nil {
				mem.attrs = cmd.Attrs
			}
			mem.gens[m.nextGen] = hb()
			mem.lastGen = m.nextGen
			m.nextGen++
			m.fill(now)
			events = append(events, m.event(ReasonJoined, cmd.Player, now, prev))
		} else {
			if cmd.Attrs != nil {
				mem.attrs = cmd.Attrs
			}
			wasOff := len(mem.gens) == 0
			if n := m.p.MaxConnectionsPerPlayer; n > 0 {
				for len(mem.gens) >= n {
					oldest := slices.Min(slices.Collect(mapsKeys(mem.gens)))
					delete(mem.gens, oldest)
				}
			}
			mem.gens[m.nextGen] = hb()
			mem.lastGen = m.nextGen
			m.nextGen++
			mem.reconnectBy = time.Time{}
			m.fill(now)
			if wasOff {
				events = append(events, m.event(ReasonReconnected, cmd.Player, now, prev))
			} else if m.host != prev {
				events = append(events, m.event(ReasonJoined, cmd.Player, now, prev))
			}
		}
		out, changed = OutcomeApplied, true
	case OpHeartbeat:
		out = OutcomeStale
		if mem := m.members[cmd.Player]; mem != nil {
			if d, ok := mem.gens[cmd.Gen]; ok {
				out = OutcomeApplied
				if nd := hb(); !nd.Equal(d) {
					mem.gens[cmd.Gen] = nd
					changed = true
				}
			}
		}
	case OpDisconnect:
		out = OutcomeStale
		if mem := m.members[cmd.Player]; mem != nil {
			if _, ok := mem.gens[cmd.Gen]; ok {
				out, changed = OutcomeApplied, true
				delete(mem.gens, cmd.Gen)
				if len(mem.gens) == 0 {
					mem.reconnectBy = now.Add(m.p.Grace)
					events = append(events, m.event(ReasonDisconnected, cmd.Player, now, m.host))
				}
			}
		}
	case OpLeave:
		out = OutcomeNoop
		if m.members[cmd.Player] != nil {
			out, changed = OutcomeApplied, true
			prev := m.host
			delete(m.members, cmd.Player)
			if m.host == cmd.Player {
				m.host = ""
				m.fill(now)
			}
			events = append(events, m.event(ReasonLeft, cmd.Player, now, prev))
		}
	case OpTransferHost:
		switch {
		case m.host == "" || m.host != cmd.Player:
			return nil, 0, true
		case m.members[cmd.To] == nil:
			return nil, 0, true
		case !m.eligible(cmd.To, now):
			return nil, 0, true
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
	return events, out, false
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
		if rm.seq != mem.JoinSeq || rm.lastGen != mem.LastGen || !rm.reconnectBy.Equal(mem.ReconnectBy) || len(rm.gens) != len(mem.Conns) {
			add("member %q: machine %+v, model %+v", mem.Player, mem, *rm)
			continue
		}
		for _, c := range mem.Conns {
			if d, ok := rm.gens[c.Gen]; !ok || !d.Equal(c.Deadline) {
				add("member %q gen %d: machine deadline %v, model %v (present %v)", mem.Player, c.Gen, c.Deadline, d, ok)
			}
		}
	}
	return diffs
}
