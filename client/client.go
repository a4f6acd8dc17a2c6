// Package client is the reference client of `privrec serve`: the HTTP
// calls (enrol, submit, status, releases), the device side of local-DP
// collection — the user's ratings are randomized here, with the same ldp
// code as `privrec collect`, before anything leaves the device — and her
// own recommendations, computed here from the public release and her own
// ratings. It depends on no server or storage package, so it can be
// compiled for a browser (GOOS=js GOARCH=wasm).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/privrec/privrec/service/api"
)

// Client talks to one server. Token is the user's secret (or, for the
// admin calls, the admin token).
type Client struct {
	Server string
	Token  string
	HTTP   *http.Client
}

// New returns a client for the server at base URL (e.g.
// http://127.0.0.1:8080).
func New(server, token string) *Client {
	return &Client{Server: strings.TrimRight(server, "/"), Token: token, HTTP: &http.Client{Timeout: 5 * time.Minute}}
}

// do sends a JSON request and decodes a JSON answer; a non-2xx answer is
// returned as *api.Error.
func (c *Client) do(ctx context.Context, method, path string, body, out any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("client: encoding the request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Server+path, rd)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return resp, fmt.Errorf("client: %s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := &api.Error{}
		if json.Unmarshal(b, e) != nil || e.Message == "" {
			e = &api.Error{Message: strings.TrimSpace(string(b))}
		}
		e.Status = resp.StatusCode
		return resp, e
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp, fmt.Errorf("client: %s %s: decoding the answer: %w", method, path, err)
		}
	}
	return resp, nil
}

// Config fetches the collection configuration.
func (c *Client) Config(ctx context.Context) (*api.Config, error) {
	var cfg api.Config
	if _, err := c.do(ctx, http.MethodGet, api.PathConfig, nil, &cfg); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// Enroll enrols a new user and sets the client's token to hers.
func (c *Client) Enroll(ctx context.Context) (api.Enrolment, error) {
	var e api.Enrolment
	if _, err := c.do(ctx, http.MethodPost, api.PathEnroll, nil, &e); err != nil {
		return e, err
	}
	c.Token = e.Token
	return e, nil
}

// RotateToken replaces the user's token with a new one, which the client
// takes; the old one stops working.
func (c *Client) RotateToken(ctx context.Context) (api.Enrolment, error) {
	var e api.Enrolment
	if _, err := c.do(ctx, http.MethodPost, api.PathMyToken, nil, &e); err != nil {
		return e, err
	}
	c.Token = e.Token
	return e, nil
}

// Submit sends one report. replayed is true when the server had stored a
// report with this ID and content before (the acknowledgement is the
// original; nothing was charged now).
func (c *Client) Submit(ctx context.Context, rep api.Report) (ack api.Ack, replayed bool, err error) {
	ack, replayed, _, err = c.submit(ctx, rep)
	return ack, replayed, err
}

// submit is Submit, also returning the server's Retry-After (0: none).
func (c *Client) submit(ctx context.Context, rep api.Report) (ack api.Ack, replayed bool, retryAfter time.Duration, err error) {
	resp, err := c.do(ctx, http.MethodPost, api.PathReports, rep, &ack)
	if resp != nil {
		replayed = resp.Header.Get(api.HeaderReplayed) == "true"
		if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
			retryAfter = time.Duration(s) * time.Second
		}
	}
	return ack, replayed, retryAfter, err
}

// SubmitRetry is Submit retried, with the same report ID and content,
// after a network failure or a 5xx/429 answer (up to attempts tries,
// backing off from 100 ms, waiting at least the server's Retry-After, at
// most 30 s). A report is never stored or charged twice, so this settles
// every ambiguous outcome: a report whose transaction committed although
// its answer was lost or was an error comes back as the original
// acknowledgement, replayed; one that did not commit is stored now.
func (c *Client) SubmitRetry(ctx context.Context, rep api.Report, attempts int) (api.Ack, bool, error) {
	wait := 100 * time.Millisecond
	var lastErr error
	for k := range max(attempts, 1) {
		ack, replayed, ra, err := c.submit(ctx, rep)
		if err == nil || !Retryable(err) {
			return ack, replayed, err
		}
		lastErr = err
		if k+1 < attempts {
			select {
			case <-time.After(min(max(wait, ra), 30*time.Second)):
			case <-ctx.Done():
				return ack, false, errors.Join(lastErr, ctx.Err())
			}
			wait = min(2*wait, 5*time.Second)
		}
	}
	return api.Ack{}, false, lastErr
}

// Retryable reports whether a call may succeed if repeated: a network
// failure, 429 or 5xx.
func Retryable(err error) bool {
	var e *api.Error
	if errors.As(err, &e) {
		return e.Status == http.StatusTooManyRequests || e.Status >= 500
	}
	return err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// Status fetches the caller's own ledger.
func (c *Client) Status(ctx context.Context) (api.Status, error) {
	var s api.Status
	_, err := c.do(ctx, http.MethodGet, api.PathMe, nil, &s)
	return s, err
}

// Reports lists the caller's own stored reports.
func (c *Client) Reports(ctx context.Context) ([]api.StoredReport, error) {
	var all []api.StoredReport
	cursor := ""
	for {
		page, err := c.ReportsPage(ctx, api.MaxPageLimit, cursor)
		if err != nil {
			return all, err
		}
		all = append(all, page.Reports...)
		if page.NextCursor == "" {
			return all, nil
		}
		cursor = page.NextCursor
	}
}

// ReportsPage fetches one page of the caller's reports: up to limit (0:
// the server's default) after cursor ("" for the first page).
func (c *Client) ReportsPage(ctx context.Context, limit int, cursor string) (api.ReportPage, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	path := api.PathReports
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var page api.ReportPage
	_, err := c.do(ctx, http.MethodGet, path, nil, &page)
	return page, err
}

// DeleteMe deletes the caller's reports and states and revokes her token
// (the client cannot be used afterwards); her ledger stays (see
// api.Retained).
func (c *Client) DeleteMe(ctx context.Context) (api.Deletion, error) {
	var d api.Deletion
	_, err := c.do(ctx, http.MethodDelete, api.PathMe, nil, &d)
	return d, err
}

// Export fetches everything the server stores about the caller.
func (c *Client) Export(ctx context.Context) (api.Export, error) {
	var e api.Export
	_, err := c.do(ctx, http.MethodGet, api.PathMyExport, nil, &e)
	return e, err
}

// Report fetches one of the caller's own stored reports.
func (c *Client) Report(ctx context.Context, id string) (api.StoredReport, error) {
	var r api.StoredReport
	_, err := c.do(ctx, http.MethodGet, api.PathReports+"/"+id, nil, &r)
	return r, err
}

// LatestRelease fetches the public part of the latest release.
func (c *Client) LatestRelease(ctx context.Context) (*api.Release, error) {
	var r api.Release
	if _, err := c.do(ctx, http.MethodGet, api.PathLatestRelease, nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Publish asks the server to train and publish a release (admin token).
func (c *Client) Publish(ctx context.Context, req api.ReleaseRequest) (api.ReleaseResult, error) {
	var r api.ReleaseResult
	_, err := c.do(ctx, http.MethodPost, api.PathAdminReleases, req, &r)
	return r, err
}

// Stats fetches the store's counts (admin token).
func (c *Client) Stats(ctx context.Context) (api.Stats, error) {
	var s api.Stats
	_, err := c.do(ctx, http.MethodGet, api.PathAdminStats, nil, &s)
	return s, err
}
