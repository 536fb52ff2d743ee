// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pressure

import (
	"context"
	"testing"

	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

func cpu(avg10 float64) []*gpotelv1.PressureFigures {
	return []*gpotelv1.PressureFigures{{Resource: "cpu", Kind: "some", Avg10: avg10}}
}

// Only a batch that closes a snapshot replaces the figures; its hosts come
// in name order, each with its groups.
func TestOnlyABatchThatClosesASnapshotReplacesThePressure(t *testing.T) {
	var store Store
	svc := &Service{Store: &store}
	store.Consume(Batch{Closing: true, Time: 7, Resources: []Resource{
		{Host: "sdw2", Figures: cpu(0.2)},
		{Host: "sdw1", Group: &gpotelv1.GroupPressure{Name: "default_group"}},
		{Host: "sdw1", Figures: cpu(0.1)},
	}})
	store.Consume(Batch{Resources: []Resource{{Host: "sdw1", Figures: cpu(0.9)}}}) // a process batch
	resp, err := svc.GetHostPressure(context.Background(), &gpotelv1.GetHostPressureRequest{})
	if err != nil {
		t.Fatal(err)
	}
	hosts := resp.GetHosts()
	if resp.GetSnapshotTimeUnixNano() != 7 || len(hosts) != 2 || hosts[0].GetHostname() != "sdw1" || hosts[1].GetHostname() != "sdw2" ||
		hosts[0].GetPressure()[0].GetAvg10() != 0.1 || len(hosts[0].GetGroups()) != 1 {
		t.Errorf("answer %v: want the closing batch's sdw1 (0.1, one group) then sdw2", resp)
	}
}
