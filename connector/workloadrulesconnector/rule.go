// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workloadrulesconnector

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpotel/gpotel/internal/objectname"
)

// action is what a rule does, in order of severity: when several rules
// fire on one query at once the most severe wins.
type action uint8

const (
	actionLog action = iota
	actionMove
	actionCancel
	actionTerminate
)

var actionNamesByValue = [...]string{actionLog: "log", actionMove: "move", actionCancel: "cancel", actionTerminate: "terminate"}

func (a action) String() string { return actionNamesByValue[a] }

func actionByName(name string) (action, bool) {
	i := slices.Index(actionNamesByValue[:], name)
	return action(max(i, 0)), i >= 0 // #nosec G115 -- an index of four names
}

func actionNames() string { return strings.Join(actionNamesByValue[:], ", ") }

// rule is one configured rule, checked and ready to evaluate.
type rule struct {
	index      int // in the engine's rules
	name       string
	scope      scope
	predicates []predicate
	hold       time.Duration
	action     action
	group      string
	enforce    bool
	maxMatches int
	perMinute  int
}

// mode names the rule's mode as events and logs say it.
func (r *rule) mode() string {
	if r.enforce {
		return "enforce"
	}
	return "observe"
}

// names is one dimension of a scope: who is in (empty: everyone) and who
// is out (an exclusion wins).
type names struct{ in, out []string }

func (n *names) admits(v string) bool {
	return (len(n.in) == 0 || slices.Contains(n.in, v)) && !slices.Contains(n.out, v)
}

// named tells whether the dimension narrows the scope at all.
func (n *names) named() bool { return len(n.in) > 0 || len(n.out) > 0 }

// admitsKnown is admits for a dimension whose value may be unknown (""):
// once named, it admits no unknown value, so that an exclusion never lets
// through a session it cannot tell apart.
func (n *names) admitsKnown(v string) bool {
	return !n.named() || (v != "" && n.admits(v))
}

// scope is the sessions a rule looks at.
type scope struct {
	users, databases, applications, groups, queues names
}

func (sc *ScopeConfig) compile() (scope, error) {
	var errs []error
	dim := func(key string, in, out []string) names {
		for _, list := range [][]string{in, out} {
			if len(list) > maxScopeNames {
				errs = append(errs, fmt.Errorf("scope: %s: %d names, more than %d", key, len(list), maxScopeNames))
			}
			for _, n := range list {
				if !objectname.Valid(n) {
					errs = append(errs, fmt.Errorf("scope: %s: %.70q: a name is 1 to %d bytes of UTF-8 without control characters", key, n, objectname.MaxBytes))
				}
			}
		}
		return names{in: in, out: out}
	}
	s := scope{
		users:        dim("users", sc.Users, sc.ExcludeUsers),
		databases:    dim("databases", sc.Databases, sc.ExcludeDatabases),
		applications: dim("applications", sc.Applications, sc.ExcludeApplications),
		groups:       dim("resource_groups", sc.ResourceGroups, sc.ExcludeResourceGroups),
		queues:       dim("resource_queues", sc.ResourceQueues, sc.ExcludeResourceQueues),
	}
	return s, errors.Join(errs...)
}

// admits tells whether the rule looks at the target: in scope, and a
// superuser's session only when the rule names the superuser.
func (s *scope) admits(t *target) bool {
	if t.superuser && !slices.Contains(s.users.in, t.user) {
		return false
	}
	return s.users.admits(t.user) && s.databases.admits(t.database) &&
		s.applications.admits(t.application) && s.groups.admits(t.group) && s.queues.admitsKnown(t.queue)
}
