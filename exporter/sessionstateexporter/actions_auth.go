// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionstateexporter

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"

	"google.golang.org/grpc/metadata"

	"github.com/gpotel/gpotel/internal/clientname"
)

// actionGuard says which clients may act: one that sends the action token,
// or one whose verified certificate is named in allowed_clients.
type actionGuard struct {
	token   []byte // empty: no token admits
	allowed clientname.Allowed
}

// newActionGuard reads the token file, when one is configured.
func newActionGuard(cfg ActionsConfig) (actionGuard, error) {
	g := actionGuard{allowed: clientname.NewAllowed(cfg.AllowedClients)}
	if cfg.TokenFile == "" {
		return g, nil
	}
	token, err := readSecretFile(cfg.TokenFile)
	if err != nil {
		return g, fmt.Errorf("actions::token_file %s: %w", cfg.TokenFile, err)
	}
	if token == "" {
		return g, fmt.Errorf("actions::token_file %s: empty", cfg.TokenFile)
	}
	g.token = []byte(token)
	return g, nil
}

// errNotAllowed is the answer to a client that may not act.
var errNotAllowed = errors.New("this client may not act: send the action token in the " + clientname.ActionTokenHeader +
	" header, or call with a client certificate named in the exporter's actions::allowed_clients")

// admit names the client when it may act.
func (g actionGuard) admit(ctx context.Context) (string, error) {
	if len(g.token) > 0 {
		md, _ := metadata.FromIncomingContext(ctx)
		for _, v := range md.Get(clientname.ActionTokenHeader) {
			if subtle.ConstantTimeCompare([]byte(v), g.token) == 1 {
				return "action token", nil
			}
		}
	}
	if name, ok := g.allowed.Match(clientname.Verified(ctx)); ok {
		return "certificate " + name, nil
	}
	return "", errNotAllowed
}
