// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package gpinfo serves yagpcc's GetGPInfo for the sessionstate exporter
// from the newest view: sessions listed in any sortable order, page by page
// within the response bounds, filtered as yagpcc's client asks; one
// session, one query (running, or finished from the finished work kept);
// the sessions counted by state.
package gpinfo
