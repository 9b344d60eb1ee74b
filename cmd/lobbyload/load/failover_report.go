package load

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// FailoverReport is what a failover run measured.
type FailoverReport struct {
	Scenario         string `json:"scenario"`
	Label            string `json:"label,omitempty"`
	Server           string `json:"server"`
	Rooms            int    `json:"rooms"`
	PlayersPerRoom   int    `json:"playersPerRoom"`
	Concurrency      int    `json:"concurrency"`
	CloseConcurrency int    `json:"closeConcurrency"`
	// Drops are the drop styles the rooms took in turn.
	Drops     []Drop  `json:"drops"`
	GraceMs   float64 `json:"graceMs"`
	TimeoutMs float64 `json:"timeoutMs"`

	// Players joined (ticket and upgrade done); RoomsLeftOut had a join
	// fail or never reached full membership, and took no part in the
	// failover.
	Players      int `json:"players"`
	RoomsLeftOut int `json:"roomsLeftOut"`
	// ErrorCount errors in all; Errors are the first few.
	ErrorCount int      `json:"errorCount"`
	Errors     []string `json:"errors,omitempty"`

	// IdleSeconds is how long every socket sat idle (heartbeating) before
	// the drops; IdleStoreCalls the server's store calls per second in
	// that time, by method, as its /metrics counted them (empty for a
	// server that does not export them).
	IdleSeconds    float64            `json:"idleSeconds,omitempty"`
	IdleStoreCalls map[string]float64 `json:"idleStoreCalls,omitempty"`

	// JoinSeconds is the join phase's wall time; PlayersPerSecond is
	// Players / JoinSeconds.
	JoinSeconds      float64 `json:"joinSeconds"`
	PlayersPerSecond float64 `json:"playersPerSecond"`
	// CloseSeconds is the time taken to close every host (the burst).
	CloseSeconds float64 `json:"closeSeconds"`
	// JoinPhase runs from the first ticket until every socket saw its room
	// full; FailoverPhase from then until the failovers settled.
	JoinPhase     Phase `json:"joinPhase"`
	FailoverPhase Phase `json:"failoverPhase"`
	// Join is ticket request start → upgrade done; Upgrade the WebSocket
	// dial alone.
	Join    LatencySummary `json:"joinLatency"`
	Upgrade LatencySummary `json:"upgradeLatency"`

	// Handshake, TCPClose and TCPDrop are the rooms whose host was dropped
	// by a close handshake, by a TCP close without a close frame (FIN) and
	// by a TCP reset (RST). A style no room took has zero counts.
	Handshake FailoverSummary `json:"failoverHandshake"`
	TCPClose  FailoverSummary `json:"failoverTcpClose"`
	TCPDrop   FailoverSummary `json:"failoverTcpDrop"`

	// WrongSuccessors are rooms whose new host was not the remaining member
	// with the lowest joinSeq; SplitBrain rooms had two sockets receive one
	// revision with different hosts, or remaining sockets end on different
	// hosts.
	WrongSuccessors int      `json:"wrongSuccessors"`
	SplitBrain      int      `json:"splitBrain"`
	Samples         []string `json:"samples,omitempty"`
	// OutOfOrder and Duplicates are revisions a socket received lower than,
	// or equal to, one it had already received.
	OutOfOrder int `json:"outOfOrder"`
	Duplicates int `json:"duplicates"`
	// SocketsLost are sockets other than a closed host's that ended before
	// the tool closed them (the server closed them, e.g. for a ping it saw
	// unanswered under load). Their final state is not compared, so they
	// cannot count as split-brain; one sample says why each ended.
	SocketsLost int `json:"socketsLost"`
	// Unsettled are remaining sockets that had not received their room's
	// newest revision 5 s after the failovers: a split-brain of final
	// states in their rooms may be only their lag.
	Unsettled int `json:"unsettled"`

	Resources *ServerResources `json:"serverResources,omitempty"`
	Series    Series           `json:"series"`
}

