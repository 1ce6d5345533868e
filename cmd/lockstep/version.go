package main

import (
	"fmt"
	"io"
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
	return fmt.Sprintf("lockstep %s (commit %s, %s)", version, commitOf(), runtime.Version())
}

// commitOf is the commit this binary was built from, or "unknown".
func commitOf() string {
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
	return commit
}

func newVersion() *cobra.Command {
	c := &cobra.Command{
		Use:     "version",
		Short:   "Print the version, the commit it was built from and the Go version",
		Example: "  lockstep version\n  lockstep --version\n  lockstep version --json",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			v := versionJSON{Version: version, Commit: commitOf(), Go: runtime.Version()}
			return emit(c, v, func(w io.Writer) { fmt.Fprintln(w, versionLine()) })
		},
	}
	jsonFlag(c)
	return c
}

// versionJSON is what `version --json` prints.
type versionJSON struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Go      string `json:"go"`
}
