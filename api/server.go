package api

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/podcache"
)

// Defaults of Options.
const (
	DefaultMaxStreams   = 64
	DefaultWriteTimeout = 10 * time.Second
	DefaultKeepAlive    = 15 * time.Second
)

// Cache is what the API reads of the pod cache.
type Cache interface {
	GetAll() map[string]podcache.Entry
	GetEntry(uid string) (podcache.Entry, bool)
	GlobalTime() time.Time
}

// Options configure a Server.
type Options struct {
	Checks []pleg.HealthCheck
	// Mode, if set, tells how the generator learns of changes: a short
	// word for the X-Pleg-Mode header (generic, evented) and a line for
	// /healthz?verbose.
	Mode func() (word, line string)
	// Details, if set, are more lines for /healthz?verbose, after the
	// mode's: what the runtime can do, say.
	Details func() []string
	Cache   Cache
	Journal *Journal
	// Gatherer serves /metrics; nil serves none.
	Gatherer prometheus.Gatherer
	// Profiling serves Go's profiles under /debug/pprof/.
	Profiling bool
	// MaxStreams caps concurrent /v1/events streams; default 64.
	MaxStreams int
	// WriteTimeout cuts a stream whose client does not take a write
	// within it; default 10 s.
	WriteTimeout time.Duration
	// KeepAlive is how often an idle stream writes something, so that
	// proxies keep it and dead clients are found; default 15 s. An NDJSON
	// stream writes an empty line, an SSE stream a comment.
	KeepAlive time.Duration
	Logger    *slog.Logger
}

// Server serves the API.
type Server struct {
	opts    Options
	mux     *http.ServeMux
	streams chan struct{} // a token per open stream
	closing chan struct{}
	once    sync.Once
}

// NewServer returns the API over opts.
func NewServer(opts Options) *Server {
	if opts.MaxStreams == 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.KeepAlive == 0 {
		opts.KeepAlive = DefaultKeepAlive
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{
		opts:    opts,
		mux:     http.NewServeMux(),
		streams: make(chan struct{}, opts.MaxStreams),
		closing: make(chan struct{}),
	}
	s.mux.HandleFunc("GET /healthz", s.healthz)
	if opts.Gatherer != nil {
		s.mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{}))
	}
	if opts.Profiling {
		s.mux.HandleFunc("/debug/pprof/", pprof.Index)
		s.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		s.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		s.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		s.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	s.mux.HandleFunc("GET /v1/pods", s.pods)
	s.mux.HandleFunc("GET /v1/pods/{uid}", s.pod)
	s.mux.HandleFunc("GET /v1/events", s.events)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such path: %s %s (try /healthz, /metrics, /v1/pods, /v1/pods/{uid}, /v1/events)", r.Method, r.URL.Path)
	})
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close ends every event stream cleanly; http.Server.Shutdown waits for
// handlers but does not end them, so call Close first (or register it
// with RegisterOnShutdown).
func (s *Server) Close() { s.once.Do(func() { close(s.closing) }) }

// Unhealthy returns the failures of the health checks, worded as the
// kubelet words them.
func (s *Server) Unhealthy() []string {
	var errs []string
	for _, c := range s.opts.Checks {
		if ok, err := c.Healthy(); !ok {
			errs = append(errs, fmt.Sprintf("%s is not healthy: %v", c.Name, err))
		}
	}
	return errs
}

// healthz answers as the kubelet's health checks read: "ok", or the
// failures. With ?verbose it lists every check and the mode in force.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	verbose := false
	for key := range r.URL.Query() {
		if key != "verbose" {
			writeError(w, http.StatusBadRequest, "unknown query parameter %q (want verbose)", key)
			return
		}
		verbose = true
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	var word, line string
	if s.opts.Mode != nil {
		word, line = s.opts.Mode()
		w.Header().Set("X-Pleg-Mode", word)
	}
	errs := s.Unhealthy()
	if len(errs) > 0 {
		w.WriteHeader(http.StatusInternalServerError)
	}
	if !verbose {
		if len(errs) > 0 {
			fmt.Fprintln(w, strings.Join(errs, "; "))
		} else {
			fmt.Fprintln(w, "ok")
		}
		return
	}
	for _, c := range s.opts.Checks {
		if ok, err := c.Healthy(); ok {
			fmt.Fprintf(w, "[+]%s ok\n", c.Name)
		} else {
			fmt.Fprintf(w, "[-]%s failed: %v\n", c.Name, err)
		}
	}
	if line != "" {
		fmt.Fprintln(w, line)
	}
	if s.opts.Details != nil {
		for _, l := range s.opts.Details() {
			fmt.Fprintln(w, l)
		}
	}
	if len(errs) > 0 {
		fmt.Fprintln(w, "healthz check failed")
	} else {
		fmt.Fprintln(w, "healthz check passed")
	}
}

func (s *Server) pods(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = WritePodList(w, s.opts.Cache.GetAll(), s.opts.Cache.GlobalTime())
}

func (s *Server) pod(w http.ResponseWriter, r *http.Request) {
	if !noQuery(w, r) {
		return
	}
	uid := r.PathValue("uid")
	e, ok := s.opts.Cache.GetEntry(uid)
	if !ok {
		writeError(w, http.StatusNotFound, "no pod %q in the cache", uid)
		return
	}
	writeJSON(w, http.StatusOK, NewPod(uid, e))
}

// noQuery refuses a query string on paths that take none: a typo in a
// filter must not silently return everything.
func noQuery(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.RawQuery != "" {
		writeError(w, http.StatusBadRequest, "%s takes no query parameters, got %q", r.URL.Path, r.URL.RawQuery)
		return false
	}
	return true
}

