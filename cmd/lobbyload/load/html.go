package load

import (
	"fmt"
	"html"
	"html/template"
	"io"
	"math"
	"strings"
)

// WriteHTML writes the report as one self-contained HTML page: the summary,
// the latency distributions (CDFs), joins over time and, if sampled, the
// server's RSS over time, as inline SVG. No scripts, no external resources.
func (r *FailoverReport) WriteHTML(w io.Writer) error {
	var buf strings.Builder
	WriteTable(&buf, []*FailoverReport{r})
	type drop struct {
		Name string
		Sum  *FailoverSummary
	}
	var drops []drop
	for _, d := range r.byDrop() {
		drops = append(drops, drop{d.name, d.sum})
	}
	data := struct {
		R       *FailoverReport
		Table   string
		Drops   []drop
		Figures []template.HTML
	}{R: r, Table: buf.String(), Drops: drops, Figures: r.figures()}
	return htmlPage.Execute(w, data)
}

var htmlPage = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>lobbyload {{.R.Scenario}}: {{with .R.Label}}{{.}}{{else}}{{.R.Server}}{{end}}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; max-width: 60em; }
table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: 2px 8px; text-align: right; }
td:first-child, th:first-child { text-align: left; }
pre { background: #f6f6f6; padding: 1em; overflow-x: auto; }
figure { margin: 1.5em 0; }
</style></head><body>
<h1>lobbyload {{.R.Scenario}}: {{with .R.Label}}{{.}}{{else}}{{.R.Server}}{{end}}</h1>
<p>Server {{.R.Server}}; {{.R.Rooms}} rooms × {{.R.PlayersPerRoom}} players, {{.R.Concurrency}} joins in flight,
{{.R.CloseConcurrency}} host closes in flight, grace {{.R.GraceMs}} ms, failover timeout {{.R.TimeoutMs}} ms.
Scenario {{.R.Scenario}}: the rooms take the drop styles {{.R.Drops}} in turn (handshake: a WebSocket close handshake;
fin: a TCP close without a close frame; rst: a TCP reset without a close frame). Every delay counts from the instant
just before the tool's close call.</p>
<table>
<tr><th>figure</th><th>value</th></tr>
<tr><td>players joined</td><td>{{.R.Players}} in {{printf "%.2f" .R.JoinSeconds}} s = {{printf "%.0f" .R.PlayersPerSecond}} players/s</td></tr>
<tr><td>join latency p50 / p99 / max (ticket + upgrade)</td><td>{{printf "%.1f / %.1f / %.1f" .R.Join.P50Ms .R.Join.P99Ms .R.Join.MaxMs}} ms</td></tr>
<tr><td>upgrade latency p50 / p99 / max</td><td>{{printf "%.1f / %.1f / %.1f" .R.Upgrade.P50Ms .R.Upgrade.P99Ms .R.Upgrade.MaxMs}} ms</td></tr>
{{range $d := .Drops}}{{if $d.Sum.Rooms}}{{with $d.Sum}}<tr><td>failover after the grace, {{$d.Name}}: p50 / p99 / max ({{.FailedOver}} of {{.Rooms}} rooms; none: {{.NoFailover}})</td><td>{{printf "%.1f / %.1f / %.1f" .Delay.P50Ms .Delay.P99Ms .Delay.MaxMs}} ms</td></tr>
<tr><td>of which, {{$d.Name}}: close to host shown offline; then to the new host, after the grace (p50 / p99; overlapped: {{.Overlapped}})</td><td>{{printf "%.1f / %.1f" .Noticed.P50Ms .Noticed.P99Ms}} ms; {{printf "%.1f / %.1f" .Expiry.P50Ms .Expiry.P99Ms}} ms</td></tr>
{{end}}{{end}}{{end}}<tr><td>wrong successors / split-brain rooms</td><td>{{.R.WrongSuccessors}} / {{.R.SplitBrain}}</td></tr>
<tr><td>out-of-order / duplicate revisions</td><td>{{.R.OutOfOrder}} / {{.R.Duplicates}}</td></tr>
<tr><td>sockets lost (ended before the tool closed them) / unsettled (behind their room's newest revision 5 s after the failovers)</td><td>{{.R.SocketsLost}} / {{.R.Unsettled}}</td></tr>
<tr><td>hosts closed in</td><td>{{printf "%.2f" .R.CloseSeconds}} s</td></tr>
{{with .R.JoinPhase}}<tr><td>join phase: wall / CPU of lobbyload / CPU of the server</td><td>{{printf "%.2f / %.2f / %.2f" .WallSeconds .ToolCPUSeconds .ServerCPUSeconds}} s</td></tr>{{end}}
{{with .R.FailoverPhase}}<tr><td>failover phase: wall / CPU of lobbyload / CPU of the server</td><td>{{printf "%.2f / %.2f / %.2f" .WallSeconds .ToolCPUSeconds .ServerCPUSeconds}} s</td></tr>{{end}}
<tr><td>rooms left out / errors</td><td>{{.R.RoomsLeftOut}} / {{.R.ErrorCount}}</td></tr>
{{with .R.Resources}}<tr><td>server CPU (PIDs {{.PIDs}})</td><td>{{printf "%.2f" .CPUSeconds}} s = {{printf "%.0f" .CPUPerPlayerUs}} µs per player</td></tr>
<tr><td>server peak RSS (VmHWM)</td><td>{{printf "%.1f" .PeakRSSMB}} MB = {{printf "%.1f" .PeakRSSPerSocketKB}} KB per socket</td></tr>{{end}}
</table>
{{range .R.Samples}}<p>wrong: {{.}}</p>{{end}}
{{range .R.Errors}}<p>error: {{.}}</p>{{end}}
{{with .R.Resources}}{{range .Errors}}<p>resources: {{.}}</p>{{end}}{{end}}
<h2>Table row</h2>
<pre>{{.Table}}</pre>
{{range .Figures}}<figure>{{.}}</figure>
{{end}}</body></html>
`))

// figures draws the report's plots.
func (r *FailoverReport) figures() []template.HTML {
	s := r.Series
	figs := []template.HTML{
		plot("Join and upgrade latency (CDF)", "ms", "fraction", []line{
			{"join (ticket + upgrade)", "#1f77b4", cdf(s.JoinMs), false},
			{"upgrade", "#ff7f0e", cdf(s.UpgradeMs), false},
		}),
		plot("Failover delay after the grace (CDF)", "ms after close + grace", "fraction of rooms", []line{
			{"close handshake", "#2ca02c", cdf(s.FailoverHandshakeMs), false},
			{"TCP close (FIN)", "#ff7f0e", cdf(s.FailoverTCPCloseMs), false},
			{"TCP reset (RST)", "#d62728", cdf(s.FailoverTCPDropMs), false},
		}),
		plot("Joins completed per 100 ms", "s since the first join", "joins", []line{
			{"joins", "#1f77b4", bars(s.JoinsPer100ms, 0.1), true},
		}),
	}
	if r.Resources != nil && len(r.Resources.RSS) > 0 {
		var pts []point
		for _, x := range r.Resources.RSS {
			pts = append(pts, point{x.Seconds, x.MB})
		}
		figs = append(figs, plot("Server RSS", "s since the start", "MB", []line{{"VmRSS", "#9467bd", pts, false}}))
	}
	return figs
}

type point struct{ x, y float64 }

// line is one series of a plot: a polyline, or bars from y=0.
type line struct {
	name  string
	color string
	pts   []point
	bars  bool
}

// maxCDFPoints bounds the points drawn per distribution.
const maxCDFPoints = 400

// cdf turns ascending values into the points of their distribution
// function, at most maxCDFPoints of them.
func cdf(sorted []float64) []point {
	n := len(sorted)
	step := max(1, n/maxCDFPoints)
	var pts []point
	for i := 0; i < n; i += step {
		pts = append(pts, point{sorted[i], float64(i+1) / float64(n)})
	}
	if n > 0 && (n-1)%step != 0 {
		pts = append(pts, point{sorted[n-1], 1})
	}
	return pts
}

// bars turns counts per interval into points at the intervals' starts.
func bars(counts []int, width float64) []point {
	pts := make([]point, len(counts))
	for i, c := range counts {
		pts[i] = point{float64(i) * width, float64(c)}
	}
	return pts
}

// Plot geometry, in SVG user units.
const (
	plotW, plotH               = 640.0, 300.0
	padL, padR, padT, padB     = 60.0, 20.0, 30.0, 45.0
	innerW, innerH             = plotW - padL - padR, plotH - padT - padB
	ticks                      = 5
	legendSwatchW, legendCharW = 14.0, 6.5
)

// plot draws lines on linear axes as an SVG element. Every text is escaped.
func plot(title, xLabel, yLabel string, lines []line) template.HTML {
	x0, x1, y1 := math.Inf(1), math.Inf(-1), 0.0
	for _, l := range lines {
		for _, p := range l.pts {
			x0, x1, y1 = math.Min(x0, p.x), math.Max(x1, p.x), math.Max(y1, p.y)
		}
		if l.bars && len(l.pts) > 0 {
			x0, x1 = math.Min(x0, 0), x1+(l.pts[len(l.pts)-1].x-l.pts[0].x)/float64(max(1, len(l.pts)-1))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img" aria-label="%s">`,
		plotW, plotH, plotW, plotH, esc(title))
	fmt.Fprintf(&b, `<text x="%.0f" y="18" font-size="15" font-weight="bold">%s</text>`, padL, esc(title))
	if math.IsInf(x0, 1) {
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">no data</text></svg>`, padL, padT+innerH/2)
		return template.HTML(b.String())
	}
	if x1 <= x0 {
		x1 = x0 + 1
	}
	if y1 <= 0 {
		y1 = 1
	}
	sx := func(x float64) float64 { return padL + (x-x0)/(x1-x0)*innerW }
	sy := func(y float64) float64 { return padT + innerH - y/y1*innerH }
	axes(&b, x0, x1, y1, sx, sy, xLabel, yLabel)
	for _, l := range lines {
		drawLine(&b, l, sx, sy, x1)
	}
	legend(&b, lines)
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // built from numbers and escaped text only
}

