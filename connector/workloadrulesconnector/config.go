// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package workloadrulesconnector

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/gpotel/gpotel/internal/dialect"
	"github.com/gpotel/gpotel/internal/objectname"
	"github.com/gpotel/gpotel/internal/roleconn"
)

// Config configures the workloadrules connector.
type Config struct {
	// Dialect is the server's: move needs one with resource groups, named
	// here (auto is known only once connected, too late to refuse a rule).
	Dialect dialect.Dialect `mapstructure:"dialect"`
	// ResourceManager is the server's gp_resource_manager on Greenplum 6:
	// queue (its default; no move) or group. Greenplum 7 and Cloudberry
	// have groups only.
	ResourceManager string `mapstructure:"resource_manager"`
	// Window is the processor's window the session figures are read over
	// (one of snapshotdiff's windows).
	Window time.Duration `mapstructure:"window"`
	// MaxViewAge is how old a snapshot may be for the rules to act on it;
	// 0: twice the interval between the last two snapshots.
	MaxViewAge time.Duration `mapstructure:"max_view_age"`
	// Superusers are the roles a rule leaves alone unless it names them
	// in its scope's users.
	Superusers []string `mapstructure:"superusers"`
	// ActionTimeout bounds one action on the server: connecting and its statement.
	ActionTimeout time.Duration `mapstructure:"action_timeout"`
	// Actions is the action connection to the coordinator (the
	// ActionService's: a role of its own, never the receiver's), which
	// rules in enforce mode that cancel, terminate or move act through.
	Actions roleconn.Settings `mapstructure:"actions"`
	Rules   []RuleConfig      `mapstructure:"rules"`
}

// RuleConfig is one rule as configured.
type RuleConfig struct {
	Name  string      `mapstructure:"name"`
	Scope ScopeConfig `mapstructure:"scope"`
	// When are one to three predicates, all of which must hold:
	// "<figure> <comparison> <value>".
	When []string `mapstructure:"when"`
	// For is how long every predicate must hold, snapshot after snapshot,
	// before the rule fires; 0 fires on the first snapshot.
	For    time.Duration `mapstructure:"for"`
	Action string        `mapstructure:"action"`
	// ResourceGroup is where move moves the session.
	ResourceGroup string `mapstructure:"resource_group"`
	// Mode is observe (say what it would do) or enforce.
	Mode string `mapstructure:"mode"`
	// MaxMatches trips the breaker: a rule that would fire on more
	// sessions at once acts on none.
	MaxMatches int `mapstructure:"max_matches"`
	// MaxActionsPerMinute is the rule's rate limit.
	MaxActionsPerMinute int `mapstructure:"max_actions_per_minute"`
}

// ScopeConfig narrows the sessions a rule looks at: empty lists match
// every session; an exclusion wins over an inclusion.
type ScopeConfig struct {
	Users                 []string `mapstructure:"users"`
	ExcludeUsers          []string `mapstructure:"exclude_users"`
	Databases             []string `mapstructure:"databases"`
	ExcludeDatabases      []string `mapstructure:"exclude_databases"`
	Applications          []string `mapstructure:"applications"`
	ExcludeApplications   []string `mapstructure:"exclude_applications"`
	ResourceGroups        []string `mapstructure:"resource_groups"`
	ExcludeResourceGroups []string `mapstructure:"exclude_resource_groups"`
	// ResourceQueues and ExcludeResourceQueues name the Greenplum resource
	// queues of the sessions' roles; a rule naming either looks only at
	// sessions whose queue is known.
	ResourceQueues        []string `mapstructure:"resource_queues"`
	ExcludeResourceQueues []string `mapstructure:"exclude_resource_queues"`
}

var _ component.Config = (*Config)(nil)

// Bounds on what a configuration may ask for.
const (
	maxRules           = 25 // as Redshift's query monitoring rules
	maxPredicates      = 3
	maxScopeNames      = 100
	defaultMaxMatches  = 10
	defaultActionsRate = 10
	maxActionsRate     = 600
)

func createDefaultConfig() component.Config {
	return &Config{
		Dialect:       dialect.Auto,
		Window:        5 * time.Minute,
		Superusers:    []string{"gpadmin", "postgres"},
		ActionTimeout: 5 * time.Second,
		Actions:       roleconn.Settings{Port: 5432, SSLMode: "prefer"},
	}
}

// acting names the rules that act on the server: enforce mode, an action
// other than log.
func (c *Config) acting() []string {
	var names []string
	for i := range c.Rules {
		if r := &c.Rules[i]; r.Mode == "enforce" && r.Action != actionNamesByValue[actionLog] {
			names = append(names, r.Name)
		}
	}
	return names
}

