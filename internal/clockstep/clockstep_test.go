package clockstep

import (
	"testing"
	"time"
)

func TestOnlyAStepBeyondTheToleranceIsAClockStep(t *testing.T) {
	newest := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for age, want := range map[time.Duration]bool{
		-time.Second:                false, // newer
		0:                           false, // a replay
		Tolerance:                   false, // late
		Tolerance + time.Nanosecond: true,
		10 * time.Minute:            true,
	} {
		if got := SteppedBack(newest, newest.Add(-age)); got != want {
			t.Errorf("a snapshot %v older than the newest: stepped back %v, want %v", age, got, want)
		}
	}
}
