// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsessionreceiver

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpotel/gpotel/internal/gpsql"
	"github.com/gpotel/gpotel/internal/objectname"
)

// maxRoleQueues bounds the roles one read names a queue for: the
// statement answers one row per role with a session, and a server allows
// far fewer connections than this.
const maxRoleQueues = 1 << 14

// queryResourceQueues maps the name of each role with a session to the
// name of its resource queue (pg_roles.rolresqueue). A name
// objectname.Valid refuses (empty, longer than a name, not UTF-8, or with
// a control character) is left out: the role's queue is then unknown.
func queryResourceQueues(ctx context.Context, conn *pgx.Conn) (map[string]string, error) {
	rows, err := conn.Query(ctx, gpsql.RoleResourceQueues)
	if err != nil {
		return nil, fmt.Errorf("query role resource queues (pg_roles, pg_resqueue): %w", err)
	}
	queues := map[string]string{}
	var role, queue string
	if _, err := pgx.ForEachRow(rows, []any{&role, &queue}, func() error {
		if len(queues) >= maxRoleQueues {
			return fmt.Errorf("more than %d roles with a session", maxRoleQueues)
		}
		if objectname.Valid(queue) {
			queues[role] = queue
		}
		return nil
	}); err != nil {
		// What was read stands: the rest of the roles' queues are unknown.
		return queues, fmt.Errorf("query role resource queues (pg_roles, pg_resqueue): %w", err)
	}
	return queues, nil
}
