//go:generate ../../bin/mdatagen metadata.yaml

// Package snapshotdiffprocessor turns the gpsession receiver's cumulative
// per-process snapshots into windowed per-session figures.
package snapshotdiffprocessor
