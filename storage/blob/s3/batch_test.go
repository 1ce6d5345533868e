package s3

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDeleteBatchBadAnswer: a DeleteObjects answer that does not parse (a
// connection cut mid-body) reports no key deleted and never panics, with
// a prefix or without.
func TestDeleteBatchBadAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.WriteHeader(200)
			_, _ = w.Write([]byte("<DeleteResult><Deleted><Key>x")) // cut short
			return
		}
		w.Header().Set("Content-Type", "application/xml")
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix></Prefix><KeyCount>0</KeyCount><MaxKeys>1</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>`))
	}))
	defer srv.Close()
	for _, prefix := range []string{"", "pre"} {
		s, err := New(context.Background(), Config{Endpoint: strings.TrimPrefix(srv.URL, "http://"), Bucket: "bkt", Prefix: prefix, AccessKey: "a", SecretKey: "b", Region: "us-east-1", Addressing: AddressPath})
		if err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("prefix %q: panic: %v", prefix, p)
				}
			}()
			del, err := s.DeleteBatch(context.Background(), []string{"r/a/c/1", "r/a/c/2"})
			if err == nil || len(del) > 0 {
				t.Errorf("prefix %q: deleted %v, error %v; want none deleted and an error", prefix, del, err)
			}
		}()
	}
}
