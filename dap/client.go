package dap

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

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

// Task fetches a task's public parameters from the leader and validates
// them on the device (a task whose σ does not give its stated ρ is refused).
func (c *Client) Task(ctx context.Context, id string) (Task, error) {
	var t Task
	if err := c.Do(ctx, http.MethodGet, c.Leader, "/dap/v1/tasks/"+id, "", nil, &t); err != nil {
		return t, err
	}
	return t, t.Validate()
}

// Upload sends a report to the leader; out receives its receipt.
func (c *Client) Upload(ctx context.Context, r *Report, out any) error {
	return c.Do(ctx, http.MethodPut, c.Leader, "/dap/v1/tasks/"+r.TaskID+"/reports", c.Token, r, out)
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
