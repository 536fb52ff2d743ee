// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package segmentagent

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"go.uber.org/zap"
)

// maxUID is the largest uid Linux hands out ((uid_t)-1 means "no uid").
const maxUID = 1<<32 - 2

// resolveAllowedUIDs turns the configured users and postmaster pid files into
// the set of real uids whose processes may be read. Explicit entries must all
// resolve; the default names are tried leniently, and at least one uid must result.
func resolveAllowedUIDs(cfg ServiceConfig, logger *zap.Logger) (map[int64]struct{}, error) {
	uids := make(map[int64]struct{})
	var errs []error
	for _, name := range cfg.AllowedUsers {
		uid, err := lookupUID(strings.TrimSpace(name))
		if err != nil {
			errs = append(errs, fmt.Errorf("allowed_users: %w", err))
			continue
		}
		uids[uid] = struct{}{}
	}
	for _, path := range cfg.PostmasterPidFiles {
		fi, err := os.Stat(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("postmaster_pid_files: %w", err))
			continue
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			errs = append(errs, fmt.Errorf("postmaster_pid_files: %s: no owner", path))
			continue
		}
		uids[int64(st.Uid)] = struct{}{}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(cfg.AllowedUsers) == 0 && len(cfg.PostmasterPidFiles) == 0 {
		for _, name := range DefaultAllowedUsers {
			uid, err := lookupUID(name)
			if err != nil {
				logger.Info("default database user not present on this host", zap.String("user", name))
				continue
			}
			uids[uid] = struct{}{}
		}
		if len(uids) == 0 {
			return nil, fmt.Errorf("none of the default database users %v exists on this host; set allowed_users or postmaster_pid_files",
				DefaultAllowedUsers)
		}
	}
	return uids, nil
}

// lookupUID resolves a user name, or takes a numeric uid as it is.
func lookupUID(name string) (int64, error) {
	if name == "" {
		return 0, errors.New("empty user")
	}
	if uid, err := strconv.ParseInt(name, 10, 64); err == nil {
		if uid < 0 || uid > maxUID {
			return 0, fmt.Errorf("uid %d is out of range", uid)
		}
		return uid, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(u.Uid, 10, 64)
}
