package snapshotdiffprocessor

import (
	"math"
	"testing"
	"time"

	sc "github.com/gpotel/gpotel/internal/gpsemconv"
)

func TestFiguresResumeAfterTheWallClockStepsBack(t *testing.T) {
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}, TimeConstants: []time.Duration{time.Minute},
		Queries: QueriesConfig{Enabled: true, MaxFinished: 10}})
	one := []int64{1}
	// One process, one scrape every 15 s of real time; after the second the
	// wall clock is stepped back by 10 min 15 s.
	steps := []struct{ sec, cpu, wantWindow, wantSpan float64 }{
		{0, 1, 0, 0},
		{15, 2.5, 1.5, 15},
		{-600, 4, 0, 0}, // the timeline starts over: no interval yet
		{-585, 6, 2, 15},
		{-570, 9, 5, 30},
	}
	keep := math.Exp(-15.0 / 60)
	// The averages go on from where they were: the load did not step back.
	smoothed := map[float64]float64{15: 1.5 / 15 * (1 - keep)}
	smoothed[-600] = smoothed[15] // no interval yet
	smoothed[-585] = smoothed[15]*keep + 2.0/15*(1-keep)
	smoothed[-570] = smoothed[-585]*keep + 3.0/15*(1-keep)
	for _, s := range steps {
		sec, cpu := s.sec, s.cpu
		out := feed(t, p, sink, snap(sec, nil, one, proc("sdw1", 0, 1, 100, -1000, cpu, 0)))
		if got, err := lookupFigure(out, 1, sc.MetricSessionCPUTime, sc.AttrWindow, "1m", sc.AttrCPUMode, sc.CPUModeUser); err != nil || math.Abs(got-s.wantWindow) > 1e-9 {
			t.Fatalf("snapshot at %+.0f s: 1m user CPU %v (%v), want %v", sec, got, err, s.wantWindow)
		}
		if got := figure(t, out, 1, sc.MetricSessionWindowSpan, sc.AttrWindow, "1m"); got != s.wantSpan {
			t.Fatalf("snapshot at %+.0f s: span %v, want %v", sec, got, s.wantSpan)
		}
		if got := figure(t, out, 1, sc.MetricSessionCPUTime, sc.AttrWindow, sc.WindowLifetime, sc.AttrCPUMode, sc.CPUModeUser); got != cpu {
			t.Fatalf("snapshot at %+.0f s: lifetime user CPU %v, want %v", sec, got, cpu)
		}
		if want, ok := smoothed[sec]; ok {
			if got := figure(t, out, 1, sc.MetricSessionCPUUsageSmoothed, sc.AttrTimeConstant, "1m"); math.Abs(got-want) > 1e-12 {
				t.Fatalf("snapshot at %+.0f s: smoothed CPU %v, want %v", sec, got, want)
			}
			// The host's one process is the session's: the same average.
			if got := smoothedPoint(t, out, sc.MetricHostCPUUsageSmoothed, "sdw1", "1m"); math.Abs(got-want) > 1e-12 {
				t.Fatalf("snapshot at %+.0f s: host smoothed CPU %v, want %v", sec, got, want)
			}
		}
	}
}

func TestASnapshotAMinuteOlderIsAReplayNotAClockStep(t *testing.T) {
	p, sink := newTestProcessor(t, &Config{Windows: []time.Duration{time.Minute}})
	one := []int64{1}
	feed(t, p, sink, snap(60, nil, one, proc("sdw1", 0, 1, 100, -10, 1, 0)))
	out := feed(t, p, sink, snap(0, nil, one, proc("sdw1", 0, 1, 100, -10, 1, 0)))
	if _, err := lookupFigure(out, 1, sc.MetricSessionCPUTime, sc.AttrWindow, "1m", sc.AttrCPUMode, sc.CPUModeUser); err == nil {
		t.Error("a snapshot one minute older than the newest got figures: it is a replay")
	}
}
