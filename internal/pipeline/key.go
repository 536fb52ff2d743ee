// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package pipeline

import (
	"cmp"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// SessionKey identifies a session for the life of a cluster: the
// coordinator postmaster's start (gpotel.tm_id) and the session id
// (gpotel.session.id), yagpcc's SessionKey.
type SessionKey struct {
	TmID int64
	ID   int64
}

// Compare orders keys by tm_id, then session id.
func (k SessionKey) Compare(o SessionKey) int {
	return cmp.Or(cmp.Compare(k.TmID, o.TmID), cmp.Compare(k.ID, o.ID))
}

// SessionKeyOf reads a resource's session key; ok is false without both
// gpotel.tm_id and gpotel.session.id (integers written as strings or
// integral doubles count).
func SessionKeyOf(attrs pcommon.Map) (SessionKey, bool) {
	id, tm := IntOf(attrs, AttrSessionID), IntOf(attrs, AttrTmID)
	if !id.Valid || !tm.Valid {
		return SessionKey{}, false
	}
	return SessionKey{TmID: tm.V, ID: id.V}, true
}
