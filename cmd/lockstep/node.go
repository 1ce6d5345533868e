// A running node: runNode assembles it from its parts — the home,
// the identity, the database, the connection service and the HTTP server —
// and supervises them: every part is a Serve(ctx) error, they start
// together, and when one fails or the context ends all of them stop.

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"golang.org/x/sync/errgroup"

	"lockstep/crypt"
	"lockstep/storage/blob"
	"lockstep/storage/blob/metered"
	"lockstep/storage/db"
	"lockstep/storage/home"
	"lockstep/sync/backup"
	"lockstep/sync/connections"
	"lockstep/sync/engine"
	"lockstep/sync/events"
	"lockstep/sync/protocol"
	"lockstep/sync/receiver"
	"lockstep/sync/router"
	"lockstep/web"
)

// nodeOptions configure Run.
type nodeOptions struct {
	Home   string
	Name   string   // device name for a new identity
	Listen []string // sync listen addresses, tcp://HOST:PORT
	GUI    string   // console/REST address HOST:PORT; empty for none
	// GUIHosts are names the console answers to beyond its address.
	GUIHosts []string
	// FolderRoot is where accepted folder offers go by default (~/Sync).
	FolderRoot string
	Store      storeOptions
	Find       findOptions
	// NoSealCompression: chunks for receivers are not compressed
	// (backup.Options.NoCompression).
	NoSealCompression bool
	// OpaqueStore: encrypted folders this node starts holding are kept
	// under segments of the home's store key (made if missing), their
	// IDs and meta hidden from whoever reads the store.
	OpaqueStore bool
	Logger      *slog.Logger
	// Ready, if set, is called once the node listens and serve.json is
	// written.
	Ready func(home.ServeInfo)
}

// Init creates the home, the identity, the API key and the database if they
// are missing, and returns the device ID. It is idempotent.
func initHome(dir, name string) (crypt.DeviceID, error) {
	if err := home.Ensure(dir); err != nil {
		return crypt.DeviceID{}, err
	}
	if name == "" {
		name, _ = os.Hostname()
	}
	id, _, err := crypt.LoadOrCreateIdentity(dir, name)
	if err != nil {
		return crypt.DeviceID{}, fmt.Errorf("identity: %w", err)
	}
	if _, err := home.LoadOrCreateAPIKey(dir); err != nil {
		return crypt.DeviceID{}, err
	}
	d, err := db.Open(filepath.Join(dir, home.DatabaseFile))
	if err != nil {
		return crypt.DeviceID{}, err
	}
	if err := d.Close(); err != nil {
		return crypt.DeviceID{}, err
	}
	return id.ID, nil
}

