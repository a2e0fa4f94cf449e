// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"golang.org/x/sync/singleflight"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/doctor"
	"github.com/plegkit/pleg/doctor/bundle"
	"github.com/plegkit/pleg/doctor/render"
	"github.com/plegkit/pleg/flightrec"
	"github.com/plegkit/pleg/runtime"
)

// Defaults of Diagnosis.
const (
	// DefaultDiagnosisBudget bounds the daemon's own diagnosis: with a
	// hung runtime it ends at the first call's timeout.
	DefaultDiagnosisBudget = 30 * time.Second
	// DefaultDiagnosisCallTimeout is each of its CRI calls' deadline.
	DefaultDiagnosisCallTimeout = 5 * time.Second
	// DefaultDiagnosisReuse is how long a diagnosis answers again: clients
	// that ask together, or one that asks for the JSON and then the page,
	// make the runtime answer once.
	DefaultDiagnosisReuse = 10 * time.Second
)

// Diagnosis configures what the daemon serves of its own diagnosis:
// /v1/doctor (doctor's report of the node, made in the daemon) and
// /v1/bundle (the support bundle) on the API, and, with Listen, on a
// listener of their own with /v1/recordings and nothing else, for the
// API server's pod proxy to reach when the runtime is hung.
type Diagnosis struct {
	// Listen, if set, serves /v1/doctor, /v1/bundle and /v1/recordings
	// alone: host:port or unix:///path.
	Listen string
	// Budget and CallTimeout bound a diagnosis and each of its calls.
	Budget      time.Duration
	CallTimeout time.Duration
	// Reuse is how long a diagnosis is served again; default 10 s.
	Reuse time.Duration
	// Node names the node in a bundle; default the host's name.
	Node string
}

// criClienter is a runtime that gives its CRI client (the CRI adapter,
// and --runtime-endpoint auto once it found one): doctor asks it.
type criClienter interface {
	Client() runtimeapi.RuntimeServiceClient
}

// doctorService makes the daemon's diagnoses and bundles, one at a time
// each, a diagnosis shared by the requests that come while it is made
// and for diagnosisReuse after.
type doctorService struct {
	rt       runtime.Runtime
	gen      *pleg.Generator
	reg      prometheus.Gatherer
	recs     *flightrec.Store
	opts     doctor.Options
	node     string
	log      *slog.Logger
	clock    clock.PassiveClock
	reuse    time.Duration
	group    singleflight.Group
	bundles  chan struct{}
	mu       sync.Mutex
	last     *report
	lastTime time.Time
}

var _ api.Doctor = (*doctorService)(nil)

func newDoctorService(cfg Config, gen *pleg.Generator, reg prometheus.Gatherer, rec *flightrec.Recorder,
) *doctorService {
	dc := cfg.Diagnosis
	if dc.Budget == 0 {
		dc.Budget = DefaultDiagnosisBudget
	}
	if dc.CallTimeout == 0 {
		dc.CallTimeout = DefaultDiagnosisCallTimeout
	}
	if dc.Reuse == 0 {
		dc.Reuse = DefaultDiagnosisReuse
	}
	node := dc.Node
	if node == "" && cfg.Kube != nil {
		node = cfg.Kube.NodeName
	}
	if node == "" {
		node, _ = os.Hostname()
	}
	s := &doctorService{
		rt: cfg.Runtime, gen: gen, reg: reg, node: node, log: cfg.Logger, clock: clock.RealClock{},
		bundles: make(chan struct{}, 1), reuse: dc.Reuse,
		opts: doctor.Options{
			Budget: dc.Budget, CallTimeout: dc.CallTimeout,
			RelistPeriod: cfg.Generator.RelistPeriod, RelistThreshold: cfg.Generator.RelistThreshold,
			PlegConcurrency: cfg.Generator.InspectConcurrency, PlegInspectTimeout: cfg.Generator.InspectTimeout,
		},
	}
	if rec != nil {
		s.recs = rec.Store()
	}
	return s
}

// report is a diagnosis as the API serves it.
type report struct{ r *doctor.Report }

func (r report) WriteJSON(w io.Writer) error { return render.JSON(w, r.r) }
func (r report) WriteHTML(w io.Writer) error { return render.HTML(w, r.r) }

// Budget implements api.Doctor.
func (s *doctorService) Budget() time.Duration { return s.opts.Budget }

