// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// A CPU figure above the CPUs its hosts have is wrong: the collector
// attributed more CPU than existed. gpotel-top neither hides it (that would
// hide the collector's error) nor clamps it (a made-up figure): it shows the
// API's figure, marked impossibleMark, and says why on the status line.
const (
	impossibleMark = "!"
	impossibleNote = impossibleMark + " more CPU than the hosts have"
)

// capacity is what the hosts can do: the CPUs the snapshot reports per
// host (HostTop.cpus), and the cluster's (ClusterTotals.cpus: the API
// sums them only when every host reports its own). 0: unknown, nothing is
// marked.
type capacity struct {
	host    map[string]float64
	cluster float64
}

func capacityOf(top *gpotelv1.GetClusterTopResponse) capacity {
	c := capacity{host: map[string]float64{}, cluster: float64(top.GetCluster().GetCpus())}
	for _, h := range top.GetHosts() {
		if h.GetCpus() > 0 {
			c.host[h.GetHostname()] = float64(h.GetCpus())
		}
	}
	return c
}

// note is what the status line says about a marked figure.
func (c capacity) note() string {
	cpus := ""
	if c.cluster > 0 {
		cpus = fmt.Sprintf(" (%.0f CPUs)", c.cluster)
	}
	return impossibleNote + cpus + ": the collector's figure is wrong, shown as it came"
}

// clusterImpossible: the cluster's or a host's use is above its CPUs.
func clusterImpossible(top *gpotelv1.GetClusterTopResponse, c capacity) bool {
	if !possible(top.GetCluster().GetUsage().GetCpuCores(), c.cluster) {
		return true
	}
	for _, h := range top.GetHosts() {
		if !possible(h.GetUsage().GetCpuCores(), c.host[h.GetHostname()]) {
			return true
		}
	}
	return false
}

// cpuText is CPU use in percent of a core, marked when above limit cores
// (limit 0: unknown).
func cpuText(cores, limit float64) string {
	s := percentText(cores * 100)
	if possible(cores, limit) {
		return s
	}
	return s + impossibleMark
}

// cpuPercent is cpuText with its unit, for a figure in a sentence: "150%", "1334%!".
func cpuPercent(cores, limit float64) string {
	s := percentText(cores*100) + "%"
	if possible(cores, limit) {
		return s
	}
	return s + impossibleMark
}

// possible: within limit cores, or the limit is unknown.
func possible(cores, limit float64) bool { return limit <= 0 || cores <= limit }
