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
		var noFailover, wrong, split, ooo, leftOut int
		for _, r := range byLabel[l] {
			noFailover += r.Handshake.NoFailover + r.TCPDrop.NoFailover
			wrong, split, ooo, leftOut = wrong+r.WrongSuccessors, split+r.SplitBrain, ooo+r.OutOfOrder, leftOut+r.RoomsLeftOut
		}
		r := byLabel[l][0]
		fmt.Fprintf(w, "%s: median of %d run(s), %d rooms × %d players; in all runs: rooms without failover %d, wrong successors %d, split-brain %d, out of order %d, rooms left out %d\n",
			l, len(byLabel[l]), r.Rooms, r.PlayersPerRoom, noFailover, wrong, split, ooo, leftOut)
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