// Validate reports every problem of the configuration at once.
func (c *Config) Validate() error {
	var errs []error
	if c.Dialect != dialect.Auto && !c.Dialect.Known() {
		errs = append(errs, fmt.Errorf("dialect %q: want %s", c.Dialect, dialect.Names(true)))
	}
	switch c.ResourceManager {
	case "", "queue", "group":
	default:
		errs = append(errs, fmt.Errorf("resource_manager %q: want queue or group", c.ResourceManager))
	}
	if c.Window <= 0 {
		errs = append(errs, fmt.Errorf("window %s: must be one of the snapshotdiff processor's windows, above 0", c.Window))
	}
	if c.MaxViewAge < 0 {
		errs = append(errs, fmt.Errorf("max_view_age %s: must not be negative (0: twice the collection interval)", c.MaxViewAge))
	}
	if c.ActionTimeout <= 0 || c.ActionTimeout > time.Minute {
		errs = append(errs, fmt.Errorf("action_timeout %s: must be in (0, 1m]", c.ActionTimeout))
	}
	if acting := c.acting(); len(acting) > 0 {
		for _, err := range c.Actions.Problems("actions::", "the coordinator") {
			errs = append(errs, fmt.Errorf("%w (rules %v act on the server in enforce mode)", err, acting))
		}
	}
	if _, err := (&ScopeConfig{Users: c.Superusers}).compile(); err != nil {
		errs = append(errs, fmt.Errorf("superusers: %w", err))
	}
	if len(c.Rules) > maxRules {
		errs = append(errs, fmt.Errorf("rules: %d, more than %d", len(c.Rules), maxRules))
	}
	seen := map[string]bool{}
	for i := range c.Rules {
		r := &c.Rules[i]
		if _, err := c.compile(r); err != nil {
			errs = append(errs, fmt.Errorf("rules[%d] %q: %w", i, r.Name, err))
		}
		if seen[r.Name] {
			errs = append(errs, fmt.Errorf("rules[%d]: the name %q is another rule's too", i, r.Name))
		}
		seen[r.Name] = true
	}
	return errors.Join(errs...)
}

// moveRefusal says why the server cannot move a session to a resource
// group; "" when it can.
func (c *Config) moveRefusal() string {
	switch {
	case c.Dialect == dialect.Auto || c.Dialect == "":
		return "move needs the dialect named (dialect: gp6, gp7 or cloudberry), not auto: whether the server has resource groups must be known at start"
	case c.Dialect.Facts().MoveQuerySchema == "":
		return fmt.Sprintf("the %s dialect has no resource groups to move a query to", c.Dialect)
	case c.Dialect == dialect.GP6 && c.ResourceManager != "group":
		return "Greenplum 6 moves queries only under resource groups (gp_resource_manager=group); with resource queues, its default, it cannot: " +
			"set resource_manager: group if the server uses resource groups"
	}
	return ""
}

// compile checks one rule and builds what evaluation uses.
func (c *Config) compile(rc *RuleConfig) (*rule, error) {
	var errs []error
	r := &rule{name: rc.Name, hold: rc.For, group: rc.ResourceGroup, maxMatches: rc.MaxMatches, perMinute: rc.MaxActionsPerMinute}
	if !objectname.Valid(rc.Name) {
		errs = append(errs, fmt.Errorf("name: must be 1 to %d bytes of UTF-8 without control characters", objectname.MaxBytes))
	}
	switch n := len(rc.When); {
	case n == 0:
		errs = append(errs, errors.New("when: name one to three predicates, e.g. \"gpotel.query.spill.size > 50GiB\""))
	case n > maxPredicates:
		errs = append(errs, fmt.Errorf("when: %d predicates, more than %d", n, maxPredicates))
	}
	for i, text := range rc.When[:min(len(rc.When), maxPredicates)] {
		p, err := parsePredicate(text)
		if err != nil {
			errs = append(errs, fmt.Errorf("when[%d]: %w", i, err))
			continue
		}
		r.predicates = append(r.predicates, p)
	}
	if rc.For < 0 {
		errs = append(errs, fmt.Errorf("for %s: must not be negative", rc.For))
	}
	a, ok := actionByName(rc.Action)
	switch {
	case !ok:
		errs = append(errs, fmt.Errorf("action %q: want %s", rc.Action, actionNames()))
	case a == actionMove && rc.ResourceGroup == "":
		errs = append(errs, errors.New("action move: name the resource_group to move to"))
	case a == actionMove && !objectname.Valid(rc.ResourceGroup):
		errs = append(errs, fmt.Errorf("resource_group: must be 1 to %d bytes of UTF-8 without control characters", objectname.MaxBytes))
	case a == actionMove && c.moveRefusal() != "":
		errs = append(errs, fmt.Errorf("action move: %s", c.moveRefusal()))
	case a != actionMove && rc.ResourceGroup != "":
		errs = append(errs, fmt.Errorf("resource_group %q: only action move takes one", rc.ResourceGroup))
	}
	r.action = a
	switch rc.Mode {
	case "", "observe":
	case "enforce":
		r.enforce = true
	default:
		errs = append(errs, fmt.Errorf("mode %q: want observe (the default) or enforce", rc.Mode))
	}
	if r.maxMatches == 0 {
		r.maxMatches = defaultMaxMatches
	}
	if r.maxMatches < 0 {
		errs = append(errs, fmt.Errorf("max_matches %d: must be above 0 (0: %d)", rc.MaxMatches, defaultMaxMatches))
	}
	if r.perMinute == 0 {
		r.perMinute = defaultActionsRate
	}
	if r.perMinute < 0 || r.perMinute > maxActionsRate {
		errs = append(errs, fmt.Errorf("max_actions_per_minute %d: must be 1 to %d (0: %d)", rc.MaxActionsPerMinute, maxActionsRate, defaultActionsRate))
	}
	scope, err := rc.Scope.compile()
	if err != nil {
		errs = append(errs, err)
	}
	if scope.queues.named() && c.Dialect == dialect.PostgreSQL {
		errs = append(errs, errors.New("scope: resource_queues, exclude_resource_queues: "+
			"the postgresql dialect has no resource queues; the rule would look at no session"))
	}
	r.scope = scope
	return r, errors.Join(errs...)
}
