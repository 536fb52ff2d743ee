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

// Pool is the backend pids of one pool's open connections. Unlike the
// process's set, its pids are all of one server, so a backend of another
// server with the same pid is never taken for one of them. The zero value
// is an empty Pool.
type Pool struct {
	mu   sync.Mutex
	pids map[int64]struct{}
}

// Has tells whether pid serves one of the pool's open connections.
func (p *Pool) Has(pid int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.pids[pid]
	return ok
}

// Track records every connection pc's pool opens, from after its
// AfterConnect succeeds until it is closed, in the process's set and in p.
func (p *Pool) Track(pc *pgxpool.Config, what string) {
	after, before := pc.AfterConnect, pc.BeforeClose
	pc.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if after != nil {
			if err := after(ctx, conn); err != nil {
				return err
			}
		}
		pid := int64(conn.PgConn().PID())
		Add(pid, what)
		p.mu.Lock()
		if p.pids == nil {
			p.pids = map[int64]struct{}{}
		}
		p.pids[pid] = struct{}{}
		p.mu.Unlock()
		return nil
	}
	pc.BeforeClose = func(conn *pgx.Conn) {
		pid := int64(conn.PgConn().PID())
		Remove(pid)
		p.mu.Lock()
		delete(p.pids, pid)
		p.mu.Unlock()
		if before != nil {
			before(conn)
		}
	}
}
