package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/api"
)

func newWatchCommand(g *global) *cobra.Command {
	var (
		server string
		filter api.Filter
		output string
	)
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print pod lifecycle events as they happen",
		Long: `Watch prints pod lifecycle events as a table (TIME TYPE NAMESPACE/POD
CONTAINER), or with -o json the objects of GET /v1/events, one a line.

Without --server it runs a generator itself against --runtime-endpoint; with
--server it follows a pleg daemon (http://host:port or unix:///path),
resuming after the last event it printed if the connection drops.`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			return errors.Join(oneOf("output", output, "table", "json"), filter.Validate())
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			p := &eventPrinter{w: g.stdout, json: output == "json", loc: time.Local}
			var err error
			if server != "" {
				err = follow(ctx, server, filter, p, g)
			} else {
				err = g.watchInProcess(ctx, filter, p)
			}
			if ctx.Err() != nil {
				return nil // Ctrl-C
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&server, "server", "", "follow a pleg daemon at this URL instead of watching the runtime")
	f.StringArrayVar(&filter.Pods, "pod", nil, "only events of this pod (UID or name); repeatable")
	f.StringArrayVar(&filter.Namespaces, "namespace", nil, "only events of pods in this namespace; repeatable")
	f.StringArrayVar(&filter.Types, "type", nil, "only events of this type; repeatable")
	f.StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

// watchInProcess runs a generator and prints what it delivers.
func (g *global) watchInProcess(ctx context.Context, filter api.Filter, p *eventPrinter) error {
	rt, err := g.runtime(2 * time.Minute)
	if err != nil {
		return err
	}
	defer rt.Close()
	gen, err := pleg.New(rt, g.generatorOptions())
	if err != nil {
		return err
	}
	sub := gen.Subscribe()
	defer sub.Close()
	gen.Start()
	defer gen.Stop()
	for seq := uint64(1); ; {
		ev, err := sub.Next(ctx)
		if err != nil {
			return err
		}
		e := api.NewEvent(seq, ev)
		seq++
		if filter.Match(&e) {
			if err := p.print(e); err != nil {
				return err
			}
		}
	}
}

// follow prints the events of the daemon at server, reconnecting after the
// last event printed until ctx ends.
func follow(ctx context.Context, server string, filter api.Filter, p *eventPrinter, g *global) error {
	client, base, err := httpClient(server)
	if err != nil {
		return err
	}
	var last uint64
	backoff := 100 * time.Millisecond
	for {
		n, err := followOnce(ctx, client, base, filter, last, p)
		if n > last {
			last, backoff = n, 100*time.Millisecond
		}
		var fatal *httpError
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &fatal) && fatal.code/100 == 4:
			return err
		}
		g.log.Warn("Event stream ended; reconnecting", "server", server, "err", err, "after", last)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return fmt.Sprintf("server answered %d: %s", e.code, e.msg) }

// followOnce reads one stream, starting after since (0: from now), and
// returns the sequence number of the last event it read.
func followOnce(ctx context.Context, client *http.Client, base string, filter api.Filter, since uint64, p *eventPrinter) (uint64, error) {
	q := filter.Query()
	if since > 0 {
		q.Set("since", strconv.FormatUint(since, 10))
	}
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/events?"+q.Encode(), nil)
	if err != nil {
		return since, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return since, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var e api.Error
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return since, &httpError{resp.StatusCode, e.Error}
		}
		return since, &httpError{resp.StatusCode, strings.TrimSpace(string(body))}
	}
	r := bufio.NewReader(resp.Body)
	last := since
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return last, err
		}
		if len(strings.TrimSpace(string(line))) == 0 {
			continue // keep-alive
		}
		var ev api.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return last, fmt.Errorf("bad event line %q: %w", line, err)
		}
		last = ev.Seq
		if err := p.print(ev); err != nil {
			return last, err
		}
	}
}

// httpClient returns a client and base URL for a server given as
// http(s)://host:port or unix:///path.
func httpClient(server string) (*http.Client, string, error) {
	if path, ok := strings.CutPrefix(server, "unix://"); ok {
		if !strings.HasPrefix(path, "/") {
			return nil, "", fmt.Errorf("--server %q: want unix:///absolute/path", server)
		}
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}}
		return &http.Client{Transport: tr}, "http://pleg", nil
	}
	if !strings.HasPrefix(server, "http://") && !strings.HasPrefix(server, "https://") {
		server = "http://" + server
	}
	return &http.Client{}, strings.TrimSuffix(server, "/"), nil
}