// FailoverSummary is the failover of the rooms whose host closed one way.
// Delay is from the host's close (the instant just before the tool's close
// call) plus the grace to the first arrival, on a remaining socket, of a
// state naming a new host. It splits in two at the first arrival of a
// state showing the old host no longer online: Noticed is from the close to
// then (the server noticing the close, committing the disconnect and
// delivering it), Expiry from then plus the grace to the new host (the
// lease timer's lateness, the expiry's commit and its delivery). Both
// count from the client's close, so Noticed + Expiry = Delay for every
// room. The server starts its grace at its disconnect commit, before that
// state's delivery; when the delivery lagged more than the rest of the
// expiry took, Expiry would come out negative: such a room counts in
// Overlapped, its Expiry is 0 and its Noticed is its whole Delay (the
// disconnect's delivery overlapped the grace). A room whose first state
// without the host online already names the new host (a server that shows
// no disconnect) counts the same way.
type FailoverSummary struct {
	Rooms      int            `json:"rooms"`
	FailedOver int            `json:"failedOver"`
	NoFailover int            `json:"noFailover"` // none within the timeout
	Delay      LatencySummary `json:"delay"`
	Noticed    LatencySummary `json:"noticed"`
	Expiry     LatencySummary `json:"expiry"`
	Overlapped int            `json:"overlapped"`
}

// Series are the raw figures behind the plots, in milliseconds, ascending.
type Series struct {
	JoinMs              []float64 `json:"joinMs"`
	UpgradeMs           []float64 `json:"upgradeMs"`
	FailoverHandshakeMs []float64 `json:"failoverHandshakeMs"`
	FailoverTCPCloseMs  []float64 `json:"failoverTcpCloseMs"`
	FailoverTCPDropMs   []float64 `json:"failoverTcpDropMs"`
	// JoinsPer100ms counts joins completed in each 100 ms of the join phase.
	JoinsPer100ms []int `json:"joinsPer100ms"`
	// Splits are every failed-over room's delay and its two parts, in
	// room order.
	Splits []SplitSample `json:"splits"`
}

// SplitSample is one room's failover delay after the grace and its split
// (see FailoverSummary), in milliseconds.
type SplitSample struct {
	Room      string  `json:"room"`
	Drop      Drop    `json:"drop"`
	DelayMs   float64 `json:"delayMs"`
	NoticedMs float64 `json:"noticedMs"`
	ExpiryMs  float64 `json:"expiryMs"`
}

// OK reports whether every room failed over to the right successor, with
// one view of the host and revisions in order.
func (r *FailoverReport) OK() bool {
	return r.ErrorCount == 0 && r.RoomsLeftOut == 0 && r.Handshake.NoFailover == 0 && r.TCPClose.NoFailover == 0 &&
		r.TCPDrop.NoFailover == 0 &&
		r.WrongSuccessors == 0 && r.SplitBrain == 0 && r.OutOfOrder == 0 && r.SocketsLost == 0
}

