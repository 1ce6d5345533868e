package receiver

import (
	"bytes"
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"lockstep/crypt"
	"lockstep/storage/blob/mem"
	"lockstep/sync/protocol"
	"lockstep/test/testutil"
)

// filled returns a receiver holding count records sealed by the device
// src, stored through a real connection, and src.
func filled(t *testing.T, count int, readers ...crypt.DeviceID) (*node, *trusted) {
	t.Helper()
	src := newTrusted()
	n := newNode(t, mem.New(), append(readers, src.id)...)
	connectTrusted(t, n, src)
	if err := src.conn.ClusterConfig(context.Background(), clusterConfig(n, src, 0, 0)); err != nil {
		t.Fatal(err)
	}
	shared := src.addChunk(64)
	for i := 1; i <= count; i++ {
		src.send(t, record(src, uint64(i), byte(i), shared, src.addChunk(10+i)))
	}
	testutil.Eventually(t, waitTimeout, "records stored", func() bool { return src.lastAck() == int64(count) })
	return n, src
}

// checkLog checks that got are the receiver's records from sequence from.
func checkLog(t *testing.T, n *node, got []*protocol.SealedRecord, from int64) {
	t.Helper()
	want := n.records(t)[from-1:]
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.GetSequence() != w.Seq || !bytes.Equal(g.GetOrigin(), w.Origin) || g.GetCounter() != w.Counter ||
			!bytes.Equal(g.GetFileKey(), w.FileKey) || !bytes.Equal(g.GetSealed(), w.Sealed) ||
			!bytes.Equal(bytes.Join(g.GetChunks(), nil), w.Chunks) || g.GetStoredNs() != w.StoredAt.UnixNano() || g.GetStoredNs() == 0 {
			t.Fatalf("record %d = %v, want %+v", i, g, w)
		}
	}
}

func TestLogSenderCursor(t *testing.T) {
	reader := newTrusted()
	n, _ := filled(t, 6, reader.id)
	logID := n.logID(t)
	cases := []struct {
		name  string
		id    uint64
		seq   int64
		first int64
	}{
		{"our log from 3", logID, 3, 4},
		{"our log, all seen", logID, 6, 7},
		{"our log from 0", logID, 0, 1},
		{"foreign log ID", logID + 1, 3, 1},
		{"beyond the end", logID, 7, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rd := newTrusted()
			rd.id = reader.id
			connectTrusted(t, n, rd)
			if err := rd.conn.ClusterConfig(context.Background(), clusterConfig(n, rd, c.id, c.seq)); err != nil {
				t.Fatal(err)
			}
			if c.first > 6 {
				// Nothing to send: a new append is the first thing that
				// comes. A pause in which nothing may arrive.
				time.Sleep(50 * time.Millisecond)
				if got := rd.received(); len(got) != 0 {
					t.Fatalf("sent %d records to an up-to-date peer", len(got))
				}
				return
			}
			testutil.Eventually(t, waitTimeout, "the log", func() bool { return len(rd.received()) >= int(7-c.first) })
			checkLog(t, n, rd.received(), c.first)
		})
	}
}

func TestLogSenderFollowsAppends(t *testing.T) {
	ctx := context.Background()
	reader := newTrusted()
	n, src := filled(t, 2, reader.id)
	connectTrusted(t, n, reader)
	if err := reader.conn.ClusterConfig(ctx, clusterConfig(n, reader, n.logID(t), 0)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "the log", func() bool { return len(reader.received()) == 2 })
	for i := 3; i <= 5; i++ {
		src.send(t, record(src, uint64(i), 9, src.addChunk(5)))
		testutil.Eventually(t, waitTimeout, "the new record", func() bool { return len(reader.received()) == i })
	}
	checkLog(t, n, reader.received(), 1)

	// A new ClusterConfig restarts the sender at its cursor.
	if err := reader.conn.ClusterConfig(ctx, clusterConfig(n, reader, n.logID(t), 3)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "the log again", func() bool { return len(reader.received()) == 7 })
	checkLog(t, n, reader.received()[5:], 4)
}

func TestLogSenderWindow(t *testing.T) {
	ctx := context.Background()
	reader := newTrusted()
	reader.autoAck = false
	n, _ := filled(t, 10, reader.id)
	n.r.batchBytes.Store(1) // one record per message
	connectTrusted(t, n, reader)
	if err := reader.conn.ClusterConfig(ctx, clusterConfig(n, reader, 0, 0)); err != nil {
		t.Fatal(err)
	}
	settled := func(want int) {
		t.Helper()
		testutil.Eventually(t, waitTimeout, "messages", func() bool { return reader.messages() >= want })
		time.Sleep(100 * time.Millisecond) // room for a message beyond the window, which must not come
		if got := reader.messages(); got != want {
			t.Fatalf("%d messages unacknowledged, want %d", got, want)
		}
	}
	settled(sendWindow)
	// Acking the 2nd message frees two slots; an old ack frees none.
	ack := func(seq int64) {
		if err := reader.conn.SealedAck(ctx, &protocol.SealedAck{Folder: folderID, Sequence: seq}); err != nil {
			t.Fatal(err)
		}
	}
	ack(2)
	settled(sendWindow + 2)
	ack(1)
	settled(sendWindow + 2)
	ack(10)
	settled(10)
	checkLog(t, n, reader.received(), 1)
}

func TestLogSenderBatches(t *testing.T) {
	reader := newTrusted()
	n, _ := filled(t, 9, reader.id)
	n.r.batchBytes.Store(400) // a few records per message
	connectTrusted(t, n, reader)
	if err := reader.conn.ClusterConfig(context.Background(), clusterConfig(n, reader, 0, 0)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "the log", func() bool { return len(reader.received()) == 9 })
	reader.mu.Lock()
	msgs := reader.msgs
	reader.mu.Unlock()
	if len(msgs) < 3 {
		t.Fatalf("%d messages for 9 records of ~150 bytes in 400-byte batches", len(msgs))
	}
	for _, m := range msgs {
		size := 0
		for _, r := range m.GetRecords() {
			size += protoSize(r)
		}
		if len(m.GetRecords()) > 1 && size > 400 {
			t.Fatalf("message of %d records, %d bytes", len(m.GetRecords()), size)
		}
	}
	checkLog(t, n, reader.received(), 1)
}

func protoSize(r *protocol.SealedRecord) int { return proto.Size(r) + 8 }
