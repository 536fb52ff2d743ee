// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionaction

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gpotel/gpotel/internal/clientname"
	"github.com/gpotel/gpotel/internal/roleconn"
)

// The action token's rules. A wrong token holds one of maxDeniedInFlight
// slots for deniedTokenDelay before it is answered, even when its caller
// gives up at once (else the answer's absence would tell a wrong guess, and
// the slot would be free again at once); a call that finds every slot
// taken is refused before its token is even compared. So no caller learns
// more than maxDeniedInFlight guesses per deniedTokenDelay (4 a second),
// however many calls it opens, and no more than maxDeniedInFlight handlers
// are ever held, each for at most deniedTokenDelay.
const (
	// minActionTokenBytes: `openssl rand -hex 32` makes 64.
	minActionTokenBytes = 32
	deniedTokenDelay    = time.Second
	maxDeniedInFlight   = 4
)

// Guard says which gRPC clients may act: one that sends the action token,
// or one whose verified certificate is named in allowed_clients. Wrong
// tokens are rate-limited as above.
type Guard struct {
	token   []byte // empty: no token admits
	allowed clientname.Allowed
	// denying holds a slot per wrong token waiting out its delay.
	denying chan struct{}
	// after starts a wrong token's delay (time.After); tests replace it.
	after func(time.Duration) <-chan time.Time
}

// GuardOption changes a Guard NewGuard makes.
type GuardOption func(*Guard)

// WithDenialDelay replaces time.After as what starts a wrong token's delay
// (a test's clock).
func WithDenialDelay(after func(time.Duration) <-chan time.Time) GuardOption {
	return func(g *Guard) { g.after = after }
}

// NewGuard reads the token file, when one is configured.
func NewGuard(cfg Config, opts ...GuardOption) (*Guard, error) {
	allowed := clientname.NewAllowed(cfg.AllowedClients)
	var token []byte
	if cfg.TokenFile != "" {
		read, err := roleconn.ReadSecretFile(cfg.TokenFile)
		if err == nil {
			err = checkActionToken(read)
		}
		if err != nil {
			return nil, fmt.Errorf("actions::token_file %s: %w", cfg.TokenFile, err)
		}
		token = []byte(read)
	}
	g := &Guard{token: token, allowed: allowed, denying: make(chan struct{}, maxDeniedInFlight), after: time.After}
	for _, opt := range opts {
		opt(g)
	}
	return g, nil
}

// HasToken says whether an action token admits (else only certificates).
func (g *Guard) HasToken() bool { return len(g.token) > 0 }

// checkActionToken: long enough to resist guessing, and sendable as a gRPC
// metadata value (visible ASCII).
func checkActionToken(token string) error {
	if len(token) < minActionTokenBytes {
		return fmt.Errorf("%d bytes, fewer than %d: generate one with openssl rand -hex 32", len(token), minActionTokenBytes)
	}
	for i := range len(token) {
		if c := token[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("byte %d is %#x: a token is visible ASCII, without spaces (gRPC metadata)", i, c)
		}
	}
	return nil
}

// errNotAllowed is the answer to a client that may not act.
var errNotAllowed = errors.New("this client may not act: send the action token in the " + clientname.ActionTokenHeader +
	" header, or call with a client certificate named in the exporter's actions::allowed_clients")

// Admit names the client when it may act; the error is the call's gRPC
// status (PermissionDenied, or ResourceExhausted while wrong tokens wait).
func (g *Guard) Admit(ctx context.Context) (string, error) {
	if name, ok := g.allowed.Match(clientname.Verified(ctx)); ok {
		return "certificate " + name, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	sent := md.Get(clientname.ActionTokenHeader)
	switch {
	case len(sent) == 0 || len(g.token) == 0:
		return "", status.Error(codes.PermissionDenied, errNotAllowed.Error())
	case len(sent) > 1:
		return "", status.Errorf(codes.PermissionDenied, "%d %s headers: send one, a call is not a list of guesses", len(sent), clientname.ActionTokenHeader)
	}
	select {
	case g.denying <- struct{}{}:
	default:
		return "", status.Errorf(codes.ResourceExhausted, "%d calls with a wrong action token are being answered: try again in %s",
			maxDeniedInFlight, deniedTokenDelay)
	}
	if subtle.ConstantTimeCompare([]byte(sent[0]), g.token) == 1 {
		<-g.denying
		return "action token", nil
	}
	<-g.after(deniedTokenDelay) // not the call's context: its caller leaving ends nothing
	<-g.denying
	return "", status.Error(codes.PermissionDenied, errNotAllowed.Error())
}
