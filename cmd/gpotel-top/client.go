package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/collector/config/configtls"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gpotel/gpotel/proto/yagpcc"
)

// clientOptions says how to reach the sessionstate exporter's GetGPInfo API.
type clientOptions struct {
	Addr        string
	TLS         bool
	CAFile      string
	CertFile    string
	KeyFile     string
	ServerName  string
	SkipVerify  bool
	Token       string
	TokenFile   string
	ShowSystem  bool
	CallTimeout time.Duration
}

func (o clientOptions) Validate() error {
	var errs []error
	if o.Addr == "" {
		errs = append(errs, errors.New("--addr is empty"))
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		errs = append(errs, errors.New("--tls-cert and --tls-key go together"))
	}
	if o.Token != "" && o.TokenFile != "" {
		errs = append(errs, errors.New("give --token or --token-file, not both"))
	}
	if o.CallTimeout <= 0 {
		errs = append(errs, errors.New("--timeout must be positive"))
	}
	return errors.Join(errs...)
}

// sessionClient fetches session lists over one connection.
type sessionClient struct {
	conn    *grpc.ClientConn
	api     yagpcc.GetGPInfoClient
	opts    clientOptions
	timeout time.Duration
}

func dial(ctx context.Context, o clientOptions) (*sessionClient, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if o.TLS || o.CAFile != "" || o.CertFile != "" {
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
	dialOpts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	token, err := o.bearerToken()
	if err != nil {
		return nil, err
	}
	if token != "" {
		dialOpts = append(dialOpts, grpc.WithPerRPCCredentials(bearerToken{token: token, secure: o.TLS || o.CAFile != ""}))
	}
	conn, err := grpc.NewClient(o.Addr, dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", o.Addr, err)
	}
	return &sessionClient{conn: conn, api: yagpcc.NewGetGPInfoClient(conn), opts: o, timeout: o.CallTimeout}, nil
}

func (o clientOptions) bearerToken() (string, error) {
	if o.TokenFile == "" {
		return o.Token, nil
	}
	b, err := os.ReadFile(o.TokenFile)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// sessions asks for every session's state, sorted server-side by the key too.
func (c *sessionClient) sessions(ctx context.Context, k SortKey) ([]SessionRow, error) {
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
			return nil, fmt.Errorf("GetGPSessions %s: %w", c.opts.Addr, err)
		}
		for _, s := range resp.GetSessionsState() {
			rows = append(rows, rowFromState(s))
		}
		if resp.GetNextPageToken() == "" || resp.GetNextPageToken() == req.PageToken {
			break
		}
		req.PageToken = resp.GetNextPageToken()
	}
	sortRows(rows, k)
	return rows, nil
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