// tally fills the report from the rooms once every reader has ended; the
// tool began closing every socket at teardown.
func tally(rep *FailoverReport, cfg FailoverConfig, rooms []*foRoom, teardown time.Time) {
	var join, upgrade []time.Duration
	type samples struct{ delay, noticed, expiry []time.Duration }
	by := map[Drop]*samples{DropHandshake: {}, DropFIN: {}, DropRST: {}}
	var splits []SplitSample
	sums := map[Drop]*FailoverSummary{DropHandshake: &rep.Handshake, DropFIN: &rep.TCPClose, DropRST: &rep.TCPDrop}
	var done []time.Time
	var first time.Time
	for _, r := range rooms {
		for _, p := range r.players {
			rep.OutOfOrder += p.ooo
			rep.Duplicates += p.dups
			if !p.joined {
				continue
			}
			if p.user != r.oldHost && !p.endedAt.IsZero() && p.endedAt.Before(teardown) {
				p.lost = true
				rep.SocketsLost++
				rep.sample("%s: socket of %s ended before the tool closed it: %v", r.id, p.user, p.endErr)
			}
			join, upgrade = append(join, p.joinLat), append(upgrade, p.upgradeLat)
			done = append(done, p.joinedAt)
			if s := p.joinedAt.Add(-p.joinLat); first.IsZero() || s.Before(first) {
				first = s
			}
		}
		if r.broken {
			rep.RoomsLeftOut++
			continue
		}
		sum, smp := sums[r.drop], by[r.drop]
		sum.Rooms++
		if r.failedAt.IsZero() {
			sum.NoFailover++
			rep.sample("%s: no new host within %v of %s's close", r.id, cfg.Timeout, r.oldHost)
			continue
		}
		sum.FailedOver++
		delay, noticed, expiry := split(r.closedAt, r.noticedAt, r.failedAt, cfg.Grace)
		smp.delay, smp.noticed, smp.expiry = append(smp.delay, delay), append(smp.noticed, noticed), append(smp.expiry, expiry)
		if expiry == 0 {
			sum.Overlapped++
		}
		splits = append(splits, SplitSample{Room: r.id, Drop: r.drop, DelayMs: ms(delay), NoticedMs: ms(noticed), ExpiryMs: ms(expiry)})
		if r.newHost != r.successor {
			rep.WrongSuccessors++
			rep.sample("%s: new host %s, want %s (lowest joinSeq)", r.id, r.newHost, r.successor)
		}
		if why := r.splitBrain(); why != "" {
			rep.SplitBrain++
			rep.sample("%s: %s", r.id, why)
		}
	}
	rep.Players = len(join)
	if rep.JoinSeconds > 0 {
		rep.PlayersPerSecond = float64(rep.Players) / rep.JoinSeconds
	}
	rep.Join, rep.Upgrade = summarize(join), summarize(upgrade)
	for d, sum := range sums {
		sum.Delay, sum.Noticed, sum.Expiry = summarize(by[d].delay), summarize(by[d].noticed), summarize(by[d].expiry)
	}
	rep.Series = Series{JoinMs: sortedMs(join), UpgradeMs: sortedMs(upgrade),
		FailoverHandshakeMs: sortedMs(by[DropHandshake].delay), FailoverTCPCloseMs: sortedMs(by[DropFIN].delay),
		FailoverTCPDropMs: sortedMs(by[DropRST].delay),
		JoinsPer100ms:     perInterval(done, first, 100*time.Millisecond), Splits: splits}
}

// split returns a room's failover delay after the grace, counted from the
// client's close, and its two parts (see FailoverSummary): close → the
// first state without the host online (noticed, zero if none came before
// the new host), and that state plus the grace → the new host (expiry),
// the latter 0 and the former the whole delay when the disconnect's
// delivery overlapped the grace. noticed + expiry = delay always.
func split(closed, noticed, failed time.Time, grace time.Duration) (delay, toNoticed, expiry time.Duration) {
	delay = failed.Sub(closed.Add(grace))
	if noticed.IsZero() || noticed.After(failed) {
		noticed = failed
	}
	if noticed.Before(closed) { // the host was shown offline before the tool closed it
		noticed = closed
	}
	expiry = max(0, failed.Sub(noticed.Add(grace)))
	return delay, delay - expiry, expiry
}

// splitBrain says how the room's sockets disagreed on the host, or "".
func (r *foRoom) splitBrain() string {
	hostAt := map[uint64]string{}
	finalHost := ""
	for _, p := range r.players {
		for v, h := range p.hostAt {
			if o, ok := hostAt[v]; ok && o != h {
				return fmt.Sprintf("revision %d names host %q on one socket and %q on another", v, o, h)
			}
			hostAt[v] = h
		}
		if !p.joined || p.lost || p.user == r.oldHost {
			continue
		}
		h := p.final.host()
		if finalHost != "" && h != finalHost {
			return fmt.Sprintf("remaining sockets end with hosts %q and %q", finalHost, h)
		}
		finalHost = h
	}
	return ""
}

