// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package rulefirings hands the firings of the process's workload rules
// (connector/workloadrulesconnector) to the components that keep them for
// the API (the sessionstate exporter's ListRuleActions), in process: the
// exporter lists what the rules of its own collector did, without a logs
// pipeline of its own (which would make it a component shared by two
// pipelines, one gRPC server under two signals).
package rulefirings

import (
	"sync"

	"github.com/gpotel/gpotel/internal/pipeline/events"
)

// Keeper keeps firings; Keep must not block (it runs on the rules'
// evaluation) and must not hold a after it returns.
type Keeper interface {
	Keep(a *events.RuleAction)
}

var (
	mu      sync.RWMutex
	keepers = map[Keeper]struct{}{}
)

// Subscribe hands k every firing published from now until Unsubscribe.
func Subscribe(k Keeper) {
	mu.Lock()
	defer mu.Unlock()
	keepers[k] = struct{}{}
}

// Unsubscribe stops handing k firings.
func Unsubscribe(k Keeper) {
	mu.Lock()
	defer mu.Unlock()
	delete(keepers, k)
}

// Publish hands a to every keeper subscribed.
func Publish(a *events.RuleAction) {
	mu.RLock()
	defer mu.RUnlock()
	for k := range keepers {
		k.Keep(a)
	}
}
