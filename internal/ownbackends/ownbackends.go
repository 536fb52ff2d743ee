// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package ownbackends knows the database backends of this process's own
// connections (the receiver's monitoring pool, the exporter's action
// connection) by their pid, which no database user can choose: an
// application_name is anyone's to set, so it cannot tell the collector's
// sessions from a user's that took the same name.
//
// The set is the process's: the receiver and the exporter are components of
// one collector and need no configuration to know each other's backends.
// A pid is a pid of some server gpotel connects to; one of another server's
// backends with the same pid is taken for the collector's too, which only
// ever refuses an action.
package ownbackends

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

var (
	mu   sync.Mutex
	byID = map[int64]string{} // pid → which connection
)

// Add records that the backend pid serves the connection named what (as
// "monitoring connection"), until Remove.
func Add(pid int64, what string) {
	mu.Lock()
	defer mu.Unlock()
	byID[pid] = what
}

// Remove forgets the backend pid.
func Remove(pid int64) {
	mu.Lock()
	defer mu.Unlock()
	delete(byID, pid)
}

// Of names the connection the backend pid serves; ok is false for a
// backend that is not this process's.
func Of(pid int64) (what string, ok bool) {
	mu.Lock()
	defer mu.Unlock()
	what, ok = byID[pid]
	return what, ok
}

// Track records every connection pc's pool opens, from after its
// AfterConnect succeeds until it is closed.
func Track(pc *pgxpool.Config, what string) {
	after, before := pc.AfterConnect, pc.BeforeClose
	pc.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if after != nil {
			if err := after(ctx, conn); err != nil {
				return err
			}
		}
		Add(int64(conn.PgConn().PID()), what)
		return nil
	}
	pc.BeforeClose = func(conn *pgx.Conn) {
		Remove(int64(conn.PgConn().PID()))
		if before != nil {
			before(conn)
		}
	}
}
