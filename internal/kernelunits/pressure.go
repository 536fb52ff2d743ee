// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package kernelunits

// MicrosToSeconds converts microseconds (a pressure file's total stall) to seconds.
func MicrosToSeconds(us int64) float64 { return float64(us) / 1e6 }

// PercentToRatio converts a pressure file's avg10/avg60/avg300 (percent) to a 0..1 share.
func PercentToRatio(percent float64) float64 { return percent / 100 }