// Filter selects events: an event passes when it matches one of the
// values of every field that has values. A gap always passes: a client
// must know it missed something.
type Filter struct {
	// Pods are pod UIDs or names.
	Pods       []string
	Namespaces []string
	Types      []string
}

// Match reports whether ev passes the filter.
func (f Filter) Match(ev *Event) bool {
	if ev.Type == TypeGap {
		return true
	}
	return (len(f.Pods) == 0 || slices.Contains(f.Pods, ev.PodUID) || slices.Contains(f.Pods, ev.PodName)) &&
		(len(f.Namespaces) == 0 || slices.Contains(f.Namespaces, ev.PodNamespace)) &&
		(len(f.Types) == 0 || slices.Contains(f.Types, ev.Type))
}

// Query is the filter as /v1/events query parameters.
func (f Filter) Query() url.Values {
	q := url.Values{}
	for _, p := range f.Pods {
		q.Add("pod", p)
	}
	for _, n := range f.Namespaces {
		q.Add("namespace", n)
	}
	for _, t := range f.Types {
		q.Add("type", t)
	}
	return q
}

// Validate checks the filter's values.
func (f Filter) Validate() error {
	for _, t := range f.Types {
		if !slices.Contains(EventTypes(), t) {
			return fmt.Errorf("unknown event type %q (want one of %s)", t, strings.Join(EventTypes(), ", "))
		}
	}
	for _, v := range slices.Concat(f.Pods, f.Namespaces) {
		if v == "" {
			return errors.New("empty pod or namespace filter")
		}
	}
	return nil
}

// eventQuery is a parsed /v1/events query.
type eventQuery struct {
	Filter
	since    uint64
	hasSince bool
	sse      bool
}

// EventTypes are the types a client may filter on.
func EventTypes() []string {
	return []string{string(pleg.ContainerStarted), string(pleg.ContainerDied), string(pleg.ContainerRemoved),
		string(pleg.PodSync), string(pleg.ConditionMet), TypeGap}
}

func parseEventQuery(r *http.Request, last uint64) (eventQuery, error) {
	q := eventQuery{sse: strings.Contains(r.Header.Get("Accept"), "text/event-stream")}
	values := r.URL.Query()
	for key, vals := range values {
		switch key {
		case "pod":
			q.Pods = append(q.Pods, vals...)
		case "namespace":
			q.Namespaces = append(q.Namespaces, vals...)
		case "type":
			q.Types = append(q.Types, vals...)
		case "since":
			if len(vals) != 1 {
				return q, errors.New("since given more than once")
			}
		default:
			return q, fmt.Errorf("unknown query parameter %q (want pod, namespace, type or since)", key)
		}
	}
	if err := q.Validate(); err != nil {
		return q, err
	}
	since := values.Get("since")
	if since == "" {
		since = r.Header.Get("Last-Event-ID")
	}
	if since != "" {
		n, err := strconv.ParseUint(since, 10, 64)
		if err != nil {
			return q, fmt.Errorf("since %q is not a sequence number", since)
		}
		if n > last {
			return q, fmt.Errorf("since %d is ahead of the latest event, %d", n, last)
		}
		q.since, q.hasSince = n, true
	}
	return q, nil
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	j := s.opts.Journal
	q, err := parseEventQuery(r, j.Last())
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		writeError(w, http.StatusTooManyRequests, "%d event streams are open, the most this server serves", s.opts.MaxStreams)
		return
	}

	cursor := j.Last() // by default, from now on
	if q.hasSince {
		cursor = q.since
	}
	rc := http.NewResponseController(w)
	if q.sse {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/x-ndjson")
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	flush := func() error {
		_ = rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
		if err := bw.Flush(); err != nil {
			return err
		}
		return rc.Flush()
	}
	if err := flush(); err != nil {
		return
	}
	keepAlive := time.NewTicker(s.opts.KeepAlive)
	defer keepAlive.Stop()
	for {
		events, gap, grew := j.Read(cursor, 256)
		if gap != nil {
			gap.Time = time.Now().UTC()
			if err := writeEvent(bw, gap, q.sse); err != nil {
				return
			}
			cursor = gap.To
		}
		for i := range events {
			cursor = events[i].Seq
			if q.Match(&events[i]) {
				if err := writeEvent(bw, &events[i], q.sse); err != nil {
					return
				}
			}
		}
		if gap != nil || len(events) > 0 {
			if err := flush(); err != nil {
				s.opts.Logger.Debug("Event stream client gone or too slow", "remote", r.RemoteAddr, "err", err)
				return
			}
			continue
		}
		select {
		case <-grew:
		case <-keepAlive.C:
			if q.sse {
				_, _ = bw.WriteString(": keep-alive\n\n")
			} else {
				_, _ = bw.WriteString("\n")
			}
			if err := flush(); err != nil {
				return
			}
		case <-r.Context().Done():
			return
		case <-s.closing:
			return
		}
	}
}

func writeEvent(w *bufio.Writer, ev *Event, sse bool) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if sse {
		// No "event:" field: the type is in the data, and unnamed events
		// reach an EventSource's onmessage.
		fmt.Fprintf(w, "id: %d\ndata: %s\n\n", ev.Seq, data)
		return nil
	}
	data = append(data, '\n')
	_, err = w.Write(data)
	return err
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// Error is the body of every error answer.
type Error struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, Error{Error: fmt.Sprintf(format, args...)})
}
