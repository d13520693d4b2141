package bench

import (
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// palette colours the contenders in report order (colour-blind safe first).
var palette = []string{"#000000", "#999999", "#0072b2", "#56b4e9", "#009e73", "#d55e00", "#e69f00", "#cc79a7", "#f0e442", "#7f3c8d"}

// WriteSVG draws the rows as an SVG image (hand-written, no dependency):
// on the left, the healthy lock+unlock p50 by N for every contender (one
// line each; a contender measured at one N is a point); on the right, for
// the contention rows at N=5 (or the largest N measured), each contender's share of
// handoffs to another client (bars, 100% is a perfectly fair lock) with
// its handoff p99 and acquisitions per second. A panel without rows says
// so.
func WriteSVG(w io.Writer, rows []Row) error {
	const (
		width, height = 1150, 400
		lx, ly        = 60, 50   // left panel origin (top left of the plot)
		lw, lh        = 300, 300 // left plot size
		rx, rw        = 700, 260 // right panel: bar start and full bar width
	)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)

	// Left: healthy p50 by N.
	var names []string
	var ns []int
	maxP := 0.0
	for _, r := range rows {
		if r.Condition != Healthy.Name || r.Cycles == 0 {
			continue
		}
		if !slices.Contains(names, r.Contender) {
			names = append(names, r.Contender)
		}
		if !slices.Contains(ns, r.N) {
			ns = append(ns, r.N)
		}
		maxP = max(maxP, r.P50Ms)
	}
	slices.Sort(ns)
	text(&b, lx, 25, "start", "bold", "healthy: lock+unlock p50 (ms) by number of masters N")
	if len(ns) == 0 {
		text(&b, lx, ly+20, "start", "", "no healthy rows")
	} else {
		top := niceCeil(maxP)
		xOf := func(n int) float64 {
			if len(ns) == 1 {
				return lx + lw/2
			}
			return lx + float64(slices.Index(ns, n))*lw/float64(len(ns)-1)
		}
		yOf := func(v float64) float64 { return ly + lh - v/top*lh }
		for i := 0; i <= 5; i++ {
			v := top * float64(i) / 5
			y := yOf(v)
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#dddddd"/>`+"\n", lx, y, lx+lw, y)
			text(&b, lx-6, y+4, "end", "", fmt.Sprintf("%.3g", v))
		}
		for _, n := range ns {
			text(&b, xOf(n), ly+lh+18, "middle", "", fmt.Sprintf("N=%d", n))
		}
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000000"/>`+"\n", lx, ly+lh, lx+lw, ly+lh)
		for i, name := range names {
			col := palette[i%len(palette)]
			var pts []string
			for _, n := range ns {
				for _, r := range rows {
					if r.Contender == name && r.N == n && r.Condition == Healthy.Name && r.Cycles > 0 {
						pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(n), yOf(r.P50Ms)))
						fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s N=%d: %.3f ms</title></circle>`+"\n",
							xOf(n), yOf(r.P50Ms), col, esc(name), n, r.P50Ms)
					}
				}
			}
			if len(pts) > 1 {
				fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), col)
			}
			ly0 := float64(ly + 10 + 18*i)
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-width="3"/>`+"\n", lx+lw+15, ly0, lx+lw+35, ly0, col)
			text(&b, lx+lw+40, ly0+4, "start", "", name)
		}
	}

	// Right: contention fairness at N=5, or the largest N measured.
	var crows []Row
	cn := 0
	for _, r := range rows {
		if r.Clients > 0 && r.Cycles > 0 && cn != goalN {
			cn = max(cn, r.N)
			if r.N == goalN {
				cn = goalN
			}
		}
	}
	for _, r := range rows {
		if r.Clients > 0 && r.Cycles > 0 && r.N == cn {
			crows = append(crows, r)
		}
	}
	if len(crows) == 0 {
		text(&b, rx-140, 25, "start", "bold", "contention: no rows")
	} else {
		text(&b, rx-140, 25, "start", "bold", fmt.Sprintf("contention, %d clients on one lock, N=%d: handoffs to another client", crows[0].Clients, cn))
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000000"/>`+"\n", rx, ly, rx, ly+lh)
		for _, pct := range []int{0, 50, 100} {
			x := float64(rx) + float64(pct)/100*rw
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#dddddd"/>`+"\n", x, ly, x, ly+lh)
			text(&b, x, ly+lh+18, "middle", "", fmt.Sprintf("%d%%", pct))
		}
		bar := min(40.0, float64(lh)/float64(len(crows)))
		for i, r := range crows {
			y := float64(ly) + float64(i)*bar
			col := palette[max(slices.Index(names, r.Contender), 0)%len(palette)]
			if !slices.Contains(names, r.Contender) {
				col = palette[(len(names)+i)%len(palette)]
			}
			share := 1 - r.SameClientShare
			fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %.0f%% of handoffs to another client</title></rect>`+"\n",
				rx, y+4, share*rw, bar-8, col, esc(r.Contender), 100*share)
			text(&b, rx-6, y+bar/2+4, "end", "", r.Contender)
			text(&b, float64(rx)+share*rw+4, y+bar/2+4, "start", "", fmt.Sprintf("%.0f%%", 100*share))
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-size="10" fill="#333333">%s</text>`+"\n", rx+rw+40, y+bar/2+4,
				esc(fmt.Sprintf("p99 %.2f ms, %.0f acq/s", r.HandoffP99Ms, r.AcquisitionsPerSec)))
		}
		text(&b, rx+rw+40, ly-8, "start", "", "handoff p99, acq/s")
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// text writes one text element; weight "bold" makes it bold.
func text(b *strings.Builder, x, y any, anchor, weight, s string) {
	if s == "" {
		return
	}
	attr := ""
	if weight == "bold" {
		attr = ` font-weight="bold"`
	}
	fmt.Fprintf(b, `<text x="%v" y="%v" text-anchor="%s"%s>%s</text>`+"\n", num(x), num(y), anchor, attr, esc(s))
}

// num formats a coordinate.
func num(v any) string {
	switch v := v.(type) {
	case float64:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprint(v)
	}
}

// esc escapes s for XML text and attributes.
func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (1 for v <= 0).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}
