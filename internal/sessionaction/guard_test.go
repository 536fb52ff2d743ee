// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package sessionaction

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	grpcmetadata "google.golang.org/grpc/metadata"

	"github.com/gpotel/gpotel/internal/await"
	"github.com/gpotel/gpotel/internal/clientname"
	"github.com/gpotel/gpotel/internal/roleconn"
	"github.com/gpotel/gpotel/internal/statustest"
)

// testActionToken is as long as the shortest token gpotel takes.
const testActionToken = "act-now-act-now-act-now-act-now!"

// tokenGuard is a guard of testActionToken whose wrong tokens' delays last
// until release is closed; paused counts the delays started.
func tokenGuard(t *testing.T) (g *Guard, paused *atomic.Int32, release chan time.Time) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "action.token")
	if err := os.WriteFile(path, []byte(testActionToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	paused, release = new(atomic.Int32), make(chan time.Time)
	g, err := NewGuard(Config{TokenFile: path}, WithDenialDelay(func(time.Duration) <-chan time.Time {
		paused.Add(1)
		return release
	}))
	if err != nil {
		t.Fatal(err)
	}
	return g, paused, release
}

func withToken(ctx context.Context, tokens ...string) context.Context {
	md := grpcmetadata.MD{}
	for _, tok := range tokens {
		md.Append(clientname.ActionTokenHeader, tok)
	}
	return grpcmetadata.NewIncomingContext(ctx, md)
}

// The action token file is a regular file only its owner may read or
// write, and its token 32 to 8192 bytes of visible ASCII; a FIFO in its
// place is refused, not waited on.
func TestActionTokenFileRules(t *testing.T) {
	dir := t.TempDir()
	for name, f := range map[string]struct {
		content string
		mode    os.FileMode
	}{
		"token": {testActionToken + "\n", 0o600}, "read-only": {testActionToken, 0o400},
		"empty": {"\n", 0o600}, "short": {testActionToken[1:], 0o600}, "huge": {strings.Repeat("x", roleconn.MaxSecretBytes+1), 0o600},
		"spaced": {"act now " + testActionToken, 0o600}, "group-readable": {testActionToken, 0o640}, "world-writable": {testActionToken, 0o602},
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(f.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, good := range []string{"token", "read-only"} {
		g, err := NewGuard(Config{TokenFile: filepath.Join(dir, good)})
		if err != nil || string(g.token) != testActionToken {
			t.Errorf("%s token file: %v", good, err)
		}
	}
	for bad, why := range map[string]string{
		"empty": "0 bytes, fewer than 32", "short": "31 bytes, fewer than 32", "huge": "longer than 8192 bytes", "absent": "no such file",
		"spaced": "byte 3 is 0x20", "group-readable": "mode 0640", "world-writable": "mode 0602", "fifo": "not a regular file",
	} {
		if _, err := NewGuard(Config{TokenFile: filepath.Join(dir, bad)}); err == nil || !strings.Contains(err.Error(), "actions::token_file") ||
			!strings.Contains(err.Error(), why) {
			t.Errorf("%s token file: %v, want an error saying %q", bad, err, why)
		}
	}
}

// One call carries one action token: a call is not a list of guesses.
func TestOneCallCarriesOneActionToken(t *testing.T) {
	g, paused, _ := tokenGuard(t)
	_, err := g.Admit(withToken(await.Context(t), "guess-guess-guess-guess-guess-guess", testActionToken))
	statustest.AssertCode(t, err, codes.PermissionDenied, "2 gpotel-action-token headers")
	if paused.Load() != 0 {
		t.Errorf("%d delays started, want none: the tokens were not even compared", paused.Load())
	}
}

// A wrong action token is answered only after a delay, and while
// maxDeniedInFlight of them wait, every further token is refused before it
// is compared: guesses are bounded per delay, and so are the handlers held.
func TestWrongActionTokensAreSlowedWithoutHoldingHandlers(t *testing.T) {
	g, paused, release := tokenGuard(t)
	wrong := withToken(await.Context(t), "guess-guess-guess-guess-guess-guess")
	answers := make(chan error, maxDeniedInFlight)
	for range maxDeniedInFlight {
		go func() {
			_, err := g.Admit(wrong)
			answers <- err
		}()
	}
	await.Until(t, "every wrong token waits out its delay", func() bool { return paused.Load() == maxDeniedInFlight })

	for _, ctx := range []context.Context{wrong, withToken(await.Context(t), testActionToken)} {
		_, err := g.Admit(ctx)
		statustest.AssertCode(t, err, codes.ResourceExhausted, "calls with a wrong action token are being answered")
	}
	if paused.Load() != maxDeniedInFlight {
		t.Errorf("%d calls held, want %d", paused.Load(), maxDeniedInFlight)
	}
	close(release)
	for range maxDeniedInFlight {
		statustest.AssertCode(t, <-answers, codes.PermissionDenied, "may not act")
	}
	if who, err := g.Admit(withToken(await.Context(t), testActionToken)); err != nil || who != "action token" {
		t.Errorf("the action token once the wrong ones were answered: %q %v", who, err)
	}
}

// A wrong token keeps its slot for the whole delay even when its caller
// has given up: else a caller could send a guess, cancel when no answer
// came at once (a right token is answered at once) and free the slot, and
// the bound of maxDeniedInFlight guesses per delay would not hold.
func TestAWrongTokenHoldsItsSlotWhenItsCallerLeaves(t *testing.T) {
	g, paused, release := tokenGuard(t)
	gone, leave := context.WithCancel(context.Background())
	leave()
	wrong := withToken(gone, "guess-guess-guess-guess-guess-guess")
	answers := make(chan error, maxDeniedInFlight)
	for range maxDeniedInFlight {
		go func() {
			_, err := g.Admit(wrong)
			answers <- err
		}()
	}
	await.Until(t, "every wrong token started its delay", func() bool { return paused.Load() == maxDeniedInFlight })
	_, err := g.Admit(withToken(await.Context(t), testActionToken))
	statustest.AssertCode(t, err, codes.ResourceExhausted, "calls with a wrong action token are being answered")
	select {
	case err := <-answers:
		t.Fatalf("a wrong token whose caller left was answered before its delay ended: %v", err)
	default:
	}
	close(release)
	for range maxDeniedInFlight {
		statustest.AssertCode(t, <-answers, codes.PermissionDenied, "may not act")
	}
}
