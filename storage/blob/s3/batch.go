package s3

import (
	"context"
	"fmt"
	"strings"

	"github.com/minio/minio-go/v7"

	"lockstep/storage/blob"
)

var _ blob.BatchDeleter = (*Store)(nil)

// DeleteBatch deletes keys with S3's DeleteObjects, 1,000 keys a request
// (minio-go batches them); S3 answers a key with no object as deleted.
// deleted holds only the keys the server confirmed; any other is an
// error.
func (s *Store) DeleteBatch(ctx context.Context, keys []string) ([]string, error) {
	for _, k := range keys {
		err := blob.ValidKey(k)
		if err == nil {
			err = s.checkLen(k)
		}
		if err != nil {
			return nil, fmt.Errorf("deleting blob %q: %w", k, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("deleting %d blobs: %w", len(keys), err)
	}
	objects := make(chan minio.ObjectInfo, len(keys))
	for _, k := range keys {
		objects <- minio.ObjectInfo{Key: s.prefix + k}
	}
	close(objects)
	// Only what the server confirms counts as deleted: an answer that
	// does not parse (a connection cut mid-body) names no key, and then
	// none may be taken for gone.
	confirmed := map[string]bool{}
	var first error
	for r := range s.client.RemoveObjectsWithResult(ctx, s.bucket, objects, minio.RemoveObjectsOptions{}) {
		switch {
		case r.Err == nil && strings.HasPrefix(r.ObjectName, s.prefix):
			confirmed[r.ObjectName] = true
		case r.Err == nil:
		case first == nil && r.ObjectName == "":
			first = fmt.Errorf("deleting %d blobs: %w", len(keys), mapError(ctx, r.Err))
		case first == nil:
			first = fmt.Errorf("deleting blob %q: %w", strings.TrimPrefix(r.ObjectName, s.prefix), mapError(ctx, r.Err))
		}
	}
	deleted := make([]string, 0, len(keys))
	for _, k := range keys {
		if confirmed[s.prefix+k] {
			deleted = append(deleted, k)
		}
	}
	if first == nil && len(deleted) < len(keys) {
		if err := ctx.Err(); err != nil {
			first = fmt.Errorf("deleting %d blobs: %w", len(keys), err)
		} else {
			first = fmt.Errorf("deleting %d blobs: the server confirmed %d", len(keys), len(deleted))
		}
	}
	return deleted, first
}
