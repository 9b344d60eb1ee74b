package load

import (
	"fmt"
	"io"
	"sort"
)

// WriteTable writes a markdown table of failover reports: one row per
// label (the server URL when unlabelled), in order of first appearance,
// each figure the median over that label's runs. Under the table, one line
// per label says how many runs it has and sums what went wrong in them.
// A second table splits the failover delay, per label and drop style that
// some run of the label used: the delay, close → host shown offline, then
// → the new host (p50 / p99, medians over the runs; see FailoverSummary),
// and the overlapped rooms summed over the runs.
func WriteTable(w io.Writer, reps []*FailoverReport) {
	var labels []string
	byLabel := map[string][]*FailoverReport{}
	for _, r := range reps {
		l := r.Label
		if l == "" {
			l = r.Server
		}
		if byLabel[l] == nil {
			labels = append(labels, l)
		}
		byLabel[l] = append(byLabel[l], r)
	}
	fmt.Fprintln(w, "| server | players/s | server CPU per player | peak RSS | peak RSS per socket | failover after the grace p50 / p99 (close handshake) | p99 (TCP drop) |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, l := range labels {
		rs := byLabel[l]
		cpu, rss, perSock := "n/a", "n/a", "n/a"
		if withResources(rs) {
			cpu = fmt.Sprintf("%.0f µs", median(rs, func(r *FailoverReport) float64 { return r.Resources.CPUPerPlayerUs }))
			rss = fmt.Sprintf("%.1f MB", median(rs, func(r *FailoverReport) float64 { return r.Resources.PeakRSSMB }))
			perSock = fmt.Sprintf("%.1f KB", median(rs, func(r *FailoverReport) float64 { return r.Resources.PeakRSSPerSocketKB }))
		}
		fmt.Fprintf(w, "| %s | %.0f | %s | %s | %s | %.1f / %.1f ms | %.1f ms |\n", l,
			median(rs, func(r *FailoverReport) float64 { return r.PlayersPerSecond }), cpu, rss, perSock,
			median(rs, func(r *FailoverReport) float64 { return r.Handshake.Delay.P50Ms }),
			median(rs, func(r *FailoverReport) float64 { return r.Handshake.Delay.P99Ms }),
			median(rs, func(r *FailoverReport) float64 { return r.TCPDrop.Delay.P99Ms }))
	}
	fmt.Fprintln(w)
	for _, l := range labels {
		var noFailover, wrong, split, ooo, leftOut, lost int
		for _, r := range byLabel[l] {
			noFailover += r.Handshake.NoFailover + r.TCPClose.NoFailover + r.TCPDrop.NoFailover
			lost += r.SocketsLost
			wrong, split, ooo, leftOut = wrong+r.WrongSuccessors, split+r.SplitBrain, ooo+r.OutOfOrder, leftOut+r.RoomsLeftOut
		}
		r := byLabel[l][0]
		fmt.Fprintf(w, "%s: median of %d run(s), %d rooms × %d players; in all runs: rooms without failover %d, wrong successors %d, split-brain %d, out of order %d, rooms left out %d, sockets lost %d\n",
			l, len(byLabel[l]), r.Rooms, r.PlayersPerRoom, noFailover, wrong, split, ooo, leftOut, lost)
	}
	writeSplitTable(w, labels, byLabel)
}

// writeSplitTable writes the second table of WriteTable.
func writeSplitTable(w io.Writer, labels []string, byLabel map[string][]*FailoverReport) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| server | drop | rooms | failover after the grace p50 / p99 | close → host shown offline p50 / p99 | then → new host, after the grace, p50 / p99 | overlapped |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, l := range labels {
		rs := byLabel[l]
		for i := range rs[0].byDrop() {
			var used []*FailoverReport
			rooms, overlapped := 0, 0
			for _, r := range rs {
				if s := r.byDrop()[i].sum; s.Rooms > 0 {
					used = append(used, r)
					rooms, overlapped = rooms+s.Rooms, overlapped+s.Overlapped
				}
			}
			if len(used) == 0 {
				continue
			}
			q := func(f func(*FailoverSummary) float64) float64 {
				return median(used, func(r *FailoverReport) float64 { return f(r.byDrop()[i].sum) })
			}
			fmt.Fprintf(w, "| %s | %s | %d | %.1f / %.1f ms | %.1f / %.1f ms | %.1f / %.1f ms | %d |\n", l, rs[0].byDrop()[i].name, rooms,
				q(func(s *FailoverSummary) float64 { return s.Delay.P50Ms }), q(func(s *FailoverSummary) float64 { return s.Delay.P99Ms }),
				q(func(s *FailoverSummary) float64 { return s.Noticed.P50Ms }), q(func(s *FailoverSummary) float64 { return s.Noticed.P99Ms }),
				q(func(s *FailoverSummary) float64 { return s.Expiry.P50Ms }), q(func(s *FailoverSummary) float64 { return s.Expiry.P99Ms }),
				overlapped)
		}
	}
}

// withResources reports whether every run measured the server.
func withResources(rs []*FailoverReport) bool {
	for _, r := range rs {
		if r.Resources == nil {
			return false
		}
	}
	return true
}

// median of f over the reports; the mean of the middle two for an even
// count.
func median(rs []*FailoverReport, f func(*FailoverReport) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	sort.Float64s(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}
