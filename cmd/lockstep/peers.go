package main

import (
	"context"
	"fmt"
	"log/slog"

	"lockstep/crypt"
	"lockstep/sync/connections"
	"lockstep/sync/protocol"
	"lockstep/sync/router"
)

// version is the implementation version, sent in Hello messages; the
// build stamps it (-X main.version).
var version = "dev"

// peerHandler runs the protocol on an established connection: the Hello
// exchange, then the message loop with the model.
type peerHandler struct {
	id     *crypt.Identity
	name   string
	log    *slog.Logger
	router *router.Router
}

func (h *peerHandler) ServeConn(ctx context.Context, c *connections.Conn) error {
	hello, err := protocol.ExchangeHello(ctx, c, &protocol.Hello{
		DeviceName:    h.name,
		ClientName:    "lockstep",
		ClientVersion: version,
	})
	if err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	c.MarkReady()
	h.log.Info("device connected", "device", c.ID.String(), "name", hello.DeviceName, "addr", c.Addr, "client", hello.ClientName+" "+hello.ClientVersion)
	err = h.router.ServeConn(ctx, c.ID, c)
	h.log.Info("device disconnected", "device", c.ID.String(), "reason", err)
	return err
}
