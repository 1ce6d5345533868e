// Command lockstep keeps folders identical across devices and keeps an
// encrypted, versioned backup on devices the user does not trust.
//
// The CLI is described in docs/contract.md; this package only parses flags
// and wires packages together.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	root := newRoot()
	stopDebug, err := startDebug()
	cmd := root
	if err == nil {
		cmd, err = root.ExecuteContextC(ctx)
	}
	stopDebug()
	stop()
	if err != nil {
		msg := oneLine(err)
		// Cobra's own argument errors say nothing about what was expected.
		if strings.HasPrefix(msg, "accepts ") || strings.HasPrefix(msg, "unknown command") {
			msg += " (see '" + cmd.CommandPath() + " --help')"
		}
		fmt.Fprintln(os.Stderr, "lockstep: "+msg)
		os.Exit(1)
	}
}

// oneLine keeps an error to the one line the contract promises.
func oneLine(err error) string {
	return escapeControls(strings.Join(strings.Fields(err.Error()), " "))
}

type globals struct {
	home string
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "lockstep",
		Short:         "Keep folders in sync across your devices, with encrypted backups on devices you don't trust",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.home, "home", "", "home directory (default $LOCKSTEP_HOME, else $XDG_STATE_HOME/lockstep, else ~/.local/state/lockstep)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())
	})
	root.AddCommand(
		newInit(g), newID(g), newServe(g),
		newDevice(g), newPending(g), newStatus(g),
		newFolder(g), newScan(g), newRecover(g),
		newVersions(g), newRestore(g), newPrune(g),
		newConsole(g),
	)
	return root
}

// usageError is returned for wrong arguments.
func usageError(c *cobra.Command, msg string) error {
	return errors.New(msg + " (see '" + c.CommandPath() + " --help')")
}
