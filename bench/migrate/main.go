// Command migrate measures the raw-id layout migration against a plain
// rename of the same directories, side by side in one run:
//
//	go run ./bench/migrate [-n 10000] [-rounds 3]
//
// Each round builds two identical workspaces of n raw-id conversations;
// one is migrated by hutch (journaled in the office registry, fsynced,
// vaults and host state included), the other has each directory renamed
// to the same office path with os.Rename and nothing else, which is what
// `mv` does. The order alternates between rounds. It prints the time per
// directory of each and their ratio; it asserts nothing.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hutchsandbox/hutch/internal/migrate/apply"
	"github.com/hutchsandbox/hutch/internal/migrate/legacytest"
	"github.com/hutchsandbox/hutch/internal/office"
)

func main() {
	n := flag.Int("n", 10000, "raw-id conversation directories per workspace")
	rounds := flag.Int("rounds", 3, "rounds; the median is reported")
	flag.Parse()
	if err := run(*n, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "bench/migrate:", err)
		os.Exit(1)
	}
}

func run(n, rounds int) error {
	tmp, err := os.MkdirTemp("", "hutch-bench-migrate-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	convs := make([]legacytest.Conversation, n)
	for i := range convs {
		convs[i] = legacytest.Conversation{RawID: fmt.Sprintf("C%06d", i), Vault: i%10 == 0, State: i%10 == 0}
	}
	var hutchTimes, mvTimes []time.Duration
	var regSize int64
	for r := range rounds {
		fmt.Fprintf(os.Stderr, "round %d/%d: building two workspaces of %d conversations\n", r+1, rounds, n)
		a, b := filepath.Join(tmp, fmt.Sprintf("a%d", r)), filepath.Join(tmp, fmt.Sprintf("b%d", r))
		for _, root := range []string{a, b} {
			if err := legacytest.Populate(filepath.Join(root, "ws"), filepath.Join(root, "state"), convs); err != nil {
				return err
			}
		}
		measure := []func() error{
			func() error {
				d, size, err := migrate(a)
				hutchTimes, regSize = append(hutchTimes, d), size
				return err
			},
			func() error {
				d, err := plainRename(b, convs)
				mvTimes = append(mvTimes, d)
				return err
			},
		}
		if r%2 == 1 {
			slices.Reverse(measure)
		}
		for _, m := range measure {
			if err := m(); err != nil {
				return err
			}
		}
		_ = os.RemoveAll(a)
		_ = os.RemoveAll(b)
	}
	h, m := median(hutchTimes), median(mvTimes)
	per := func(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d.Microseconds())/float64(n)) }
	fmt.Printf("Migrating %d raw-id directories (median of %d rounds; 10%% also have a vault and host state)\n", n, rounds)
	fmt.Printf("  hutch migrate (journaled, fsynced)   %s per directory\n", per(h))
	fmt.Printf("  plain rename of the same dirs (mv)   %s per directory\n", per(m))
	fmt.Printf("  ratio hutch / plain rename           %.1f\n", float64(h)/float64(m))
	fmt.Printf("  registry after the run               %d KiB\n", regSize>>10)
	return nil
}

func migrate(root string) (time.Duration, int64, error) {
	state := filepath.Join(root, "state")
	reg := office.NewRegistry(state)
	start := time.Now()
	rep, err := apply.Run(context.Background(), apply.Options{
		Workspace: filepath.Join(root, "ws"), StateDir: state, Registry: reg,
		Enabled: []office.Platform{office.PlatformSlack},
	})
	d := time.Since(start)
	if err != nil {
		return 0, 0, err
	}
	if rep.Moved == 0 {
		return 0, 0, fmt.Errorf("nothing migrated")
	}
	fi, err := os.Stat(reg.Path())
	if err != nil {
		return 0, 0, err
	}
	return d, fi.Size(), nil
}

// plainRename moves every directory where the migration would, with no
// journal, no checks and no fsync: the floor any migration stands on.
func plainRename(root string, convs []legacytest.Conversation) (time.Duration, error) {
	ws := filepath.Join(root, "ws")
	start := time.Now()
	for _, c := range convs {
		k := office.Address{Platform: office.PlatformSlack, ConversationID: c.RawID}.Key()
		if err := os.Rename(filepath.Join(ws, c.RawID), office.Dir(ws, k)); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
