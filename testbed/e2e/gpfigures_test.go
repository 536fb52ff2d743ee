// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"regexp"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/dialect"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
	"github.com/gpotel/gpotel/testbed/cluster"
	"github.com/gpotel/gpotel/testbed/workload"
)

// clusterTop dials the API's gpotel.v1 ClusterTop service.
func clusterTop(t *testing.T, addr string) gpotelv1.ClusterTopClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return gpotelv1.NewClusterTopClient(conn)
}

// sessionTop finds a session's line in GetClusterTop ranked by key.
func sessionTop(ctx context.Context, top gpotelv1.ClusterTopClient, key gpotelv1.TopKey, sessID int) (*gpotelv1.SessionTop, error) {
	resp, err := top.GetClusterTop(ctx, &gpotelv1.GetClusterTopRequest{Key: key, Limit: 100})
	if err != nil {
		return nil, err
	}
	for _, s := range resp.GetSessions() {
		if s.GetSessId() == int64(sessID) {
			return s, nil
		}
	}
	return nil, nil
}

func startWorkload(t *testing.T, c *cluster.Cluster, spec workload.Spec) *workload.Session {
	t.Helper()
	w, err := workload.Start(context.Background(), c, spec)
	if err != nil {
		t.Fatalf("workload %s: %v", spec.Name, err)
	}
	t.Cleanup(func() { _ = w.Stop() })
	return w
}

// TestBlockedSessionNamesItsBlocker: one session holds LOCK TABLE … IN
// ACCESS EXCLUSIVE MODE, another waits in a SELECT of the table; the
// waiting session names the holder's sess_id, the modes and the table, in
// yagpcc's SessionInfo and in GetClusterTop, on every dialect.
func TestBlockedSessionNamesItsBlocker(t *testing.T) {
	needBinaries(t)
	for _, o := range cluster.SmallClusters(2) {
		t.Run(string(o.Dialect), func(t *testing.T) {
			s := launchStack(t, cluster.Start(t, o))
			ctx := await.Context(t)
			api, top := dialAPI(t, s.API), clusterTop(t, s.API)
			holder := startWorkload(t, s.Cluster, workload.Spec{Name: "e2e-lock-holder", Kind: workload.LockHolder, Table: "gpotel_locked", Duration: untilStopped(t)})
			waitHeld(t, holder)
			waiter := startWorkload(t, s.Cluster, workload.Spec{Name: "e2e-lock-waiter", Kind: workload.LockWaiter, Table: "gpotel_locked", Duration: untilStopped(t)})

			const table, wants, holds = "public.gpotel_locked", "AccessShareLock", "AccessExclusiveLock"
			waitFor(t, "the waiting session names its blocker", func() (bool, string) {
				st, err := stateOf(ctx, api, waiter.SessID())
				if err != nil || st == nil {
					return false, fmt.Sprintf("waiting session %d: %v", waiter.SessID(), err)
				}
				info := st.GetSessionInfo()
				got := fmt.Sprintf("blocked_by_sess_id %d, wait_mode %q, locked_item %q, locked_mode %q",
					info.GetBlockedBySessId(), info.GetWaitMode(), info.GetLockedItem(), info.GetLockedMode())
				return info.GetBlockedBySessId() == int64(holder.SessID()) && info.GetWaitMode() == wants &&
					info.GetLockedItem() == table && info.GetLockedMode() == holds, got
			})
			waitFor(t, "GetClusterTop marks the session blocked", func() (bool, string) {
				line, err := sessionTop(ctx, top, gpotelv1.TopKey_TOP_KEY_CPU, waiter.SessID())
				if err != nil || line == nil {
					return false, fmt.Sprintf("waiting session %d: %v", waiter.SessID(), err)
				}
				return line.BlockedBySessId != nil && line.GetBlockedBySessId() == int64(holder.SessID()) && line.GetLockedItem() == table,
					fmt.Sprintf("blocked_by %v, locked_item %q", line.BlockedBySessId, line.GetLockedItem())
			})
			if st, err := stateOf(ctx, api, holder.SessID()); err != nil || st.GetSessionInfo().GetBlockedBySessId() != 0 {
				t.Errorf("the holder shows blocked by %d (%v): it waits for nothing", st.GetSessionInfo().GetBlockedBySessId(), err)
			}
		})
	}
}

// tempFile is a backend's temporary file: pgsql_tmp<pid>.<n>.
var tempFile = regexp.MustCompile(`^pgsql_tmp[0-9]+\.`)

// workfilesOnDisk sums the sizes of every instance's temporary files, in
// the data directories and the disk tablespace, read from disk.
func workfilesOnDisk(c *cluster.Cluster) (int64, error) {
	var total int64
	for _, root := range []string{c.Dir, c.DiskDir} {
		err := filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a file that went while walking
			}
			if err != nil {
				return err
			}
			if d.Type().IsRegular() && tempFile.MatchString(d.Name()) {
				if info, err := d.Info(); err == nil {
					total += info.Size()
				}
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	return total, nil
}

// TestSpillMatchesTheWorkfilesOnDisk: a sort forced to spill (a small
// work_mem) holds its temporary files; gpotel's spill of the session is
// within 5 % of the files' sizes on disk, on every dialect whose server
// keeps the workfile view (PostgreSQL has none: no figure, not zero).
func TestSpillMatchesTheWorkfilesOnDisk(t *testing.T) {
	needBinaries(t)
	for _, o := range cluster.SmallClusters(2) {
		t.Run(string(o.Dialect), func(t *testing.T) {
			s := launchStack(t, cluster.Start(t, o))
			ctx := await.Context(t)
			top := clusterTop(t, s.API)
			w := startWorkload(t, s.Cluster, workload.Spec{Name: "e2e-spill", Kind: workload.Spill, SpillBytes: 24 << 20, Duration: untilStopped(t)})
			waitHeld(t, w)
			if o.Dialect == dialect.PostgreSQL {
				waitFor(t, "the session's line, without a spill figure", func() (bool, string) {
					line, err := sessionTop(ctx, top, gpotelv1.TopKey_TOP_KEY_SPILL, w.SessID())
					if err != nil || line == nil {
						return false, fmt.Sprintf("session %d: %v", w.SessID(), err)
					}
					if line.SpillBytes != nil {
						t.Fatalf("PostgreSQL keeps no workfile view, yet the session shows %d spill bytes", line.GetSpillBytes())
					}
					return true, ""
				})
				return
			}
			var gotBytes, disk int64
			waitFor(t, "gpotel's spill within 5 % of the workfiles on disk", func() (bool, string) {
				line, err := sessionTop(ctx, top, gpotelv1.TopKey_TOP_KEY_SPILL, w.SessID())
				if err != nil || line == nil || line.SpillBytes == nil {
					return false, fmt.Sprintf("session %d: %v, no spill yet", w.SessID(), err)
				}
				if disk, err = workfilesOnDisk(s.Cluster); err != nil {
					t.Fatal(err)
				}
				gotBytes = int64(line.GetSpillBytes()) // #nosec G115 -- bytes of a test's files
				return disk > 0 && math.Abs(float64(gotBytes-disk)) <= 0.05*float64(disk),
					fmt.Sprintf("gpotel %d B in %d files, on disk %d B", gotBytes, line.GetSpillFiles(), disk)
			})
			t.Logf("%s: gpotel %d B, on disk %d B", o.Dialect, gotBytes, disk)
		})
	}
}