// Diagnose implements api.Doctor.
func (s *doctorService) Diagnose(ctx context.Context) (api.Diagnosis, error) {
	r, err := s.report(ctx)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (s *doctorService) report(ctx context.Context) (*report, error) {
	s.mu.Lock()
	if s.last != nil && s.clock.Since(s.lastTime) < s.reuse {
		r := s.last
		s.mu.Unlock()
		return r, nil
	}
	s.mu.Unlock()
	// One diagnosis at a time, whoever asks; made apart from the asking
	// request, so that a client that goes away does not cut it short for
	// those who wait on it, and bounded by twice its budget.
	ch := s.group.DoChan("doctor", func() (any, error) {
		dctx, cancel := context.WithTimeout(context.Background(), 2*s.opts.Budget)
		defer cancel()
		r, err := s.diagnose(dctx)
		if err == nil {
			s.mu.Lock()
			s.last, s.lastTime = r, s.clock.Now()
			s.mu.Unlock()
		}
		return r, err
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(*report), nil
	}
}

// client is the runtime's CRI client, or an error saying why there is
// none.
func (s *doctorService) client() (runtimeapi.RuntimeServiceClient, error) {
	cc, ok := s.rt.(criClienter)
	if !ok {
		return nil, errors.New("the daemon's runtime is not a CRI endpoint (a simulated runtime in process?)")
	}
	c := cc.Client()
	if c == nil {
		return nil, errors.New("no runtime found yet at any of --runtime-endpoint auto's sockets")
	}
	return c, nil
}

func (s *doctorService) diagnose(ctx context.Context) (*report, error) {
	c, err := s.client()
	if err != nil {
		return nil, err
	}
	healthy, herr := s.gen.Healthy()
	health := "ok"
	if herr != nil {
		health = "PLEG is not healthy: " + herr.Error()
	}
	opts := s.opts
	if e, ok := s.rt.(endpointer); ok {
		opts.Endpoint = e.Endpoint()
	}
	opts.DaemonView = doctor.DaemonOf("this daemon, in process", healthy, health, s.reg, s.clock)
	r, err := doctor.Diagnose(ctx, c, opts)
	if err != nil {
		return nil, err
	}
	s.addRecording(r)
	return &report{r: r}, nil
}

// addRecording adds the newest flight recording's findings.
func (s *doctorService) addRecording(r *doctor.Report) {
	if s.recs == nil {
		return
	}
	list, err := s.recs.List()
	if err != nil || len(list) == 0 {
		return
	}
	rec, err := s.recs.Read(list[len(list)-1].Name)
	if err != nil {
		s.log.Warn("The newest flight recording was not read for the diagnosis", "err", err)
		return
	}
	doctor.AddRecording(r, rec, s.clock.Now())
}

// Bundle implements api.Doctor: the bundle as the daemon's pod sees the
// node (the host's logs and configuration only where the pod mounts them).
func (s *doctorService) Bundle(ctx context.Context, w io.Writer) error {
	select {
	case s.bundles <- struct{}{}:
		defer func() { <-s.bundles }()
	default:
		return api.ErrBusy
	}
	cfg := bundle.Config{Node: s.node, Extra: s.daemonFiles(), CallTimeout: s.opts.CallTimeout}
	if r, err := s.report(ctx); err != nil {
		cfg.ReportError = err.Error()
	} else {
		cfg.Report = r.r
	}
	if s.recs != nil {
		cfg.Recordings = s.recs
	}
	if c, err := s.client(); err == nil {
		cfg.CRI = c
	}
	if e, ok := s.rt.(endpointer); ok {
		cfg.Endpoint = e.Endpoint()
	}
	_, err := bundle.Write(ctx, w, cfg)
	return err
}

// daemonFiles are the daemon's own health and metrics, for a bundle.
func (s *doctorService) daemonFiles() []bundle.File {
	var health bytes.Buffer
	if ok, err := s.gen.Healthy(); ok {
		health.WriteString("ok\n")
	} else {
		fmt.Fprintf(&health, "PLEG is not healthy: %v\n", err)
	}
	health.WriteString(s.gen.Status().String() + "\n")
	files := []bundle.File{{Name: "pleg/healthz.txt", Data: health.Bytes()}}
	mfs, err := s.reg.Gather()
	if err != nil {
		return files
	}
	var m bytes.Buffer
	enc := expfmt.NewEncoder(&m, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return files
		}
	}
	return append(files, bundle.File{Name: "pleg/metrics.txt", Data: m.Bytes()})
}
