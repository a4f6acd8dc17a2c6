package loadgen

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/service/api"
)

// submitter sends one client's reports and checks each acknowledgement.
type submitter interface {
	submit(ctx context.Context, rep api.Report) error
	close()
}

// viaClient submits with the reference client (net/http): HTTPS servers.
type viaClient struct{ c *client.Client }

func (v viaClient) submit(ctx context.Context, rep api.Report) error {
	ack, _, err := v.c.Submit(ctx, rep)
	if err == nil && (ack.ID != rep.ID || !ack.Accepted) {
		err = fmt.Errorf("loadgen: acknowledgement %+v does not match report %s", ack, rep.ID)
	}
	return err
}

func (viaClient) close() {}

// wire submits over one keep-alive HTTP/1.1 connection of its own. The
// generator shares the machine's cores with the server it measures, so
// CPU it spends is CPU the server does not get: net/http's client runs
// two goroutines per connection and hands every request between them,
// and encodes the report by reflection. wire writes each request in one
// write, encodes the body with the canonical value encoding the server
// itself uses, and parses the answer with net/http's own ReadResponse
// (no hand-written HTTP parsing); the acknowledgement is decoded and
// checked as the reference client would. It is used for plain-HTTP
// servers; HTTPS goes through the reference client.
type wire struct {
	addr, host, auth string
	conn             net.Conn
	r                *bufio.Reader
	buf, body        []byte
}

// newSubmitter picks wire for an http:// server, else the client.
func newSubmitter(server string, c *client.Client) submitter {
	u, err := url.Parse(server)
	if err != nil || u.Scheme != "http" || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return viaClient{c}
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	return &wire{addr: addr, host: u.Host, auth: "Bearer " + c.Token}
}

func (w *wire) close() {
	if w.conn != nil {
		w.conn.Close()
		w.conn = nil
	}
}

// plainID: the ID needs no JSON escaping (the generator's IDs never do).
func plainID(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

func (w *wire) submit(ctx context.Context, rep api.Report) error {
	if !plainID(rep.ID) {
		return fmt.Errorf("loadgen: report ID %q needs escaping", rep.ID)
	}
	w.body = append(w.body[:0], `{"id":"`...)
	w.body = append(w.body, rep.ID...)
	w.body = append(w.body, `","epsilon":`...)
	w.body = strconv.AppendFloat(w.body, rep.Epsilon, 'g', -1, 64)
	w.body = append(w.body, `,"values":`...)
	w.body = append(w.body, api.EncodeValues(rep.Values)...)
	if rep.Mean != nil {
		w.body = append(w.body, `,"mean":`...)
		w.body = strconv.AppendFloat(w.body, *rep.Mean, 'g', -1, 64)
	}
	w.body = append(w.body, '}')
	w.buf = append(w.buf[:0], "POST "+api.PathReports+" HTTP/1.1\r\nHost: "...)
	w.buf = append(w.buf, w.host...)
	w.buf = append(w.buf, "\r\nAuthorization: "...)
	w.buf = append(w.buf, w.auth...)
	w.buf = append(w.buf, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	w.buf = strconv.AppendInt(w.buf, int64(len(w.body)), 10)
	w.buf = append(w.buf, "\r\n\r\n"...)
	w.buf = append(w.buf, w.body...)
	ack, err := w.roundTrip(ctx)
	if err != nil {
		w.close() // a fresh connection for the next report
		return err
	}
	if ack.ID != rep.ID || !ack.Accepted {
		return fmt.Errorf("loadgen: acknowledgement %+v does not match report %s", ack, rep.ID)
	}
	return nil
}

func (w *wire) roundTrip(ctx context.Context) (api.Ack, error) {
	var ack api.Ack
	if w.conn == nil {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", w.addr)
		if err != nil {
			return ack, fmt.Errorf("loadgen: connecting to %s: %w", w.addr, err)
		}
		w.conn, w.r = c, bufio.NewReaderSize(c, 4096)
	}
	if err := w.conn.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		return ack, err
	}
	if _, err := w.conn.Write(w.buf); err != nil {
		return ack, fmt.Errorf("loadgen: sending a report: %w", err)
	}
	resp, err := http.ReadResponse(w.r, nil)
	if err != nil {
		return ack, fmt.Errorf("loadgen: reading the answer: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		return ack, fmt.Errorf("loadgen: reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return ack, &api.Error{Status: resp.StatusCode, Message: string(b)}
	}
	if resp.Close {
		w.close()
	}
	if err := json.Unmarshal(b, &ack); err != nil {
		return ack, fmt.Errorf("loadgen: the acknowledgement: %w", err)
	}
	return ack, nil
}
