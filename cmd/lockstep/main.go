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

	"lockstep/sync/restore"
	"lockstep/web"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	root := newRoot()
	startMemoryLimit()
	stopDebug, err := startDebug()
	cmd := root
	if err == nil {
		cmd, err = root.ExecuteContextC(ctx)
	}
	stopDebug()
	stop()
	writeMemStats()
	if err != nil {
		msg := oneLine(err)
		// Cobra's own argument errors say nothing about what was expected.
		if strings.HasPrefix(msg, "accepts ") || strings.HasPrefix(msg, "unknown command") {
			msg += " (see '" + cmd.CommandPath() + " --help')"
		}
		fmt.Fprintln(os.Stderr, "lockstep: "+msg)
		os.Exit(exitCode(err))
	}
}

// Exit codes a script can rely on (docs/contract.md).
const (
	exitError        = 1 // any other failure
	exitUsage        = 2 // bad usage: an unknown command or flag, wrong arguments
	exitNoDaemon     = 3 // no daemon answers for the home
	exitVerification = 4 // a wrong password, tampered or damaged data, a rollback
)

// exitCode maps an error to the exit code the contract promises for it;
// every classification of errors into codes is here.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var apiErr *web.APIError
	msg := err.Error()
	switch {
	case errors.Is(err, errUsage),
		// Cobra's own errors carry no type.
		strings.HasPrefix(msg, "unknown command"), strings.HasPrefix(msg, "accepts "),
		strings.HasPrefix(msg, "unknown flag"), strings.HasPrefix(msg, "required flag"):
		return exitUsage
	case errors.Is(err, errNoDaemon), errors.Is(err, web.ErrUnreachable):
		return exitNoDaemon
	case errors.As(err, &apiErr) && apiErr.Kind == web.KindVerification,
		errors.Is(err, restore.ErrDamaged), errors.Is(err, restore.ErrIncomplete), errors.Is(err, errProblems),
		web.VerificationFailed(err):
		return exitVerification
	}
	return exitError
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
		Use:   "lockstep",
		Short: "Keep folders in sync across your devices, with encrypted backups on devices you don't trust",
		Long: "Keep folders in sync across your devices, with encrypted backups on devices you don't trust.\n\n" +
			"Exit codes: 0 success, 1 an error, 2 bad usage, 3 no daemon answers for the home,\n" +
			"4 verification failed (a wrong password, tampered or damaged data, a receiver that rolled back).\n" +
			"Commands that print a result take --json: one JSON value on stdout, nothing else there.",
		Example: "  lockstep init --name laptop\n" +
			"  lockstep serve &\n" +
			"  lockstep device add OTHER-DEVICE-ID --name desktop\n" +
			"  lockstep folder add docs ~/Documents\n" +
			"  lockstep folder share docs OTHER-DEVICE-ID\n" +
			"  lockstep status",
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
		newConsole(g), newVersion(), newCheck(g),
	)
	root.InitDefaultCompletionCmd()
	exampleCompletion(root)
	root.Version = versionLine()
	root.SetVersionTemplate("{{.Version}}\n")
	addControls(root, g)
	refuseUnknownSubcommands(root)
	return root
}

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

// exampleCompletion gives cobra's completion commands examples like every
// other command's.
func exampleCompletion(root *cobra.Command) {
	comp, _, err := root.Find([]string{"completion"})
	if err != nil || comp == root {
		return
	}
	comp.Example = "  source <(lockstep completion bash)\n" +
		"  lockstep completion zsh > \"${fpath[1]}/_lockstep\"\n" +
		"  lockstep completion fish > ~/.config/fish/completions/lockstep.fish"
	for _, sub := range comp.Commands() {
		switch sub.Name() {
		case "bash":
			sub.Example = "  source <(lockstep completion bash)\n  lockstep completion bash > /etc/bash_completion.d/lockstep"
		case "zsh":
			sub.Example = "  lockstep completion zsh > \"${fpath[1]}/_lockstep\""
		case "fish":
			sub.Example = "  lockstep completion fish > ~/.config/fish/completions/lockstep.fish"
		case "powershell":
			sub.Example = "  lockstep completion powershell | Out-String | Invoke-Expression"
		}
	}
}