// sample keeps a few descriptions of wrong outcomes.
func (r *FailoverReport) sample(format string, args ...any) {
	if len(r.Samples) < 10 {
		r.Samples = append(r.Samples, fmt.Sprintf(format, args...))
	}
}

// perInterval counts the times in each interval from start.
func perInterval(times []time.Time, start time.Time, interval time.Duration) []int {
	var out []int
	for _, t := range times {
		i := max(0, int(t.Sub(start)/interval))
		for len(out) <= i {
			out = append(out, 0)
		}
		out[i]++
	}
	return out
}

// WriteText writes the report as a few lines and a table.
func (r *FailoverReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%s: %s%s, %d rooms × %d players, %d joins in flight, %d closes in flight (%v), grace %.0f ms\n",
		r.Scenario, r.Server, paren(r.Label), r.Rooms, r.PlayersPerRoom, r.Concurrency, r.CloseConcurrency, r.Drops, r.GraceMs)
	fmt.Fprintf(w, "joins: %d players in %.2fs = %.0f players/s; rooms left out %d; errors %d\n",
		r.Players, r.JoinSeconds, r.PlayersPerSecond, r.RoomsLeftOut, r.ErrorCount)
	fmt.Fprintf(w, "wrong successors %d, split-brain %d, out of order %d, duplicates %d, sockets lost %d, unsettled %d\n",
		r.WrongSuccessors, r.SplitBrain, r.OutOfOrder, r.Duplicates, r.SocketsLost, r.Unsettled)
	if r.IdleSeconds > 0 {
		fmt.Fprintf(w, "idle %.0fs, every socket heartbeating: store calls/s %s\n", r.IdleSeconds, formatCalls(r.IdleStoreCalls))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency (ms)\tcount\tp50\tp99\tmax\tno failover\toverlapped\t")
	row := func(name string, s LatencySummary, none, overlapped string) {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%s\t%s\t\n", name, s.Count, s.P50Ms, s.P99Ms, s.MaxMs, none, overlapped)
	}
	row("join (ticket + upgrade)", r.Join, "", "")
	row("upgrade", r.Upgrade, "", "")
	for _, d := range r.byDrop() {
		if d.sum.Rooms == 0 {
			continue
		}
		row("failover after grace, "+d.name, d.sum.Delay, fmt.Sprint(d.sum.NoFailover), fmt.Sprint(d.sum.Overlapped))
		row("  of which: close to host shown offline", d.sum.Noticed, "", "")
		row("  then to new host, after the grace", d.sum.Expiry, "", "")
	}
	tw.Flush()
	fmt.Fprintf(w, "hosts closed in %.2fs; CPU seconds used by lobbyload / the server: joins %.2f / %.2f over %.2fs, failover %.2f / %.2f over %.2fs\n",
		r.CloseSeconds, r.JoinPhase.ToolCPUSeconds, r.JoinPhase.ServerCPUSeconds, r.JoinPhase.WallSeconds,
		r.FailoverPhase.ToolCPUSeconds, r.FailoverPhase.ServerCPUSeconds, r.FailoverPhase.WallSeconds)
	if res := r.Resources; res != nil {
		fmt.Fprintf(w, "server %v: CPU %.2fs = %.0f µs per player; peak RSS %.1f MB = %.1f KB per socket (%d sockets)\n",
			res.PIDs, res.CPUSeconds, res.CPUPerPlayerUs, res.PeakRSSMB, res.PeakRSSPerSocketKB, res.Sockets)
		for _, e := range res.Errors {
			fmt.Fprintf(w, "resources: %s\n", e)
		}
	}
	for _, s := range r.Samples {
		fmt.Fprintf(w, "wrong: %s\n", s)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
}

// dropSummary is one drop style's summary with its name in reports.
type dropSummary struct {
	name string
	sum  *FailoverSummary
}

// byDrop lists the three drop styles' summaries in report order.
func (r *FailoverReport) byDrop() []dropSummary {
	return []dropSummary{{"close handshake", &r.Handshake}, {"TCP close (FIN)", &r.TCPClose}, {"TCP reset (RST)", &r.TCPDrop}}
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}
