package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"

	"lockstep/storage/home"
	"lockstep/web"
)

// errNoDaemon marks the errors of a command that needs the daemon of its
// home and finds none it can talk to (exit code 3).
var errNoDaemon = errors.New("no daemon")

// noDaemonErr is an error of errNoDaemon with its own message.
type noDaemonErr struct{ msg string }

func (e noDaemonErr) Error() string      { return e.msg }
func (noDaemonErr) Is(target error) bool { return target == errNoDaemon }

// client connects to the daemon of the selected home.
func (g *globals) client() (*web.Client, error) {
	dir, err := home.Resolve(g.home)
	if err != nil {
		return nil, err
	}
	info, err := home.ReadServeInfo(dir)
	if err != nil {
		if errors.Is(err, home.ErrNoDaemon) {
			return nil, noDaemonErr{fmt.Sprintf("no lockstep daemon is running for home %s (start one with 'lockstep serve')", dir)}
		}
		return nil, err
	}
	if info.GUI == "" {
		return nil, noDaemonErr{fmt.Sprintf("the daemon for home %s runs without its REST API (--no-gui)", dir)}
	}
	key, err := home.LoadAPIKey(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, noDaemonErr{fmt.Sprintf("no API key in home %s: is this the home the daemon runs with? (%v)", dir, err)}
	}
	if err != nil {
		return nil, err
	}
	return web.NewClient(dir, info.GUI, key)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func pathEscape(s string) string { return url.PathEscape(s) }
