// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/collector/config/configtls"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gpotel/gpotel/internal/listenaddr"
	"github.com/gpotel/gpotel/proto/yagpcc"
)

// clientOptions says how to reach the sessionstate exporter's GetGPInfo API.
type clientOptions struct {
	Addr       string
	TLS        bool
	CAFile     string
	CertFile   string
	KeyFile    string
	ServerName string
	SkipVerify bool
	Token      string
	TokenFile  string
	// ActionTokenFile holds the collector's action token (default $GPOTEL_ACTION_TOKEN).
	ActionTokenFile string
	ShowSystem      bool
	CallTimeout     time.Duration
}

func (o clientOptions) Validate() error {
	var errs []error
	if o.Addr == "" {
		errs = append(errs, errors.New("--addr is empty"))
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		errs = append(errs, errors.New("--tls-cert and --tls-key go together"))
	}
	if o.Token != "" {
		errs = append(errs, fmt.Errorf("--token would show the token to every local user (ps): put it in a file for --token-file, or in $%s", tokenEnv))
	}
	if o.CallTimeout <= 0 {
		errs = append(errs, errors.New("--timeout must be positive"))
	}
	return errors.Join(errs...)
}

const (
	// tokenEnv names the environment variable that may hold the bearer token.
	tokenEnv = "GPOTEL_API_TOKEN" //nolint:gosec // the variable's name, not a credential
	// maxTokenBytes bounds what is read from a token file.
	maxTokenBytes = 8192
)

// sessionClient fetches session lists over one connection.
type sessionClient struct {
	conn    *grpc.ClientConn
	api     yagpcc.GetGPInfoClient
	opts    clientOptions
	timeout time.Duration
	// actionToken is sent with actions only; "" when there is none.
	actionToken string
}

func dial(ctx context.Context, o clientOptions) (*sessionClient, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	token, err := o.bearerToken()
	if err != nil {
		return nil, err
	}
	actionToken, err := readToken(o.ActionTokenFile, actionTokenEnv)
	if err != nil {
		return nil, fmt.Errorf("action %w", err)
	}
	if (token != "" || actionToken != "") && !o.usesTLS() && !listenaddr.Loopback(o.Addr) {
		return nil, fmt.Errorf("a bearer or action token goes to %s only over TLS: add --tls (or --tls-ca), or reach the API on a loopback address", o.Addr)
	}
	creds := insecure.NewCredentials()
	if o.usesTLS() {
		cfg := configtls.NewDefaultClientConfig()
		cfg.CAFile = o.CAFile
		cfg.CertFile = o.CertFile
		cfg.KeyFile = o.KeyFile
		cfg.ServerName = o.ServerName
		cfg.InsecureSkipVerify = o.SkipVerify
		tlsCfg, err := cfg.LoadTLSConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		creds = credentials.NewTLS(tlsCfg)
	}
	dialOpts := []grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithChainUnaryInterceptor(cleanAnswers)}
	if token != "" {
		dialOpts = append(dialOpts, grpc.WithPerRPCCredentials(bearerToken{token: token, secure: o.usesTLS()}))
	}
	conn, err := grpc.NewClient(o.Addr, dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", o.Addr, err)
	}
	return &sessionClient{conn: conn, api: yagpcc.NewGetGPInfoClient(conn), opts: o, timeout: o.CallTimeout, actionToken: actionToken}, nil
}

// usesTLS: --tls, or implied by a CA or a client certificate.
func (o clientOptions) usesTLS() bool {
	return o.TLS || o.CAFile != "" || o.CertFile != ""
}

// bearerToken reads the token from --token-file, else from $GPOTEL_API_TOKEN.
func (o clientOptions) bearerToken() (string, error) { return readToken(o.TokenFile, tokenEnv) }

// readToken reads a token from file, else from the environment variable env.
func readToken(file, env string) (string, error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv(env)), nil
	}
	f, err := os.Open(file) // #nosec G304 -- the user names their own token file
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenBytes+1))
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if len(b) > maxTokenBytes {
		return "", fmt.Errorf("token file %s: longer than %d bytes, not a token", file, maxTokenBytes)
	}
	return strings.TrimSpace(string(b)), nil
}

// sessions asks for every session's state, sorted server-side by the key
// too. newest is the newest snapshot's time when the caller knows it (zero
// otherwise): a session seen before it has ended.
func (c *sessionClient) sessions(ctx context.Context, k SortKey, newest time.Time) ([]SessionRow, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req := &yagpcc.GetGPSessionsReq{
		ShowSystem: c.opts.ShowSystem,
		Field:      []*yagpcc.SessionFieldWrapper{{FieldName: k.serverField(), Order: yagpcc.SortOrder_SORT_DESC}},
	}
	var rows []SessionRow
	for {
		resp, err := c.api.GetGPSessions(ctx, req)
		if err != nil {
			return nil, c.callError("the session list", err)
		}
		for _, s := range resp.GetSessionsState() {
			rows = append(rows, rowFromState(s))
		}
		if resp.GetNextPageToken() == "" || resp.GetNextPageToken() == req.PageToken {
			break
		}
		req.PageToken = resp.GetNextPageToken()
	}
	markEnded(rows, newest)
	markBlockChains(rows)
	sortRows(rows, k)
	return rows, nil
}

// query asks for one query's figures, per segment too.
func (c *sessionClient) query(ctx context.Context, key *yagpcc.QueryKey) (*yagpcc.TotalQueryData, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.api.GetGPQuery(ctx, &yagpcc.GetGPQueryReq{QueryKey: key})
	if err != nil {
		return nil, c.callError("the query's figures", err)
	}
	return resp.GetQueriesData(), nil
}

func (c *sessionClient) Close() error { return c.conn.Close() }

// bearerToken sends "authorization: Bearer <token>", what bearertokenauth checks.
type bearerToken struct {
	token  string
	secure bool
}

func (t bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + t.token}, nil
}

func (t bearerToken) RequireTransportSecurity() bool { return t.secure }
