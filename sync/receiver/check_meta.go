package receiver

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"

	"lockstep/storage/blob"
	"lockstep/sync/check"
)

// The parts of Check that look at single objects, the envelope and the
// meta object, and at the temporary files writes left.

// envelope checks an object under envelope/ against the database's
// envelope.
func (c *storeCheck) envelope(info blob.Info, name string) {
	gen, err := strconv.ParseInt(name, 16, 64)
	switch {
	case err != nil || len(name) != 16 || gen <= 0:
		c.add(check.Problem{Kind: check.Damaged, Object: info.Key,
			Detail: "not an envelope's name (16 hex digits of a generation): a rebuild would refuse the store"})
	case info.Key != envelopeKey(c.f.fk, gen):
		c.orphan(info, fmt.Sprintf("an envelope of generation %d under a name this receiver does not write", gen))
	case gen < c.envGen:
		c.orphan(info, fmt.Sprintf("a superseded envelope of generation %d (the database holds %d); it opens with an old password", gen, c.envGen))
	case gen != c.envGen && c.env == nil:
		c.orphan(info, fmt.Sprintf("an envelope of generation %d the database lacks (it holds none): a rebuild would take it", gen))
	case gen != c.envGen:
		c.orphan(info, fmt.Sprintf("an envelope of generation %d the database lacks (it holds %d): a rebuild would take it", gen, c.envGen))
	case info.Size != int64(len(c.env)):
		c.envDone = true
		c.add(check.Problem{Kind: check.Damaged, Object: info.Key,
			Detail: fmt.Sprintf("envelope of size %d, database says %d", info.Size, len(c.env))})
	default:
		c.envDone = true
		data, err := getLimited(c.ctx, c.r.store, info.Key, int64(len(c.env)))
		if err != nil {
			_ = c.unreadable(info.Key, err)
			return
		}
		c.rep.BytesRead += int64(len(data))
		if !bytes.Equal(data, c.env) {
			c.add(check.Problem{Kind: check.Damaged, Object: info.Key,
				Detail: "envelope differs from the one the database holds"})
		}
	}
}

// meta checks the meta object: it parses, names the folder's log and
// agrees with the database (metaAgrees).
func (c *storeCheck) meta(info blob.Info) error {
	data, err := getLimited(c.ctx, c.r.store, info.Key, maxMetaSize)
	if errors.Is(err, ErrCorrupt) {
		c.add(check.Problem{Kind: check.Damaged, Object: info.Key, Detail: err.Error()})
		return nil
	}
	if err != nil {
		return c.unreadable(info.Key, err)
	}
	c.rep.BytesRead += int64(len(data))
	m, err := parseMeta(c.f.fk, data, c.r.storeKey)
	switch {
	case err != nil:
		c.add(check.Problem{Kind: check.Damaged, Object: info.Key, Detail: err.Error()})
	case m.LogID != c.f.logID:
		c.add(check.Problem{Kind: check.Damaged, Object: info.Key,
			Detail: fmt.Sprintf("meta names log ID %x, the database's is %x", m.LogID, c.f.logID)})
	default:
		return c.metaAgrees(info.Key, m)
	}
	return nil
}

// metaAgrees checks that the meta object would rebuild the folder's
// retention policy and high-water marks: the same policy (SetRetention
// writes both under the append lock), and marks no lower than the
// database's (a prune raises the meta's first). Devices and label are
// not compared: a configuration reload rewrites them outside the lock.
func (c *storeCheck) metaAgrees(key string, m *meta) error {
	p, err := c.r.db.ReceiverRetention(c.ctx, c.f.id)
	if err != nil {
		return err
	}
	if Policy(p) != m.policy() {
		c.add(check.Problem{Kind: check.Damaged, Object: key,
			Detail: fmt.Sprintf("meta holds retention %+v, the database %+v: a rebuild would restore the meta's", m.policy(), Policy(p))})
	}
	hw, err := c.r.db.ReceiverHighWater(c.ctx, c.f.id)
	if err != nil {
		return err
	}
	mhw := m.highWater()
	lower := 0
	if mhw.Sequence < hw.Sequence {
		lower++
	}
	marks := make(map[string]uint64, len(mhw.Counters))
	for _, o := range mhw.Counters {
		marks[string(o.Origin)] = o.Counter
	}
	for _, o := range hw.Counters {
		if marks[string(o.Origin)] < o.Counter {
			lower++
		}
	}
	if lower > 0 {
		c.add(check.Problem{Kind: check.Damaged, Object: key,
			Detail: fmt.Sprintf("%d of the meta's high-water marks are below the database's (log sequence %d, database %d): a rebuild would lower them",
				lower, mhw.Sequence, hw.Sequence)})
	}
	return nil
}

// temps reports the temporary files crashed writes left in the folder's
// part of the store, if the store can list them.
func (c *storeCheck) temps() error {
	tl, ok := tempListerOf(c.r.store)
	if !ok {
		return nil
	}
	err := tl.Temps(c.ctx, c.prefix, func(info blob.Info) error {
		c.looked()
		if info.ModTime.Before(c.cutoff) {
			c.add(check.Problem{Kind: check.Leftover, Object: info.Key,
				Detail: fmt.Sprintf("temporary file of %d bytes a write left, last written %s", info.Size, info.ModTime.UTC().Format(time.RFC3339))})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing temporary files: %w", err)
	}
	return nil
}