// Run runs the node until ctx is canceled or a part fails.
func runNode(parent context.Context, opts nodeOptions) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if _, err := initHome(opts.Home, opts.Name); err != nil {
		// Init opens the database once; a second daemon fails here with
		// db.ErrLocked, which says which process holds it.
		return err
	}
	id, err := crypt.LoadIdentity(opts.Home)
	if err != nil {
		return err
	}
	apiKey, err := home.LoadAPIKey(opts.Home)
	if err != nil {
		return err
	}
	database, err := db.Open(filepath.Join(opts.Home, home.DatabaseFile))
	if err != nil {
		return err
	}
	defer database.Close()

	store, storeDesc, closeStore, err := openStore(ctx, opts.Home, opts.Store)
	if err != nil {
		return err
	}
	defer closeStore()
	storeKey, hasKey, err := home.LoadStoreKey(opts.Home)
	if err == nil && opts.OpaqueStore && !hasKey {
		storeKey, err = home.LoadOrCreateStoreKey(opts.Home)
		hasKey = err == nil
		if hasKey {
			log.Warn("made a store key: keep a copy of it with your store's credentials, rebuilding this receiver's folders from the store needs it", "file", filepath.Join(opts.Home, home.StoreKeyFile))
		}
	}
	if err != nil {
		return err
	}
	var keyRef *crypt.StoreKey
	if hasKey {
		keyRef = &storeKey
	}
	if err := rebuildIfLost(ctx, database, store, keyRef, log); err != nil {
		return err
	}
	recv := receiver.New(id.ID, database, store, log)
	if hasKey {
		recv.SetStoreKey(storeKey, opts.OpaqueStore)
	}
	if opts.Store.S3Endpoint != "" {
		recv.SetRemoteStore()
	}
	bus := events.NewBus(0)
	recv.SetEvents(bus)
	// Loaded before the node says it is ready, so its status is complete
	// from the first request.
	if err := recv.Reload(ctx); err != nil {
		log.Warn("loading encrypted folders", "err", err)
	}

	folderRoot := opts.FolderRoot
	if folderRoot == "" {
		if h, err := os.UserHomeDir(); err == nil {
			folderRoot = filepath.Join(h, "Sync")
		}
	}
	rt := router.New(id.ID, database, log, bus)
	eng := engine.New(id.ID, database, log, engine.Options{Net: rt, Events: bus})
	bk := backup.New(id.ID, database, log, engineFolders{eng}, rt, backup.Options{NoCompression: opts.NoSealCompression})
	eng.SetSealed(bk)
	rt.Handle(eng, bk, receiverConns{recv})
	checks := newChecks(database, bk, recv, log)
	reg := &registry{db: database, self: id.ID, events: bus}
	find, err := newFinder(ctx, id, opts.Find, log)
	if err != nil {
		return err
	}
	conns, err := connections.New(ctx, connections.Config{
		Identity: id,
		Registry: reg,
		Handler:  router.Hello{Router: rt, Name: id.Leaf.Subject.CommonName, Version: version},
		Listen:   opts.Listen,
		Logger:   log,
		Resolver: find,
		Relay:    find,
	})
	if err != nil {
		find.close()
		return err
	}
	find.conns = conns

	info := home.ServeInfo{DeviceID: id.ID.String(), Listen: conns.Addresses(), PID: os.Getpid()}
	if find.discoveryServer != nil {
		info.Discovery = find.discoveryServer.URL()
	}
	if find.relayServer != nil {
		info.Relay = find.relayServer.URL()
	}
	var srv *web.Server
	if opts.GUI != "" {
		srv, err = web.New(ctx, opts.GUI, web.Config{ID: id.ID, DB: database, Conns: conns, Engine: eng, Backup: bk, Receiver: recv, Checks: checks, StoreUsage: func() (metered.Snapshot, bool) { return storeUsage(store) }, Memory: memory.status, Events: bus, Discovery: find, Home: opts.Home, Hosts: opts.GUIHosts, APIKey: apiKey, Logger: log, FolderRoot: folderRoot, Store: storeDesc})
		if err != nil {
			return fmt.Errorf("console on %s: %w", opts.GUI, err)
		}
		info.GUI = srv.URL()
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return eng.Serve(gctx) })
	g.Go(func() error { return recv.Serve(gctx, 0) })
	g.Go(func() error { return conns.Serve(gctx) })
	g.Go(func() error { return checks.Serve(gctx) })
	find.serve(gctx, g)
	if srv != nil {
		g.Go(func() error { return srv.Serve(gctx) })
	}
	if err := home.WriteServeInfo(opts.Home, info); err != nil {
		cancel()
		return errors.Join(err, g.Wait())
	}
	defer home.RemoveServeInfo(opts.Home)
	log.Info("lockstep ready", "device", info.DeviceID, "listen", info.Listen, "gui", info.GUI, "store", storeDesc)
	if opts.Ready != nil {
		opts.Ready(info)
	}
	err = g.Wait()
	if parent.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		return nil
	}
	return err
}

// rebuildIfLost rebuilds a receiver's database from its store when the
// database has no folders but the store holds some: the disk holding the
// database was lost, the bucket was not.
func rebuildIfLost(ctx context.Context, database *db.DB, store blob.Store, key *crypt.StoreKey, log *slog.Logger) error {
	folders, err := database.Folders(ctx)
	if err != nil || len(folders) > 0 {
		return err
	}
	has, err := receiver.StoreHasFolders(ctx, store)
	if err != nil {
		return fmt.Errorf("looking for receiver folders in the store: %w", err)
	}
	if !has {
		return nil
	}
	log.Info("the database is empty but the store holds encrypted folders: rebuilding")
	ids, err := receiver.RebuildWithKey(ctx, database, store, key, log)
	if err != nil {
		return fmt.Errorf("rebuilding the database from the store: %w", err)
	}
	log.Info("rebuilt encrypted folders from the store", "folders", ids)
	return nil
}

// engineFolders hands trusted sync's running folders to backup.
type engineFolders struct{ *engine.Engine }

func (e engineFolders) Folder(id string) backup.Folder {
	if h, ok := e.Engine.Folder(id); ok {
		return h
	}
	return nil
}

func (e engineFolders) Each(fn func(backup.Folder)) {
	e.EachFolder(func(h engine.Folder) { fn(h) })
}

// receiverConns hands the router's connections to the receiver, which
// takes any receiver.Peer.
type receiverConns struct{ *receiver.Receiver }

func (r receiverConns) ClusterConfig(ctx context.Context, c *protocol.Conn, wf *protocol.Folder) error {
	return r.Receiver.ClusterConfig(ctx, c, wf)
}

func (r receiverConns) SealedIndex(c *protocol.Conn, idx *protocol.SealedIndex) error {
	return r.Receiver.SealedIndex(c, idx)
}

func (r receiverConns) SealedAck(c *protocol.Conn, ack *protocol.SealedAck) error {
	return r.Receiver.SealedAck(c, ack)
}

func (r receiverConns) Closed(c *protocol.Conn) { r.Receiver.Closed(c) }
