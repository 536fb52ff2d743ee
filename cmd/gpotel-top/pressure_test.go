// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"google.golang.org/grpc"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

type fixedPressure struct {
	gpotelv1.UnimplementedPressureServiceServer
	hosts []*gpotelv1.HostPressure
}

func (f fixedPressure) GetHostPressure(context.Context, *gpotelv1.GetHostPressureRequest) (*gpotelv1.GetHostPressureResponse, error) {
	return &gpotelv1.GetHostPressureResponse{SnapshotTimeUnixNano: 1, Hosts: f.hosts}, nil
}

func servePressure(t *testing.T, sessions *fixedSessions, p fixedPressure) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	yagpcc.RegisterGetGPInfoServer(srv, sessions)
	gpotelv1.RegisterPressureServiceServer(srv, p)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func someFull(resource string, some, full float64) []*gpotelv1.PressureFigures {
	return []*gpotelv1.PressureFigures{{Resource: resource, Kind: "some", Avg10: some}, {Resource: resource, Kind: "full", Avg10: full}}
}

func twoHosts() fixedPressure {
	var host []*gpotelv1.PressureFigures
	host = append(host, &gpotelv1.PressureFigures{Resource: "cpu", Kind: "some", Avg10: 0.71})
	host = append(host, someFull("memory", 0.02, 0.01)...)
	host = append(host, someFull("io", 0.05, 0)...)
	return fixedPressure{hosts: []*gpotelv1.HostPressure{
		{Hostname: "sdw1", Pressure: host, Groups: []*gpotelv1.GroupPressure{
			{Name: "admin_group", Pressure: []*gpotelv1.PressureFigures{{Resource: "cpu", Kind: "some", Avg10: 0.05}}},
			{Name: "default_group", Pressure: []*gpotelv1.PressureFigures{{Resource: "cpu", Kind: "some", Avg10: 0.30}}},
		}},
		{Hostname: "sdw2", Groups: []*gpotelv1.GroupPressure{
			{Name: "oid:6437", Tasks: map[string]int64{"running": 1, "sleeping": 2}},
		}},
	}}
}

func TestOncePrintsOneLinePerHostWithItsGroupsPressure(t *testing.T) {
	addr := servePressure(t, threeSessions(), twoHosts())
	out := runOnce(t, "--addr", addr)
	_, pane, ok := strings.Cut(out, "\n\n")
	if !ok {
		t.Fatalf("no pressure pane after the table:\n%s", out)
	}
	lines := strings.Split(strings.TrimRight(pane, "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "HOST") {
		t.Fatalf("pane is not a header and one line per host:\n%s", pane)
	}
	for _, want := range []string{"sdw1", "71%", "2%/1%", "5%/0%", "admin_group cpu 5%", "default_group cpu 30%"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("sdw1 line %q lacks %q", lines[1], want)
		}
	}
	if f := strings.Fields(lines[2]); f[0] != "sdw2" || f[1] != "-" || !strings.Contains(lines[2], "oid:6437 R1 S2 D0") {
		t.Errorf("sdw2 without host pressure and with a v1 group: %q", lines[2])
	}
}

func TestScreenSaysWhenTheServerHasNoPressure(t *testing.T) {
	addr := serve(t, threeSessions()) // GetGPInfo only
	c, err := dial(context.Background(), clientOptions{Addr: addr, CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	var m tea.Model = topModel{ctx: context.Background(), client: c, interval: time.Second, width: 120, height: 20}
	m, _ = m.Update(m.(topModel).fetch()())
	// The pane is the host view's (tab: sessions, queries, hosts).
	m, _ = m.Update(tea.KeyMsg{Type: tea.KeyTab})
	m, _ = m.Update(tea.KeyMsg{Type: tea.KeyTab})
	if view := m.View(); !strings.Contains(view, "pressure: not served by this collector") {
		t.Errorf("the screen does not say why there is no pressure pane:\n%s", view)
	}
}
