package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"

	"lockstep/storage/home"
	"lockstep/web"
)

// client connects to the daemon of the selected home.
func (g *globals) client() (*web.Client, error) {
	dir, err := home.Resolve(g.home)
	if err != nil {
		return nil, err
	}
	info, err := home.ReadServeInfo(dir)
	if err != nil {
		if errors.Is(err, home.ErrNoDaemon) {
			return nil, fmt.Errorf("no lockstep daemon is running for home %s (start one with 'lockstep serve')", dir)
		}
		return nil, err
	}
	if info.GUI == "" {
		return nil, fmt.Errorf("the daemon for home %s runs without its REST API (--no-gui)", dir)
	}
	key, err := home.LoadAPIKey(dir)
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
