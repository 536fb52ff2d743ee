// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package ruleactions serves gpotel.v1.RuleActions for the sessionstate
// exporter: the latest firings of the process's workload rules
// (internal/rulefirings), newest first, page by page.
package ruleactions

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpotel/gpotel/exporter/sessionstateexporter/internal/paging"
	"github.com/gpotel/gpotel/internal/pipeline/events"
	gpotelv1 "github.com/gpotel/gpotel/proto/gpotel/v1"
)

// Ring keeps the latest max_firings firings of the process's
// workload rules (internal/rulefirings), numbered from 1 in arrival order;
// past the bound the oldest goes, counted.
type Ring struct {
	mu      sync.RWMutex
	ring    []*gpotelv1.RuleAction // oldest at next once full
	next    int
	limit   int
	number  uint64 // the last firing's number
	dropped uint64
}

// NewRing keeps the latest limit firings.
func NewRing(limit int) *Ring { return &Ring{limit: limit} }

// Keep copies a into the ring.
func (r *Ring) Keep(a *events.RuleAction) {
	m := ruleActionMessage(a)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.number++
	m.Number = r.number
	if len(r.ring) < r.limit {
		r.ring = append(r.ring, m)
		return
	}
	r.ring[r.next] = m
	r.next = (r.next + 1) % r.limit
	r.dropped++
}

func ruleActionMessage(a *events.RuleAction) *gpotelv1.RuleAction {
	m := &gpotelv1.RuleAction{FiredAt: timestamppb.New(time.Unix(0, a.Time).UTC()), RuleName: a.Rule, RuleMode: a.Mode, RuleAction: a.Action,
		Outcome: a.Outcome, TmId: a.Session.TmID, SessId: a.Session.ID, Pid: a.PID, Username: a.User, Database: a.Database,
		Predicates: slices.Clone(a.Predicates), PredicateValues: slices.Clone(a.Values)}
	optional := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	m.RuleResourceGroup, m.OutcomeDetail = optional(a.ResourceGroup), optional(a.OutcomeDetail)
	m.Application, m.ResourceGroup = optional(a.Application), optional(a.SessionGroup)
	if a.CommandCount != 0 {
		m.Ccnt = &a.CommandCount
	}
	if a.QueryStart != 0 {
		m.QueryStart = timestamppb.New(time.Unix(0, a.QueryStart).UTC())
	}
	return m
}

// Service serves ListRuleActions.
type Service struct {
	gpotelv1.UnimplementedRuleActionsServer
	kept                         *Ring
	defaultPageSize, maxPageSize int
}

// NewService lists the firings kept, pages of defaultPageSize unless asked
// for another size up to maxPageSize.
func NewService(kept *Ring, defaultPageSize, maxPageSize int) *Service {
	return &Service{kept: kept, defaultPageSize: defaultPageSize, maxPageSize: maxPageSize}
}

// ruleActionsToken marks the last firing a page returned, by number.
type ruleActionsToken struct {
	Request string `json:"r"`
	Number  uint64 `json:"n"`
}

// ListRuleActions answers a page of the firings kept, newest first.
func (svc *Service) ListRuleActions(_ context.Context, req *gpotelv1.ListRuleActionsRequest) (*gpotelv1.ListRuleActionsResponse, error) {
	if n := len(req.GetRuleNames()) + len(req.GetSessIds()); n > paging.MaxFilterValues {
		return nil, status.Errorf(codes.InvalidArgument, "rule_names, sess_ids: %d values, at most %d filter values are accepted", n, paging.MaxFilterValues)
	}
	rules, sessions := sortedSet(req.GetRuleNames()), sortedSet(req.GetSessIds())
	fingerprint := ruleActionsFingerprint(rules, sessions, req.GetTmId())
	before := uint64(0) // 0: from the newest
	if tok := req.GetPageToken(); tok != "" {
		var t ruleActionsToken
		b, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil || json.Unmarshal(b, &t) != nil || t.Number == 0 {
			return nil, status.Error(codes.InvalidArgument, paging.ErrBadToken.Error())
		}
		if t.Request != fingerprint {
			return nil, status.Error(codes.InvalidArgument, "page_token was issued for a different request (filters changed) or by another run of the collector")
		}
		before = t.Number
	}
	size := svc.defaultPageSize
	if req.GetPageSize() > 0 {
		size = int(min(req.GetPageSize(), uint32(svc.maxPageSize))) // #nosec G115 -- a positive int from the configuration
	}
	resp := &gpotelv1.ListRuleActionsResponse{}
	k := svc.kept
	k.mu.RLock()
	defer k.mu.RUnlock()
	resp.Dropped = k.dropped
	for i := range len(k.ring) {
		m := k.ring[(k.next+len(k.ring)-1-i)%len(k.ring)] // newest first
		switch {
		case before != 0 && m.GetNumber() >= before:
			continue
		case len(rules) > 0 && !slices.Contains(rules, m.GetRuleName()),
			len(sessions) > 0 && !slices.Contains(sessions, m.GetSessId()),
			req.GetTmId() != 0 && req.GetTmId() != m.GetTmId():
			continue
		}
		if len(resp.RuleActions) == size {
			b, _ := json.Marshal(ruleActionsToken{Request: fingerprint, Number: resp.RuleActions[size-1].GetNumber()})
			resp.NextPageToken = base64.RawURLEncoding.EncodeToString(b)
			break
		}
		resp.RuleActions = append(resp.RuleActions, m)
	}
	return resp, nil
}

// sortedSet is values sorted, without repeats.
func sortedSet[T string | int64](values []T) []T {
	return slices.Compact(slices.Sorted(slices.Values(values)))
}

// ruleActionsFingerprint names what a page token is valid for.
func ruleActionsFingerprint(rules []string, sessions []int64, tmID int64) string {
	h := paging.NewMAC()
	_, _ = fmt.Fprintf(h, "ListRuleActions|%d|%q|%v", tmID, rules, sessions)
	return hex.EncodeToString(h.Sum(nil)[:12])
}
