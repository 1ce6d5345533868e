package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// Client talks to a node's REST API with its API key. The CLI is one.
type Client struct {
	BaseURL string
	APIKey  string
	HTTP    *http.Client
}

// NewClient returns a Client for the daemon of home answering at
// baseURL. An https baseURL is trusted only if it shows exactly the
// console certificate kept in home (CertFile): the certificate is pinned,
// no other authority is trusted.
func NewClient(home, baseURL, apiKey string) (*Client, error) {
	c := &Client{BaseURL: baseURL, APIKey: apiKey}
	if !strings.HasPrefix(baseURL, "https://") {
		return c, nil
	}
	cert, err := readCert(home)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = pinnedTLS(cert)
	c.HTTP = &http.Client{Timeout: 5 * time.Minute, Transport: tr}
	return c, nil
}

// Unbounded returns a copy of c without the overall time limit, for a
// request that runs as long as the work it starts (a check reading a
// whole store): the caller's context bounds it instead.
func (c *Client) Unbounded() *Client {
	u := *c
	hc := http.Client{}
	if c.HTTP != nil {
		hc = *c.HTTP
	}
	hc.Timeout = 0
	u.HTTP = &hc
	return &u
}

// ErrUnreachable means nothing answered at the client's address: the daemon
// is not running (a stale serve.json is left behind by a crash).
var ErrUnreachable = errors.New("the lockstep daemon is not running")

// APIError is an error response from the API.
type APIError struct {
	Code    int
	Message string
	Kind    string // Error.Kind: KindVerification or ""
}

func (e *APIError) Error() string { return e.Message }

// Do sends a request with an optional JSON body and decodes a JSON answer
// into out (unless out is nil).
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("X-API-Key", c.APIKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Minute}
	}
	resp, err := hc.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("%w (nothing answers at %s)", ErrUnreachable, c.BaseURL)
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e Error
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = fmt.Sprintf("%s %s: %s", method, path, resp.Status)
		}
		return &APIError{Code: resp.StatusCode, Message: e.Error, Kind: e.Kind}
	}
	if out == nil {
		_, err := io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decoding answer of %s %s: %w", method, path, err)
	}
	return nil
}
