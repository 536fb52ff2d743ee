// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Package roleconn is the connection of a collector component that writes
// or acts with a database role of its own (never the receiver's monitoring
// role): the history exporter's and the sessionstate exporter's actions.
// Its settings are squashed into the component's configuration, so the keys
// are host, port, database, user, password_file, password_env, sslmode,
// sslrootcert and insecure wherever it is used.
package roleconn

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gpotel/gpotel/internal/gpsql"
	"github.com/gpotel/gpotel/internal/listenaddr"
)

// MaxSecretBytes bounds what is read from a password or token file.
const MaxSecretBytes = 8192

// Settings are the connection's settings.
type Settings struct {
	Host     string `mapstructure:"host"`
	Port     int    `mapstructure:"port"`
	Database string `mapstructure:"database"`
	User     string `mapstructure:"user"`
	// At most one password source: a file, or an environment variable's name.
	PasswordFile string `mapstructure:"password_file"`
	PasswordEnv  string `mapstructure:"password_env"`
	// SSLMode and SSLRootCert with libpq's meaning.
	SSLMode     string `mapstructure:"sslmode"`
	SSLRootCert string `mapstructure:"sslrootcert"`
	// Insecure allows a connection beyond this host whose sslmode does
	// not check the server's certificate (CheckTLS).
	Insecure bool `mapstructure:"insecure"`
}

// Problems lists what is wrong, each message led by prefix and the key;
// hostIs says what the host is, for the message when it is missing.
func (s Settings) Problems(prefix, hostIs string) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(prefix+format, args...)) }
	if s.Host == "" {
		add(`host "": must be set (%s, or its socket directory)`, hostIs)
	}
	if s.Port <= 0 || s.Port > 65535 {
		add("port %d: must be in [1, 65535]", s.Port)
	}
	if s.Database == "" {
		add(`database "": must be set`)
	}
	if s.User == "" {
		add(`user "": must be set (a role of its own, not the receiver's monitoring role)`)
	}
	if s.PasswordFile != "" && s.PasswordEnv != "" {
		add("password_file %q: password_env %q is set too; give one", s.PasswordFile, s.PasswordEnv)
	}
	// pgx checks sslmode only for a TCP host, hence localhost.
	if _, err := pgconn.ParseConfig("postgres://localhost/?" + url.Values{"sslmode": {s.SSLMode}}.Encode()); err != nil {
		add("sslmode %q: want disable, allow, prefer, require, verify-ca or verify-full", s.SSLMode)
	} else if err := s.CheckTLS(prefix, s.Insecure); err != nil && s.Host != "" {
		errs = append(errs, err)
	}
	return errs
}

// UnverifiedBeyondLoopback is true when the connection leaves this host (its
// host is neither a socket directory nor a loopback address) with an
// sslmode that does not check the server's certificate, so anyone on the
// path may read it or pose as the server: gpotel's rule for plaintext
// servers beyond loopback (internal/listenaddr), applied to a client.
func (s Settings) UnverifiedBeyondLoopback() bool {
	if s.SSLMode == "verify-ca" || s.SSLMode == "verify-full" || strings.HasPrefix(s.Host, "/") {
		return false
	}
	return !listenaddr.Loopback(net.JoinHostPort(s.Host, strconv.Itoa(s.Port)))
}

// CheckTLS refuses a connection UnverifiedBeyondLoopback unless insecure is
// set; prefix leads the message, as in Problems.
func (s Settings) CheckTLS(prefix string, insecure bool) error {
	if insecure || !s.UnverifiedBeyondLoopback() {
		return nil
	}
	return fmt.Errorf("%ssslmode %q: host %q is not on this host and sslmode does not check the server's certificate: set sslmode verify-full with "+
		"sslrootcert, or %sinsecure: true to accept a connection anyone on the path may read or answer",
		prefix, s.SSLMode, s.Host, prefix)
}

// ConnConfig is the pgx settings, the password read from its source, with
// application_name set and search_path pinned; a password source that
// cannot be read is an error led by the key.
func (s Settings) ConnConfig(applicationName string) (*pgx.ConnConfig, error) {
	cc, err := pgx.ParseConfig(s.connString(applicationName))
	if err != nil {
		return nil, fmt.Errorf("connection settings: %w", err)
	}
	cc.RuntimeParams["search_path"] = gpsql.SearchPath
	switch {
	case s.PasswordEnv != "":
		v, ok := os.LookupEnv(s.PasswordEnv)
		if !ok {
			return nil, fmt.Errorf("password_env %s: the environment variable is not set", s.PasswordEnv)
		}
		cc.Password = v
	case s.PasswordFile != "":
		b, err := ReadSecretFile(s.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("password_file %s: %w", s.PasswordFile, err)
		}
		cc.Password = b
	}
	return cc, nil
}

// connString is the settings but the password, as a URL whose query holds
// every field (a socket directory is a host too).
func (s Settings) connString(applicationName string) string {
	q := url.Values{
		"host": {s.Host}, "port": {strconv.Itoa(s.Port)}, "dbname": {s.Database}, "user": {s.User},
		"sslmode": {s.SSLMode}, "application_name": {applicationName},
	}
	if s.SSLRootCert != "" {
		q.Set("sslrootcert", s.SSLRootCert)
	}
	return "postgres:///?" + q.Encode()
}

// ReadSecretFile reads a short secret, without its trailing newline, from a
// regular file only its owner may read or write (0600 or 0400), owned by
// the reader or root: a secret others can read is no secret, and one
// others can write is theirs.
func ReadSecretFile(path string) (string, error) {
	// O_NONBLOCK: a FIFO put in its place opens at once, and is refused below.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0) // #nosec G304 -- the operator's configured file
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("not a regular file (%s)", info.Mode().Type())
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("mode %#o lets others than its owner read or write it: chmod 600 it", perm)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return "", fmt.Errorf("owned by uid %d, not by the reader (uid %d) or root: that user may write it; chown it", st.Uid, os.Geteuid())
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxSecretBytes+1))
	if err != nil {
		return "", err
	}
	if len(b) > MaxSecretBytes {
		return "", fmt.Errorf("longer than %d bytes, not a secret", MaxSecretBytes)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}
