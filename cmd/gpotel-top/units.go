// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// One unit per kind of figure, its sign on the screen:
//
//   - time used or waited per second, CPU and the waits alike: percent of
//     one core (or of one process waiting all the time), "150" = one and a
//     half cores, in columns titled with "%";
//   - bytes: binary units with their letter, "406B", "8.0K", "123M";
//     a rate has "/s" in its column title;
//   - durations: "0.4s", "12.5s", "3m04s", "2h01m", "3d04h".
//
// What the API leaves absent is absentText, never 0.
const absentText = "-"

// percentText is a share of one core: one decimal under 100, none above,
// so that a column of them stays narrow.
func percentText(percent float64) string {
	if math.Abs(percent) < 99.95 {
		return strconv.FormatFloat(percent, 'f', 1, 64)
	}
	return strconv.FormatFloat(percent, 'f', 0, 64)
}

// bytesText prints binary units: 406B, 8.0K, 123M, 1023M, 1.0G.
func bytesText(v float64) string {
	const units = "KMGTPE"
	if v < 1024 {
		return strconv.FormatFloat(math.Max(v, 0), 'f', 0, 64) + "B"
	}
	i := -1
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if v < 9.95 {
		return strconv.FormatFloat(v, 'f', 1, 64) + string(units[i])
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + string(units[i])
}

// durationText is how long something took or has run, rounded to its
// last unit shown (89.996 s is 1m30s), alike for every duration and CPU
// time.
func durationText(seconds float64) string {
	if seconds < 0 || math.IsNaN(seconds) {
		return absentText
	}
	if tenths := math.Round(seconds * 10); tenths < 600 {
		return strconv.FormatFloat(tenths/10, 'f', 1, 64) + "s"
	}
	if s := int64(math.Round(seconds)); s < 3600 {
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	if m := int64(math.Round(seconds / 60)); m < 24*60 {
		return fmt.Sprintf("%dh%02dm", m/60, m%60)
	}
	h := int64(math.Round(seconds / 3600))
	return fmt.Sprintf("%dd%02dh", h/24, h%24)
}

// secondsText is an amount of CPU or waiting, in seconds.
func secondsText(seconds float64) string { return strconv.FormatFloat(seconds, 'f', 2, 64) + "s" }

// constantText is a smoothing time constant or a window: "10s", "1m".
func constantText(seconds float64) string {
	switch {
	case seconds <= 0:
		return absentText
	case math.Mod(seconds, 60) == 0:
		return strconv.FormatFloat(seconds/60, 'f', 0, 64) + "m"
	}
	return strconv.FormatFloat(seconds, 'f', 0, 64) + "s"
}

// shareText is a share 0..1 of wall time, in percent.
func shareText(share float64) string { return strconv.FormatFloat(share*100, 'f', 0, 64) + "%" }

// clockText is the wall clock of the screen's last answer.
func clockText(t time.Time) string { return t.Format("15:04:05") }
