package report

import (
	"fmt"
	"math"
	"slices"
	"time"

	"gonum.org/v1/plot/plotter"
)

// bin is the width of the plots' time buckets.
const bin = time.Second

// span is one fault window on a plot's time axis, in seconds since the
// run started.
type span struct {
	label  string
	x0, x1 float64
}

// faultSpans are r's fault windows, numbered from 1 as in summary.md.
// A window ends when the cluster recovered, or when the fault was healed
// if it never recovered, or when the run ended if neither happened.
func faultSpans(r *Run) []span {
	spans := make([]span, 0, len(r.Faults))
	for i, f := range r.Faults {
		end := f.Recovered
		if end.IsZero() {
			end = f.Healed
		}
		if end.IsZero() {
			end = r.Ended
		}
		spans = append(spans, span{
			label: fmt.Sprintf("%d: %s", i+1, f.Name),
			x0:    seconds(r.Started, f.Injected),
			x1:    seconds(r.Started, end),
		})
	}
	return spans
}

// seconds is how long after started t was, in seconds.
func seconds(started, t time.Time) float64 {
	return t.Sub(started).Seconds()
}

// binOf is the index of the bucket t falls in, -1 before started.
func binOf(started, t time.Time) int {
	d := t.Sub(started)
	if d < 0 {
		return -1
	}
	return int(d / bin)
}

// bins is how many buckets cover a run of length d.
func bins(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int((d + bin - 1) / bin)
}

// bucketRequests counts the successful and the failed requests per
// bucket of their End, from started over at least length (more when
// requests ended later). Requests that ended before started are left
// out.
func bucketRequests(started time.Time, length time.Duration, reqs []Request) (ok, failed []int) {
	n := bins(length)
	for _, q := range reqs {
		n = max(n, binOf(started, q.End)+1)
	}
	ok, failed = make([]int, n), make([]int, n)
	for _, q := range reqs {
		i := binOf(started, q.End)
		switch {
		case i < 0:
		case q.Failed:
			failed[i]++
		default:
			ok[i]++
		}
	}
	return ok, failed
}

// rateXYs plots per-bucket counts as a rate per second at each bucket's
// middle.
func rateXYs(counts []int) plotter.XYs {
	xys := make(plotter.XYs, len(counts))
	for i, n := range counts {
		xys[i] = plotter.XY{X: mid(i), Y: float64(n) / bin.Seconds()}
	}
	return xys
}

// errorRateXYs plots the failed share of each bucket's requests, in
// percent; buckets without requests have no point.
func errorRateXYs(ok, failed []int) plotter.XYs {
	var xys plotter.XYs
	for i := range ok {
		if all := ok[i] + failed[i]; all > 0 {
			xys = append(xys, plotter.XY{X: mid(i), Y: 100 * float64(failed[i]) / float64(all)})
		}
	}
	return xys
}

// gatewayLag is one gateway's watch lag over time: the p99 of each
// bucket, in milliseconds.
type gatewayLag struct {
	gateway int
	xys     plotter.XYs
}

// lagP99 buckets lags by gateway and receipt time and takes each
// bucket's p99, ordered by gateway. Lags received before started are
// left out.
func lagP99(started time.Time, lags []Lag) []gatewayLag {
	byGateway := map[int]map[int][]time.Duration{}
	for _, l := range lags {
		i := binOf(started, l.At)
		if i < 0 {
			continue
		}
		if byGateway[l.Gateway] == nil {
			byGateway[l.Gateway] = map[int][]time.Duration{}
		}
		byGateway[l.Gateway][i] = append(byGateway[l.Gateway][i], l.Lag)
	}
	gateways := make([]int, 0, len(byGateway))
	for g := range byGateway {
		gateways = append(gateways, g)
	}
	slices.Sort(gateways)
	out := make([]gatewayLag, 0, len(gateways))
	for _, g := range gateways {
		buckets := byGateway[g]
		idx := make([]int, 0, len(buckets))
		for i := range buckets {
			idx = append(idx, i)
		}
		slices.Sort(idx)
		xys := make(plotter.XYs, 0, len(idx))
		for _, i := range idx {
			ds := buckets[i]
			slices.Sort(ds)
			p99 := quantile(ds, 0.99)
			xys = append(xys, plotter.XY{X: mid(i), Y: float64(p99) / float64(time.Millisecond)})
		}
		out = append(out, gatewayLag{gateway: g, xys: xys})
	}
	return out
}

// quantile is the nearest-rank q-quantile of sorted (0 when empty).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// mid is the time of bucket i's middle, in seconds since the start.
func mid(i int) float64 {
	return (float64(i) + 0.5) * bin.Seconds()
}

// gatewayName labels gateway g's line.
func gatewayName(g int) string {
	if g < 0 {
		return "gateway unknown"
	}
	return fmt.Sprintf("gateway %d", g)
}
