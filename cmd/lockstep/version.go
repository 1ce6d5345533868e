package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is the implementation version, sent in Hello messages, and
// commit the commit it was built from; the build stamps both (-X
// main.version, -X main.commit), else the Go toolchain's VCS stamp, if
// any, gives the commit.
var (
	version = "dev"
	commit  = ""
)

// versionLine says which lockstep this is: its version, the commit it was
// built from (when the build knew it) and the Go that built it.
func versionLine() string {
	commit := commit
	if commit == "" {
		commit = "unknown"
	}
	if bi, ok := debug.ReadBuildInfo(); ok && commit == "unknown" {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				commit = s.Value[:min(12, len(s.Value))]
			}
		}
	}
	return fmt.Sprintf("lockstep %s (commit %s, %s)", version, commit, runtime.Version())
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit it was built from and the Go version",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintln(c.OutOrStdout(), versionLine())
			return nil
		},
	}
}
