// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

// Command gpotel-top shows, like top, which database sessions cost the OS the
// most over the last window, read from gpotel's GetGPSessions API, under a
// header of the cluster's and each host's load from GetClusterTop.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gpotel-top:", err)
		os.Exit(1)
	}
}

// onceViews are what --once --view prints.
var onceViews = []string{"sessions", "queries", "hosts", "history"}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("gpotel-top", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned; --help is printed to out
	var o clientOptions
	fs.StringVar(&o.Addr, "addr", "127.0.0.1:1432", "GetGPInfo API address (host:port)")
	fs.BoolVar(&o.TLS, "tls", false, "use TLS (implied by --tls-ca or --tls-cert)")
	fs.StringVar(&o.CAFile, "tls-ca", "", "CA file that signed the server certificate")
	fs.StringVar(&o.CertFile, "tls-cert", "", "client certificate for mutual TLS")
	fs.StringVar(&o.KeyFile, "tls-key", "", "client key for mutual TLS")
	fs.StringVar(&o.ServerName, "tls-server-name", "", "server name to verify instead of the address host")
	fs.BoolVar(&o.SkipVerify, "tls-insecure-skip-verify", false, "do not verify the server certificate")
	fs.StringVar(&o.Token, "token", "", "refused: a token on the command line shows in ps; use --token-file or $"+tokenEnv)
	fs.StringVar(&o.TokenFile, "token-file", "", "file holding the bearer token (default: $"+tokenEnv+"); sent only over TLS or to loopback")
	fs.StringVar(&o.ActionTokenFile, "action-token-file", "",
		"file holding the collector's action token for k and K (default: $"+actionTokenEnv+"); sent only over TLS or to loopback")
	fs.BoolVar(&o.ShowSystem, "system", false, "include system processes (no client session)")
	fs.DurationVar(&o.CallTimeout, "timeout", 5*time.Second, "deadline of one call")
	var f filter
	fs.StringVar(&f.user, "user", "", "show only this user's sessions (in the screen: u)")
	fs.StringVar(&f.database, "database", "", "show only this database's sessions (in the screen: D)")
	fs.BoolVar(&f.showOwn, "gpotel", false, "show gpotel's own sessions too (in the screen: g)")
	interval := fs.Duration("interval", 2*time.Second, "refresh interval")
	once := fs.Bool("once", false, "print one plain-text answer and exit")
	sortName := fs.String("sort", "cpu", "initial sort: cpu, memory, read, write, delay, skew, avg, spill")
	width := fs.Int("width", 0, "cut --once lines to this many columns (0: $COLUMNS, else no cut)")
	memSess := fs.Int64("memory", 0, "with --once: print this session's memory contexts by name (GetSessionMemoryContexts)")
	memBackend := fs.Int("backend", 0, "with --memory: print backend N's context tree instead (N as listed)")
	viewName := fs.String("view", "sessions", "with --once: "+strings.Join(onceViews, ", "))
	version := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			_, err = io.WriteString(out, usage(flagDefaults(fs)))
			return err
		}
		return fmt.Errorf("%w (see gpotel-top --help)", err)
	}
	if *version {
		_, err := fmt.Fprintln(out, versionText())
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v (see gpotel-top --help)", fs.Args())
	}
	k, err := parseSortKey(*sortName)
	if err != nil {
		return err
	}
	if *interval <= 0 {
		return fmt.Errorf("--interval must be positive")
	}
	if !slices.Contains(onceViews, *viewName) {
		return fmt.Errorf("unknown --view %q: want %s", *viewName, strings.Join(onceViews, ", "))
	}
	if *viewName != "sessions" && !*once {
		return fmt.Errorf("--view prints once: add --once (in the screen, tab changes the view)")
	}
	if (*memSess != 0 || *memBackend != 0) && !*once {
		return fmt.Errorf("--memory and --backend print once: add --once (in the screen, select a session and press x)")
	}
	c, err := dial(ctx, o)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	if !*once {
		return runTUI(ctx, c, *interval, k, f)
	}
	lipgloss.SetColorProfile(termenv.Ascii) // plain text, for scripts, even on a terminal
	w := *width
	if w == 0 {
		w, _ = strconv.Atoi(os.Getenv("COLUMNS"))
	}
	if *memSess != 0 {
		return printMemoryOnce(ctx, c, *memSess, *memBackend, w, out)
	}
	m := newTopModel(ctx, c, *interval, k)
	m.filter, m.width = f, w
	m.view = slices.IndexFunc(views, func(v view) bool { return v.name == *viewName })
	return printOnce(m, out)
}

// flagDefaults is the flags' help, as the flag package prints it.
func flagDefaults(fs *flag.FlagSet) string {
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	return b.String()
}

// versionText is the module version and the commit it was built from.
func versionText() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "gpotel-top (no build information)"
	}
	v := "gpotel-top " + info.Main.Version
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		v += " commit " + rev
		if settings["vcs.modified"] == "true" {
			v += " (modified)"
		}
	}
	return v + " " + info.GoVersion
}

// printOnce writes what the screen's view shows, as plain text without
// the selection and the help line, for scripts: the title, the header,
// the list whole, then, under the hosts, the pressure pane.
func printOnce(m topModel, out io.Writer) error {
	msg := m.answers(m.sort)
	if msg.err != nil {
		return msg.err
	}
	next, _ := m.Update(msg)
	m = next.(topModel)
	m.height = 0 // no cut: every row
	lines := append([]string{m.titleBar(views[m.view].name)}, m.headerLines()...)
	lines = append(lines, m.listScreen()...)
	if m.impossibleShown() {
		lines = append(lines, capacityOf(m.top).note())
	}
	_, err := fmt.Fprintln(out, strings.Join(lines, "\n"))
	return err
}
