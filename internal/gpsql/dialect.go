// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package gpsql

// The application_name of gpotel's own connections, for a DBA reading
// pg_stat_activity. Any user may take these names too: the collector knows
// its own sessions by their backend pid (internal/ownbackends).
const (
	// ApplicationName is the gpsession receiver's monitoring connection.
	ApplicationName = "gpotel"
	// ActionsApplicationName is the sessionstate exporter's action connection.
	ActionsApplicationName = "gpotel-actions"
)

// SearchPath is the search_path of every gpotel connection, set when it
// connects: gpotel's statements name only the catalog's objects, so no
// schema a database user can create objects in (public, or one a role's
// own search_path puts first) may shadow a view, function or operator they
// name. pg_temp last: a temporary object never shadows one either.
const SearchPath = "pg_catalog, pg_temp"
