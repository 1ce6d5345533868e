package deps

import (
	_ "filippo.io/age"
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/labstack/echo/v4"
	_ "github.com/mattn/go-sqlite3"
	_ "github.com/minio/minio-go/v7"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/restic/chunker"
	_ "github.com/skip2/go-qrcode"
	_ "github.com/spf13/cobra"
	_ "github.com/zeebo/blake3"
	_ "go.uber.org/goleak"
	_ "golang.org/x/crypto/bcrypt"
	_ "golang.org/x/crypto/chacha20poly1305"
	_ "golang.org/x/crypto/hkdf"
	_ "golang.org/x/sync/errgroup"
	_ "golang.org/x/sys/unix"
	_ "google.golang.org/protobuf/proto"
)
