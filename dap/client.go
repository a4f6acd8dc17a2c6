package dap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cloudflare/circl/kem"
)

// Client is a device's connection to the two aggregators: it reads tasks
// and the leader's and helper's HPKE keys, and uploads reports (to the
// leader only; the helper's share travels sealed to the helper's key).
type Client struct {
	Leader, Helper string // base URLs
	Token          string // the user's bearer token at the leader
	HTTP           *http.Client
	// Consent is what the user agreed to beyond the default (a
	// split-noise task is refused without Consent.SplitNoise).
	Consent Consent
	// Retries is how many times Upload sends a report again after a
	// network error, a 429, 502, 503 or 504 (0: 4; negative: none). The
	// leader acknowledges the same report again without charging twice,
	// so a retry after a lost acknowledgement is safe.
	Retries int
	// Backoff is the wait before the first retry, doubled for each next
	// one unless the answer's Retry-After says longer (0: 500 ms).
	Backoff time.Duration
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// Do sends one JSON request to base+path and decodes the answer into out.
func (c *Client) Do(ctx context.Context, method, base, path, token string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("dap: encoding %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(base, "/")+path, body)
	if err != nil {
		return fmt.Errorf("dap: %s %s: %w", method, path, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return fmt.Errorf("dap: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&e)
		return &HTTPError{Status: resp.StatusCode, Method: method, Path: path, Message: e.Error}
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("dap: %s %s: response: %w", method, path, err)
	}
	return nil
}

// HTTPError is an aggregator's refusal.
type HTTPError struct {
	Status       int
	Method, Path string
	Message      string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("dap: %s %s: HTTP %d: %s", e.Method, e.Path, e.Status, e.Message)
}

// PublicKey fetches an aggregator's HPKE public key.
func (c *Client) PublicKey(ctx context.Context, base string) (kem.PublicKey, error) {
	b, err := c.publicKeyBytes(ctx, base)
	if err != nil {
		return nil, err
	}
	return UnmarshalPublicKey(b)
}

// publicKeyBytes fetches an aggregator's published HPKE key.
func (c *Client) publicKeyBytes(ctx context.Context, base string) ([]byte, error) {
	var cfg struct {
		PublicKey []byte `json:"public_key"`
	}
	if err := c.Do(ctx, http.MethodGet, base, "/dap/v1/hpke_config", "", nil, &cfg); err != nil {
		return nil, err
	}
	return cfg.PublicKey, nil
}

// Task fetches a task's public parameters from the leader and checks
// them on the device (Derive: a task whose range, norm_sq, sensitivity or
// σ falls short of its plan is refused, naming both values).
func (c *Client) Task(ctx context.Context, id string) (Task, error) {
	var t Task
	if err := c.Do(ctx, http.MethodGet, c.Leader, "/dap/v1/tasks/"+id, "", nil, &t); err != nil {
		return t, err
	}
	_, err := Derive(t)
	return t, err
}

// Upload sends a report to the leader in the binary encoding
// (ReportMediaType), retrying as Retries says; out receives its receipt.
func (c *Client) Upload(ctx context.Context, r *Report, out any) error {
	body, err := EncodeReport(r)
	if err != nil {
		return err
	}
	path := "/dap/v1/tasks/" + r.TaskID + "/reports"
	retries, wait := c.Retries, c.Backoff
	if retries == 0 {
		retries = 4
	}
	if wait <= 0 {
		wait = 500 * time.Millisecond
	}
	for attempt := 0; ; attempt++ {
		again, err := c.send(ctx, http.MethodPut, strings.TrimRight(c.Leader, "/")+path, path, c.Token, ReportMediaType, body, out)
		if err == nil || again < 0 || attempt >= retries {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(max(wait, again)):
		}
		wait *= 2
	}
}

// send makes one request; again ≥ 0 means the failure is worth a retry
// after that long (the Retry-After), < 0 that it is final.
func (c *Client) send(ctx context.Context, method, url, path, token, ctype string, body []byte, out any) (again time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return -1, fmt.Errorf("dap: %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", ctype)
	resp, err := c.http().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return -1, fmt.Errorf("dap: %s %s: %w", method, path, err)
		}
		return 0, fmt.Errorf("dap: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&e)
		herr := &HTTPError{Status: resp.StatusCode, Method: method, Path: path, Message: e.Error}
		switch resp.StatusCode {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			s, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			return time.Duration(min(max(s, 0), 60)) * time.Second, herr
		}
		return -1, herr
	}
	if out == nil {
		return 0, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return -1, fmt.Errorf("dap: %s %s: response: %w", method, path, err)
	}
	return 0, nil
}

// Contribute is a device's whole part in one task, from her own ratings
// (item IDs and values): fetch the task and derive its privacy parameters
// from its public plan (Consent.Check: a task whose stated values fall
// short is refused), rebuild its contribution, quantize, shard and seal
// to both aggregators' keys, charge her own ledger what she derived
// (before anything is sent: save, when not nil, must persist it) and
// upload once to the leader. out receives the leader's receipt. The
// report is returned for its size, with what the device derived.
func (c *Client) Contribute(ctx context.Context, taskID string, ids []string, vals []float64, ledger *Ledger, save func() error, out any) (*Report, Derived, error) {
	t, err := c.Task(ctx, taskID)
	if err != nil {
		return nil, Derived{}, err
	}
	lk, err := c.publicKeyBytes(ctx, c.Leader)
	if err != nil {
		return nil, Derived{}, err
	}
	hk, err := c.publicKeyBytes(ctx, c.Helper)
	if err != nil {
		return nil, Derived{}, err
	}
	r, d, err := c.Consent.Prepare(t, lk, hk, ids, vals)
	if err != nil {
		return nil, Derived{}, err
	}
	if err := ledger.Charge(d); err != nil {
		return nil, Derived{}, err
	}
	if save != nil {
		if err := save(); err != nil {
			return nil, Derived{}, err
		}
	}
	return r, d, c.Upload(ctx, r, out)
}
