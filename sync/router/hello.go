package router

import (
	"context"
	"fmt"

	"lockstep/sync/connections"
	"lockstep/sync/events"
	"lockstep/sync/protocol"
)

// Hello runs the protocol on the connections the connection service
// establishes: the Hello exchange, then the router's message loop.
type Hello struct {
	Router *Router
	// Name and Version are this device's, as peers see them.
	Name, Version string
}

// ServeConn implements connections.Handler.
func (h Hello) ServeConn(ctx context.Context, c *connections.Conn) error {
	r := h.Router
	hello, err := protocol.ExchangeHello(ctx, c, &protocol.Hello{
		DeviceName:    h.Name,
		ClientName:    "lockstep",
		ClientVersion: h.Version,
	})
	if err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	c.MarkReady()
	r.log.Info("device connected", "device", c.ID.String(), "name", hello.DeviceName, "addr", c.Addr, "client", hello.ClientName+" "+hello.ClientVersion)
	r.events.Publish(events.DeviceConnected{Device: c.ID.String(), Address: c.Addr, Connection: c.Kind()})
	err = r.ServeConn(ctx, c.ID, c)
	r.log.Info("device disconnected", "device", c.ID.String(), "reason", err)
	reason := "closed by this device"
	if err != nil && ctx.Err() == nil {
		reason = err.Error()
	}
	r.events.Publish(events.DeviceDisconnected{Device: c.ID.String(), Address: c.Addr, Reason: reason})
	return err
}
