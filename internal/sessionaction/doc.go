// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package sessionaction is gpotel's one path to act on a database session:
// cancel its running query, terminate it, or move it to a resource group,
// on the word of the newest snapshot.
//
// Any component may act through it (the sessionstate exporter's
// ActionService does). The caller names a Target as its snapshot saw it and
// the snapshot's View; Actor.Act then
//
//   - refuses a view older than max_view_age (or twice the collection
//     interval): its pids may name other backends by now;
//   - refuses system processes, the collector's own connections and a
//     backend whose start the snapshot does not name;
//   - for a query action, refuses when the session does not run the query
//     named (by command count or start);
//   - sends one statement on the action role's own connection, which the
//     server runs only while the pid still names the backend that started
//     when the snapshot says (and, for a cancel, runs the query that
//     started then);
//
// and returns an Outcome: the Result (the sessionstate_actions counter's
// result attribute), the Stage that decided it, and why. Guard admits the
// gRPC clients that may ask for an action: the action token, compared in
// constant time with wrong tokens slowed and bounded in flight, or an
// allowed client certificate.
package sessionaction
