package main

import (
	"fmt"
	"io"
	"net/http"

	"github.com/spf13/cobra"

	"lockstep/web"
)

func newConsole(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:     "console",
		Short:   "Manage the web console",
		Example: "  lockstep console password --password-file ~/.console-password",
	}
	var passwordFile string
	password := &cobra.Command{
		Use:   "password",
		Short: "Set the console's admin password (first run, or a forgotten one)",
		Long: "Set the console's admin password from the first line of a file, through the daemon's REST API\n" +
			"with the API key: a headless node never needs the first-run page. Every console session ends.",
		Example: "  umask 077; printf '%s\\n' 'a long passphrase' > pw.txt\n" +
			"  lockstep console password --password-file pw.txt && rm pw.txt",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if passwordFile == "" {
				return usageError(c, "--password-file is required")
			}
			pw, err := readPassword(passwordFile)
			if err != nil {
				return err
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			if err := cl.Do(c.Context(), http.MethodPut, "/rest/console/password", web.ConsolePassword{Password: pw}, nil); err != nil {
				return err
			}
			return emit(c, changed{Action: "console-password-set"}, func(w io.Writer) { fmt.Fprintln(w, "console password set") })
		},
	}
	jsonFlag(password)
	password.Flags().StringVar(&passwordFile, "password-file", "", "file whose first line is the new password (8 to 72 bytes)")
	c.AddCommand(password)
	return c
}
