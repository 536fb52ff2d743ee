// Package clockstep tells a wall clock stepped back (NTP, a virtual machine
// resumed) from a replayed or late snapshot, for the components that keep a
// timeline of snapshots stamped by the receiver's wall clock.
package clockstep

import "time"

// Tolerance is how much older than the newest snapshot held a snapshot may
// be and still count as a replay or a late arrival, to be refused; an older
// one means the clock went back, and the timeline starts over from it.
const Tolerance = time.Minute

// SteppedBack reports whether a snapshot taken at, when the newest one held
// was taken at newest, means the wall clock was stepped back.
func SteppedBack(newest, at time.Time) bool {
	return newest.Sub(at) > Tolerance
}
