// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package events is the boundary between the snapshotdiff processor and
// the consumers of finished work (docs/pipeline.md, finished work): the
// event the processor writes once when a query or a session ends
// (AppendFinishedQuery, AppendEndedSession), each field one row, with its
// accessors, of its event's table (QueryEventFields, SessionEventFields),
// read back with Value or DecodeQueryEvent and DecodeSessionEvent;
// AppendEventOf makes the finishedwork connector's log record; and the
// rule-action event the workloadrules connector writes when a rule acts
// (AppendRuleAction). Its readers are the finishedwork connector, the
// history and sessionstate exporters, the workloadrules connector and
// their libraries (internal/rulefirings, internal/sessionaction).
package events
