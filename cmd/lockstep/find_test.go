package main

import (
	"context"
	"log/slog"
	"net"
	"testing"

	"lockstep/crypt"
)

// TestNewFinderReleasesPortsOnError: when a later service can't be set up
// (here the relay's port is taken), the discovery service already bound is
// closed, not left holding its port.
func TestNewFinderReleasesPortsOnError(t *testing.T) {
	id, _, err := crypt.LoadOrCreateIdentity(t.TempDir(), "a")
	if err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := probe.Addr().String()
	probe.Close()

	_, err = newFinder(context.Background(), id, findOptions{
		Discovery: true, DiscoveryListen: free,
		Relay: true, RelayListen: taken.Addr().String(),
	}, slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("newFinder succeeded with the relay's port taken")
	}
	ln, err := net.Listen("tcp", free)
	if err != nil {
		t.Fatalf("the discovery service's port is still held after newFinder failed: %v", err)
	}
	ln.Close()
}