// legend names the lines in the title row, right-aligned, so that it never
// hides data.
func legend(b *strings.Builder, lines []line) {
	x := padL + innerW
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		x -= legendSwatchW + 4 + legendCharW*float64(len([]rune(l.name))) + 12
		fmt.Fprintf(b, `<rect x="%.0f" y="10" width="%.0f" height="6" fill="%s"/><text x="%.0f" y="18" font-size="12">%s</text>`,
			x, legendSwatchW, l.color, x+legendSwatchW+4, esc(l.name))
	}
}

// axes draws the frame, tick labels, grid lines and axis titles.
func axes(b *strings.Builder, x0, x1, y1 float64, sx, sy func(float64) float64, xLabel, yLabel string) {
	fmt.Fprintf(b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#888"/>`, padL, padT, innerW, innerH)
	for _, xv := range niceTicks(x0, x1) {
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" font-size="11" text-anchor="middle">%s</text>`, sx(xv), padT+innerH+15, num(xv))
	}
	for _, yv := range niceTicks(0, y1) {
		fmt.Fprintf(b, `<text x="%.0f" y="%.1f" font-size="11" text-anchor="end">%s</text>`, padL-4, sy(yv)+4, num(yv))
		fmt.Fprintf(b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#eee"/>`, padL, padL+innerW, sy(yv), sy(yv))
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" font-size="12" text-anchor="middle">%s</text>`, padL+innerW/2, plotH-8, esc(xLabel))
	fmt.Fprintf(b, `<text transform="translate(14 %.0f) rotate(-90)" font-size="12" text-anchor="middle">%s</text>`, padT+innerH/2, esc(yLabel))
}

// drawLine draws one series.
func drawLine(b *strings.Builder, l line, sx, sy func(float64) float64, x1 float64) {
	if l.bars {
		for i, p := range l.pts {
			next := x1
			if i+1 < len(l.pts) {
				next = l.pts[i+1].x
			}
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.2f" height="%.1f" fill="%s"/>`,
				sx(p.x), sy(p.y), math.Max(0.5, sx(next)-sx(p.x)-0.5), sy(0)-sy(p.y), l.color)
		}
		return
	}
	var pts strings.Builder
	for _, p := range l.pts {
		fmt.Fprintf(&pts, "%.1f,%.1f ", sx(p.x), sy(p.y))
	}
	fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, l.color, strings.TrimSpace(pts.String()))
}

// niceTicks returns about ticks round values (1, 2 or 5 × 10^k apart) in
// [lo, hi].
func niceTicks(lo, hi float64) []float64 {
	raw := (hi - lo) / ticks
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		out = append(out, v)
	}
	return out
}

// num formats a tick value compactly.
func num(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100 || v == 0:
		return fmt.Sprintf("%.0f", v)
	case a >= 1:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func esc(s string) string { return html.EscapeString(s) }
