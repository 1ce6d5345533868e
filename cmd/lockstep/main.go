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
		if errors.Is(err, errUsage) || strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "accepts ") || strings.HasPrefix(msg, "unknown flag") {
			os.Exit(exitUsage)
		}
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
		return usageErr{fmt.Sprintf("%v (see '%s --help')", err, c.CommandPath())}
	})
	root.AddCommand(
		newInit(g), newID(g), newServe(g),
		newDevice(g), newPending(g), newStatus(g),
		newFolder(g), newScan(g), newRecover(g),
		newVersions(g), newRestore(g), newPrune(g),
		newConsole(g), newVersion(),
	)
	root.Version = versionLine()
	root.SetVersionTemplate("{{.Version}}\n")
	addControls(root, g)
	refuseUnknownSubcommands(root)
	return root
}

// Exit codes beyond 0 and 1.
const exitUsage = 2 // bad usage: an unknown command, wrong arguments

// errUsage marks errors of bad usage (errors.Is); usageErr carries one.
var errUsage = errors.New("bad usage")

type usageErr struct{ msg string }

func (e usageErr) Error() string      { return e.msg }
func (usageErr) Is(target error) bool { return target == errUsage }

// refuseUnknownSubcommands makes every command that only groups others
// fail on an argument that names none of them (cobra prints the help and
// exits 0 for "lockstep folder ad x y", so a script would go on).
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !c.HasSubCommands() || c.Run != nil || c.RunE != nil || c.Parent() == nil {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		return usageErr{fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())}
	}
}

// usageError is returned for wrong arguments.
func usageError(c *cobra.Command, msg string) error {
	return usageErr{fmt.Sprintf("%s (see '%s --help')", msg, c.CommandPath())}
}
