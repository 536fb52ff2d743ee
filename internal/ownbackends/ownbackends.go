// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package ownbackends knows the database backends of this process's own
// connections (the receiver's monitoring pool, the exporter's action
// connection) by their pid, which no database user can choose: an
// application_name is anyone's to set, so it cannot tell the collector's
// sessions from a user's that took the same name.
//
// Every Pool's backends are also in the process's own set: the receiver
// and the exporter are components of one collector and need no
// configuration to know each other's backends. A pid alone is a pid of
// some server gpotel connects to; one of another server's backends with
// the same pid is taken for the collector's by Of, which only ever refuses
// an action. Marking a session as the collector's (the receiver's
// gpotel.session.own) needs the server too: OnServer matches the pid only
// on the server whose tm_id (postmaster start) its connection read.
package ownbackends

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpotel/gpotel/internal/gpsql"
)

// Pool is the backends of some of this process's own connections. Its
// zero value is an empty Pool.
type Pool struct {
	mu       sync.Mutex
	backends map[int64]backend // by pid
}

// backend is one own connection's backend: what the connection is (as
// "monitoring connection") and the tm_id of its server (0: not read).
type backend struct {
	what string
	tmID int64
}

// process is every Pool's backends: the process's own set.
var process Pool

// Add records that the backend pid, on the server whose tm_id is tmID (0:
// not known), serves the connection named what, in p and in the process's
// set, until Remove.
func (p *Pool) Add(pid, tmID int64, what string) {
	b := backend{what: what, tmID: tmID}
	p.put(pid, b)
	process.put(pid, b)
}

// AddConnection records conn's backend as in Add, on the server conn
// reads its tm_id from, as the receiver reads it.
func (p *Pool) AddConnection(ctx context.Context, conn *pgx.Conn, what string) error {
	var tmID int64
	if err := conn.QueryRow(ctx, gpsql.PostmasterStart).Scan(&tmID); err != nil {
		return fmt.Errorf("%s: %w", gpsql.PostmasterStart, err)
	}
	p.Add(int64(conn.PgConn().PID()), tmID, what)
	return nil
}

// Remove forgets the backend pid, in p and in the process's set.
func (p *Pool) Remove(pid int64) {
	p.put(pid, backend{})
	process.put(pid, backend{})
}

// put records b as pid's backend; a zero b forgets pid.
func (p *Pool) put(pid int64, b backend) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b == (backend{}) {
		delete(p.backends, pid)
		return
	}
	if p.backends == nil {
		p.backends = map[int64]backend{}
	}
	p.backends[pid] = b
}

func (p *Pool) get(pid int64) (backend, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.backends[pid]
	return b, ok
}

// Has tells whether pid serves one of p's open connections. A Pool's
// connections are all of one server (one pgxpool), so a backend of another
// server with the same pid is never taken for one of them.
func (p *Pool) Has(pid int64) bool {
	_, ok := p.get(pid)
	return ok
}

// Track records every connection pc's pool opens, from after its
// AfterConnect succeeds until it is closed, in p and in the process's set.
func (p *Pool) Track(pc *pgxpool.Config, what string) {
	after, before := pc.AfterConnect, pc.BeforeClose
	pc.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if after != nil {
			if err := after(ctx, conn); err != nil {
				return err
			}
		}
		p.Add(int64(conn.PgConn().PID()), 0, what)
		return nil
	}
	pc.BeforeClose = func(conn *pgx.Conn) {
		p.Remove(int64(conn.PgConn().PID()))
		if before != nil {
			before(conn)
		}
	}
}

// Of names the connection the backend pid serves; ok is false for a
// backend that is none of this process's, on any server.
func Of(pid int64) (what string, ok bool) {
	b, ok := process.get(pid)
	return b.what, ok
}

// OnServer tells whether pid is the backend of one of this process's own
// connections on the server whose tm_id is tmID.
func OnServer(tmID, pid int64) bool {
	b, ok := process.get(pid)
	return ok && tmID != 0 && b.tmID == tmID
}
