package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"lockstep/storage/home"
	"lockstep/web"
)

func newServe(g *globals) *cobra.Command {
	var (
		listen      []string
		gui         string
		guiHosts    []string
		noGUI       bool
		logLevel    string
		name        string
		store       storeOptions
		find        findOptions
		noLocal     bool
		noZstd      bool
		opaqueStore bool
	)
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the node in the foreground until SIGINT/SIGTERM",
		Example: "  lockstep serve\n" +
			"  lockstep serve --listen tcp://0.0.0.0:22100 --gui 127.0.0.1:8385 --name laptop\n" +
			"  # a receiver keeping its blobs in S3 (keys from the environment)\n" +
			"  lockstep serve --s3-endpoint s3.example.org --s3-bucket lockstep",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			dir, err := home.Resolve(g.home)
			if err != nil {
				return err
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return usageError(c, fmt.Sprintf("invalid --log-level %q: want debug, info, warn or error", logLevel))
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			slog.SetDefault(log)
			for _, h := range guiHosts {
				if err := web.CheckGUIHost(h); err != nil {
					return usageError(c, err.Error())
				}
			}
			find.LocalDiscovery = !noLocal
			opts := nodeOptions{Home: dir, Name: name, Listen: listen, GUI: gui, GUIHosts: guiHosts, Logger: log, Store: store, Find: find, NoSealCompression: noZstd, OpaqueStore: opaqueStore}
			if noGUI {
				opts.GUI = ""
			}
			return runNode(c.Context(), opts)
		},
	}
	c.Flags().StringArrayVar(&listen, "listen", []string{"tcp://0.0.0.0:22100"}, "sync listen address (repeatable)")
	c.Flags().StringVar(&gui, "gui", "127.0.0.1:8385", "console and REST address")
	c.Flags().StringArrayVar(&guiHosts, "gui-host", nil, "a name the console is reached by beyond its address and localhost, NAME or NAME:PORT (repeatable); requests for other names are refused")
	c.Flags().BoolVar(&noGUI, "no-gui", false, "run without the console and REST API")
	c.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	c.Flags().StringVar(&store.S3Endpoint, "s3-endpoint", "", "keep blobs in S3 at HOST:PORT (keys from $"+envS3AccessKey+" and $"+envS3SecretKey+", else $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY, else the AWS credentials file)")
	c.Flags().StringVar(&store.S3Bucket, "s3-bucket", "", "the S3 bucket")
	c.Flags().StringVar(&store.S3Prefix, "s3-prefix", "", "a prefix for object names in the bucket")
	c.Flags().BoolVar(&store.S3Insecure, "s3-insecure", false, "talk to S3 over plain HTTP")
	c.Flags().StringVar(&store.S3Region, "s3-region", "", "the bucket's S3 region (default: ask the server)")
	c.Flags().StringVar(&store.S3Addressing, "s3-addressing", "auto", "how requests name the bucket: auto, path (HOST/BUCKET) or virtual (BUCKET.HOST)")
	c.Flags().StringVar(&store.S3CAFile, "s3-ca-file", "", "a PEM file of certificate authorities trusted for S3 besides the system's")
	c.Flags().StringVar(&store.S3Profile, "s3-profile", "", "the profile of the AWS credentials file to take S3 keys from (default: $AWS_PROFILE, else default)")
	c.Flags().StringVar(&store.S3StorageClass, "s3-storage-class", "", "the S3 storage class of chunks and packs, such as STANDARD_IA (logs and metadata stay STANDARD)")
	c.Flags().BoolVar(&store.S3CreateBucket, "s3-create-bucket", false, "create the S3 bucket (in --s3-region) if it does not exist")
	addStoreLayerFlags(c.Flags(), &store.Layers)
	c.Flags().BoolVar(&noLocal, "no-local-discovery", false, "neither announce this device on the LAN nor listen for others")
	c.Flags().BoolVar(&opaqueStore, "opaque-store", false, "keep encrypted folders this node starts holding under names its store key (store.key in the home, made if missing) derives, so the store shows neither their IDs nor their settings; rebuilding them from the store needs that key")
	c.Flags().BoolVar(&noZstd, "no-seal-compression", false, "send chunks to untrusted receivers uncompressed: more to store, but their sizes no longer say how compressible your files are")
	c.Flags().StringArrayVar(&find.DiscoveryServers, "discovery-server", nil, "a global discovery service to announce to and look devices up at, https://HOST:PORT/?id=ID (repeatable)")
	c.Flags().StringArrayVar(&find.RelayServers, "relay-server", nil, "a relay to be reachable through, relay://HOST:PORT/?id=ID (repeatable)")
	c.Flags().BoolVar(&find.Discovery, "discovery", false, "run a global discovery service")
	c.Flags().StringVar(&find.DiscoveryListen, "discovery-listen", "0.0.0.0:8443", "the discovery service's address")
	c.Flags().BoolVar(&find.Relay, "relay", false, "run a relay")
	c.Flags().StringVar(&find.RelayListen, "relay-listen", "0.0.0.0:22067", "the relay's address")
	c.Flags().StringVar(&find.LocalListen, "local-discovery-listen", "", "the UDP address LAN announcements are received on (default port 22100)")
	c.Flags().StringVar(&name, "name", "", "device name when the identity is created (default: the host name)")
	completeFlag(c, "log-level", "debug", "info", "warn", "error")
	completeFlag(c, "s3-addressing", "auto", "path", "virtual")
	return c
}
