package web

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/check"
	"lockstep/test/testutil"
)

// TestCheckREST: a check runs through POST (one per folder at a time),
// shows its progress with a rate and time left while it runs, and its
// result after; a failed check is the folder's error; schedules are
// checked and kept.
func TestCheckREST(t *testing.T) {
	database, err := db.Open(filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { database.Close() })
	ctx := context.Background()
	if err := database.PutFolder(ctx, db.Folder{ID: "docs", Path: t.TempDir(), Type: db.SendReceive}); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	step := make(chan int64)
	svc := check.NewService(func(ctx context.Context, folder string, o check.RunOptions, progress func(check.Progress)) ([]check.Report, error) {
		for {
			select {
			case b := <-step:
				progress(check.Progress{Phase: "data", Bytes: b, BytesTotal: 1000})
			case <-release:
				r := check.Report{Folder: folder, Mode: o.ReadData.String(), Problems: []check.Problem{}}
				r.Add(check.Problem{Kind: check.Missing, Path: "a.txt", Version: "ab-3", Detail: "gone"})
				return []check.Report{r}, nil
			}
		}
	}, database, slog.New(slog.DiscardHandler))
	var id crypt.DeviceID
	s, err := New(ctx, "127.0.0.1:0", Config{ID: id, DB: database, Conns: fakeConns{}, Engine: fakeEngine{}, Checks: svc, APIKey: testKey, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srvURL := serveTest(t, s).URL
	base := srvURL + "/rest/folders/docs/check"

	done := make(chan string)
	go func() {
		code, body := call(t, http.MethodPost, base, CheckRequest{ReadData: "all"})
		if code != http.StatusOK {
			body = "status " + http.StatusText(code) + ": " + body
		}
		done <- body
	}()
	step <- 100
	if code, body := call(t, http.MethodPost, base, CheckRequest{}); code != http.StatusConflict {
		t.Fatalf("a second check while one runs: %d %s", code, body)
	}
	state := func() CheckState {
		code, body := call(t, http.MethodGet, base, nil)
		var st CheckState
		if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
			t.Fatalf("GET check: %d %s", code, body)
		}
		return st
	}
	state() // the first look, at 100 bytes
	step <- 600
	// A rate shows once the check has been watched a second.
	testutil.Eventually(t, 5*time.Second, "a rate and time left", func() bool {
		st := state()
		return st.Running != nil && st.Running.Bytes == 600 && st.BytesPerSecond > 0 && st.SecondsLeft > 0
	})
	close(release)
	var res CheckResult
	if body := <-done; json.Unmarshal([]byte(body), &res) != nil || res.Clean || res.Reports[0].Problems[0].Path != "a.txt" {
		t.Fatalf("POST check answered %s", body)
	}
	st := state()
	if st.Running != nil || st.Last == nil || st.Last.Clean || st.Last.Summary != "1 missing" || st.Overdue {
		t.Fatalf("state after the check: %+v", st)
	}
	code, body := call(t, http.MethodGet, strings.TrimSuffix(base, "/folders/docs/check")+"/status", nil)
	var status Status
	if code != http.StatusOK || json.Unmarshal([]byte(body), &status) != nil || len(status.Folders) != 1 {
		t.Fatalf("status: %d %s", code, body)
	}
	if f := status.Folders[0]; !strings.Contains(f.Error, "check found problems: 1 missing") || f.Check == nil || f.Check.Last == nil || f.Check.Last.Reports != nil {
		t.Fatalf("folder status after a failed check: error %q, check %+v (want it without the reports)", f.Error, f.Check)
	}
	if st := state(); len(st.Last.Reports) != 1 {
		t.Fatalf("GET check has %d reports, want the one", len(st.Last.Reports))
	}
	// The folder's page lists each problem, from the reports the status
	// leaves out.
	c := setUp(t, srvURL)
	resp, err := c.Get(srvURL + "/folders/docs")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `class="check-problems"`) || !strings.Contains(string(page), "a.txt") || !strings.Contains(string(page), "ab-3") {
		t.Fatalf("the folder page does not list the check's problem:\n%s", page)
	}

	for _, bad := range []CheckSchedule{{Every: "soon"}, {Every: "30s"}, {Every: "7d", ReadData: "200%"}} {
		if code, body := call(t, http.MethodPut, base+"/schedule", bad); code != http.StatusBadRequest {
			t.Errorf("schedule %+v: %d %s, want 400", bad, code, body)
		}
	}
	if code, body := call(t, http.MethodPut, base+"/schedule", CheckSchedule{Every: "7d", ReadData: "5%"}); code != http.StatusNoContent {
		t.Fatalf("schedule: %d %s", code, body)
	}
	if st := state(); st.Every != "7d" || st.ReadData != "5%" || !st.Overdue {
		t.Fatalf("state with a schedule and no clean check: %+v", st)
	}
	if code, _ := call(t, http.MethodPost, strings.Replace(base, "docs", "nope", 1), CheckRequest{}); code != http.StatusNotFound {
		t.Errorf("check of an unknown folder: %d", code)
	}
	if code, _ := call(t, http.MethodPost, base, CheckRequest{ReadData: "lots"}); code != http.StatusBadRequest {
		t.Errorf("a bad read-data: %d", code)
	}
}

// TestCheckFailedShown: a check that could not run answers with its error,
// and the folder's check state says so until one runs.
func TestCheckFailedShown(t *testing.T) {
	database, err := db.Open(filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { database.Close() })
	ctx := context.Background()
	if err := database.PutFolder(ctx, db.Folder{ID: "docs", Path: t.TempDir(), Type: db.SendReceive}); err != nil {
		t.Fatal(err)
	}
	svc := check.NewService(func(context.Context, string, check.RunOptions, func(check.Progress)) ([]check.Report, error) {
		return nil, errors.New("no receiver connected")
	}, database, slog.New(slog.DiscardHandler))
	s, err := New(ctx, "127.0.0.1:0", Config{DB: database, Conns: fakeConns{}, Engine: fakeEngine{}, Checks: svc, APIKey: testKey, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	base := serveTest(t, s).URL + "/rest/folders/docs/check"
	if code, body := call(t, http.MethodPost, base, CheckRequest{}); code == http.StatusOK || !strings.Contains(body, "no receiver connected") {
		t.Fatalf("a check that cannot run: %d %s", code, body)
	}
	code, body := call(t, http.MethodGet, base, nil)
	var st CheckState
	if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil || st.Failed == nil || st.Failed.Err != "no receiver connected" || st.Last != nil {
		t.Fatalf("check state after a check that could not run: %d %s", code, body)
	}
}
