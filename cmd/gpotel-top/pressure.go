// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// errNoPressure: the server predates gpotel.v1.PressureService.
var errNoPressure = fmt.Errorf("this collector does not serve host pressure (gpotel.v1.PressureService)")

// hostPressure asks for the latest snapshot's per-host pressure.
func (c *sessionClient) hostPressure(ctx context.Context) ([]*gpotelv1.HostPressure, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := gpotelv1.NewPressureServiceClient(c.conn).GetHostPressure(ctx, &gpotelv1.GetHostPressureRequest{})
	if status.Code(err) == codes.Unimplemented {
		return nil, errNoPressure
	}
	if err != nil {
		return nil, c.callError("host pressure", err)
	}
	return resp.GetHosts(), nil
}

// pressurePane is one line per host: the share of the last 10 s in which
// tasks stalled for CPU, memory and I/O (some/full), then each control
// group's CPU stall (cgroup v2) or its tasks by state (cgroup v1).
func pressurePane(hosts []*gpotelv1.HostPressure, width int) []string {
	if len(hosts) == 0 {
		return nil
	}
	out := []string{headerStyle.Render(cutLine(fmt.Sprintf("%-12s %-6s %-11s %-11s %s", "HOST", "CPU", "MEM", "IO", "GROUPS (stalled share of the last "+
		"10 s)"), width))}
	for _, h := range hosts {
		var groups []string
		for _, g := range h.GetGroups() {
			if f := figure(g.GetPressure(), "cpu", "some"); f != nil {
				groups = append(groups, fmt.Sprintf("%s cpu %s", g.GetName(), shareText(f.GetAvg10())))
			} else if t := g.GetTasks(); t != nil {
				groups = append(groups, fmt.Sprintf("%s R%d S%d D%d", g.GetName(), t["running"], t["sleeping"], t["uninterruptible"]))
			}
		}
		out = append(out, cutLine(fmt.Sprintf("%s %-6s %-11s %-11s %s", pad(h.GetHostname(), 12, false),
			avg10(h.GetPressure(), "cpu", "some"),
			avg10(h.GetPressure(), "memory", "some")+"/"+avg10(h.GetPressure(), "memory", "full"),
			avg10(h.GetPressure(), "io", "some")+"/"+avg10(h.GetPressure(), "io", "full"),
			strings.Join(groups, "  ")), width))
	}
	return out
}

func figure(fs []*gpotelv1.PressureFigures, resource, kind string) *gpotelv1.PressureFigures {
	for _, f := range fs {
		if f.GetResource() == resource && f.GetKind() == kind {
			return f
		}
	}
	return nil
}

func avg10(fs []*gpotelv1.PressureFigures, resource, kind string) string {
	if f := figure(fs, resource, kind); f != nil {
		return shareText(f.GetAvg10())
	}
	return absentText
}
