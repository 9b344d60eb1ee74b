package load

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// FailoverReport is what a failover run measured.
type FailoverReport struct {
	Scenario         string  `json:"scenario"`
	Label            string  `json:"label,omitempty"`
	Server           string  `json:"server"`
	Rooms            int     `json:"rooms"`
	PlayersPerRoom   int     `json:"playersPerRoom"`
	Concurrency      int     `json:"concurrency"`
	CloseConcurrency int     `json:"closeConcurrency"`
	GraceMs          float64 `json:"graceMs"`
	TimeoutMs        float64 `json:"timeoutMs"`

	// Players joined (ticket and upgrade done); RoomsLeftOut had a join
	// fail or never reached full membership, and took no part in the
	// failover.
	Players      int `json:"players"`
	RoomsLeftOut int `json:"roomsLeftOut"`
	// ErrorCount errors in all; Errors are the first few.
	ErrorCount int      `json:"errorCount"`
	Errors     []string `json:"errors,omitempty"`

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

	Handshake FailoverSummary `json:"failoverHandshake"`
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

	Resources *ServerResources `json:"serverResources,omitempty"`
	Series    Series           `json:"series"`
}

// FailoverSummary is the failover of the rooms whose host closed one way.
// Delay is from the host's close plus the grace to the first arrival, on a
// remaining socket, of a state naming a new host. It splits in two at the
// first arrival of a state showing the old host no longer online: Noticed
// is from the close to then (the server noticing the close, committing
// the disconnect and delivering it), Expiry from then plus the grace to
// the new host (the lease timer's lateness, the expiry's commit and its
// delivery). A server that hands the host on without first showing the
// host offline has no Noticed or Expiry samples for that room.
type FailoverSummary struct {
	Rooms      int            `json:"rooms"`
	FailedOver int            `json:"failedOver"`
	NoFailover int            `json:"noFailover"` // none within the timeout
	Delay      LatencySummary `json:"delay"`
	Noticed    LatencySummary `json:"noticed"`
	Expiry     LatencySummary `json:"expiry"`
}

// Series are the raw figures behind the plots, in milliseconds, ascending.
type Series struct {
	JoinMs              []float64 `json:"joinMs"`
	UpgradeMs           []float64 `json:"upgradeMs"`
	FailoverHandshakeMs []float64 `json:"failoverHandshakeMs"`
	FailoverTCPDropMs   []float64 `json:"failoverTcpDropMs"`
	// JoinsPer100ms counts joins completed in each 100 ms of the join phase.
	JoinsPer100ms []int `json:"joinsPer100ms"`
}

// OK reports whether every room failed over to the right successor, with
// one view of the host and revisions in order.
func (r *FailoverReport) OK() bool {
	return r.ErrorCount == 0 && r.RoomsLeftOut == 0 && r.Handshake.NoFailover == 0 && r.TCPDrop.NoFailover == 0 &&
		r.WrongSuccessors == 0 && r.SplitBrain == 0 && r.OutOfOrder == 0
}

// tally fills the report from the rooms once every reader has ended.
func tally(rep *FailoverReport, cfg FailoverConfig, rooms []*foRoom) {
	var join, upgrade, hs, tcp []time.Duration
	var noticed, expiry [2][]time.Duration // by handshake (0) and TCP drop (1)
	var done []time.Time
	var first time.Time
	for _, r := range rooms {
		for _, p := range r.players {
			rep.OutOfOrder += p.ooo
			rep.Duplicates += p.dups
			if !p.joined {
				continue
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
		sum, delays, way := &rep.Handshake, &hs, 0
		if r.tcpDrop {
			sum, delays, way = &rep.TCPDrop, &tcp, 1
		}
		sum.Rooms++
		if r.failedAt.IsZero() {
			sum.NoFailover++
			rep.sample("%s: no new host within %v of %s's close", r.id, cfg.Timeout, r.oldHost)
			continue
		}
		sum.FailedOver++
		*delays = append(*delays, r.failedAt.Sub(r.closedAt.Add(cfg.Grace)))
		if !r.noticedAt.IsZero() && r.noticedAt.Before(r.failedAt) {
			noticed[way] = append(noticed[way], r.noticedAt.Sub(r.closedAt))
			expiry[way] = append(expiry[way], r.failedAt.Sub(r.noticedAt.Add(cfg.Grace)))
		}
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
	rep.Handshake.Delay, rep.TCPDrop.Delay = summarize(hs), summarize(tcp)
	rep.Handshake.Noticed, rep.TCPDrop.Noticed = summarize(noticed[0]), summarize(noticed[1])
	rep.Handshake.Expiry, rep.TCPDrop.Expiry = summarize(expiry[0]), summarize(expiry[1])
	rep.Series = Series{JoinMs: sortedMs(join), UpgradeMs: sortedMs(upgrade),
		FailoverHandshakeMs: sortedMs(hs), FailoverTCPDropMs: sortedMs(tcp),
		JoinsPer100ms: perInterval(done, first, 100*time.Millisecond)}
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
		if !p.joined || p.user == r.oldHost {
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
	fmt.Fprintf(w, "failover: %s%s, %d rooms × %d players, %d joins in flight, grace %.0f ms\n",
		r.Server, paren(r.Label), r.Rooms, r.PlayersPerRoom, r.Concurrency, r.GraceMs)
	fmt.Fprintf(w, "joins: %d players in %.2fs = %.0f players/s; rooms left out %d; errors %d\n",
		r.Players, r.JoinSeconds, r.PlayersPerSecond, r.RoomsLeftOut, r.ErrorCount)
	fmt.Fprintf(w, "wrong successors %d, split-brain %d, out of order %d, duplicates %d\n",
		r.WrongSuccessors, r.SplitBrain, r.OutOfOrder, r.Duplicates)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency (ms)\tcount\tp50\tp99\tmax\tno failover\t")
	row := func(name string, s LatencySummary, none string) {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%s\t\n", name, s.Count, s.P50Ms, s.P99Ms, s.MaxMs, none)
	}
	row("join (ticket + upgrade)", r.Join, "")
	row("upgrade", r.Upgrade, "")
	row("failover after grace, close handshake", r.Handshake.Delay, fmt.Sprint(r.Handshake.NoFailover))
	row("failover after grace, TCP drop", r.TCPDrop.Delay, fmt.Sprint(r.TCPDrop.NoFailover))
	row("  of which: close to host shown offline, handshake", r.Handshake.Noticed, "")
	row("  then to new host, after the grace, handshake", r.Handshake.Expiry, "")
	row("  of which: close to host shown offline, TCP drop", r.TCPDrop.Noticed, "")
	row("  then to new host, after the grace, TCP drop", r.TCPDrop.Expiry, "")
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

func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}
