package s3

import (
	"context"
	"fmt"

	"github.com/minio/minio-go/v7"

	"lockstep/storage/blob"
)

var _ blob.BatchDeleter = (*Store)(nil)

// DeleteBatch deletes keys with S3's DeleteObjects, 1,000 keys a request
// (minio-go batches them); S3 answers a key with no object as deleted.
// Keys that fail are left out of deleted, and the first failure is the
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
	failed := map[string]bool{}
	var first error
	for e := range s.client.RemoveObjects(ctx, s.bucket, objects, minio.RemoveObjectsOptions{}) {
		failed[e.ObjectName] = true
		if first == nil {
			first = fmt.Errorf("deleting blob %q: %w", e.ObjectName[len(s.prefix):], mapError(ctx, e.Err))
		}
	}
	deleted := make([]string, 0, len(keys))
	for _, k := range keys {
		if !failed[s.prefix+k] {
			deleted = append(deleted, k)
		}
	}
	if first == nil {
		if err := ctx.Err(); err != nil {
			// Cancelled mid-way: what went is not known.
			return nil, fmt.Errorf("deleting %d blobs: %w", len(keys), err)
		}
	}
	return deleted, first
}
