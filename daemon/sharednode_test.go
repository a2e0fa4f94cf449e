// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plegkit/pleg"
	"github.com/plegkit/pleg/api"
	"github.com/plegkit/pleg/runtime/fakeruntime"
)

func onePod() *fakeruntime.Runtime {
	return fakeruntime.New(fakeruntime.Pod{UID: "u1", Name: "web", Namespace: "shop",
		Sandboxes:  []fakeruntime.Sandbox{{ID: "s1", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
		Containers: []fakeruntime.Container{{ID: "c1", Name: "nginx", State: runtimeapi.ContainerState_CONTAINER_RUNNING}},
	})
}

// The metrics listener, the one that faces the pod network, serves the
// probes and /metrics, and nothing of the pods.
func TestMetricsListenerServesNoPods(t *testing.T) {
	d, _ := runDaemon(t, Config{Runtime: onePod(), Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0",
		Generator: pleg.Options{RelistPeriod: 20 * time.Millisecond}})
	metrics := "http://" + d.MetricsAddr()
	eventually(t, "ready on the metrics listener", func() bool {
		code, _ := get(t, http.DefaultClient, metrics+"/readyz")
		return code == 200
	})
	for path, want := range map[string]int{"/healthz": 200, "/livez": 200, "/metrics": 200, "/v1/pods": 404, "/v1/pods/u1": 404, "/v1/events": 404} {
		if code, body := get(t, http.DefaultClient, metrics+path); code != want {
			t.Errorf("metrics listener %s: %d %q, want %d", path, code, body, want)
		}
	}
	if code, _ := get(t, http.DefaultClient, "http://"+d.Addr()+"/v1/pods"); code != 200 {
		t.Errorf("API listener /v1/pods: %d", code)
	}
}

// /healthz keeps the kubelet's meaning (the last relist's list
// succeeded); /readyz waits until that relist has written every pod.
func TestReadyzWaitsForTheFirstRelistToBeWritten(t *testing.T) {
	rt := onePod()
	rt.SetHang("c1", true) // the pod's inspection hangs: its status is not written
	d, _ := runDaemon(t, Config{Runtime: rt, Listen: "127.0.0.1:0",
		Generator: pleg.Options{RelistPeriod: 20 * time.Millisecond, InspectTimeout: time.Minute}})
	base := "http://" + d.Addr()
	eventually(t, "healthy", func() bool {
		code, _ := get(t, http.DefaultClient, base+"/healthz")
		return code == 200 && rt.ItemCalls("c1") > 0
	})
	code, body := get(t, http.DefaultClient, base+"/readyz")
	if want := "first-relist is not ready: the first relist has not ended yet: the runtime has not answered its lists, " +
		"or the pods it listed are being inspected and written to the cache\n"; code != 500 || body != want {
		t.Errorf("/readyz while the first relist is written: %d %q, want 500 %q", code, body, want)
	}
	if _, body := get(t, http.DefaultClient, base+"/v1/pods"); !strings.Contains(body, `"globalTimestamp": null`) {
		t.Errorf("/v1/pods while unready: %s", body)
	}
	if code, _ := get(t, http.DefaultClient, base+"/livez"); code != 200 {
		t.Errorf("/livez: %d", code)
	}
}

// A second daemon on the socket of a running one fails at New and leaves
// the first one serving; the socket is 0660 and in the group asked for.
func TestSecondDaemonOnALiveSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "api.sock")
	gid := strconv.Itoa(os.Getgid())
	first, _, base, stop := startDaemonCfg(t, Config{Runtime: onePod(), Listen: "unix://" + path, ListenGroup: gid})
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o660 || strconv.Itoa(int(fi.Sys().(*syscall.Stat_t).Gid)) != gid {
		t.Errorf("socket %v %v: want mode 0660, group %s", fi.Mode(), err, gid)
	}
	_, err = New(Config{Runtime: onePod(), Listen: "unix://" + path, Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "another process serves it") {
		t.Fatalf("a second daemon on a live socket: %v", err)
	}
	c := unixClient(path)
	if code, _ := get(t, c, base+"/livez"); code != 200 {
		t.Errorf("the first daemon after the second gave up: %d", code)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("socket left after %s stopped: %v", first.Addr(), err)
	}
}

func unixClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
}

// connections reads pleg_http_connections{listener}.
func connections(t testing.TB, d *Daemon, listener string) int {
	t.Helper()
	families, err := d.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "pleg_http_connections" {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, "listener") == listener {
				return int(m.GetGauge().GetValue())
			}
		}
	}
	return 0
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// Issue 11 measured 3,000 idle keep-alive connections that raised the
// daemon's RSS from 37 to 91 MB, none closed after 45 s. Now a listener
// holds at most MaxConnections (the others wait to be accepted), and an
// idle one is closed after IdleTimeout, which lets the waiting ones in.
func TestIdleConnectionsAreBounded(t *testing.T) {
	const limit, clients = 8, 24
	d, _ := runDaemon(t, Config{Runtime: onePod(), Listen: "127.0.0.1:0",
		Limits: Limits{MaxConnections: limit, IdleTimeout: 300 * time.Millisecond}})
	type result struct {
		status string
		err    error
	}
	results := make(chan result, clients)
	for range clients {
		c, err := net.Dial("tcp", d.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		// One request on a keep-alive connection, then nothing: the
		// connection stays open until the server closes it.
		if _, err := fmt.Fprintf(c, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		go func() {
			r := bufio.NewReader(c)
			status, err := r.ReadString('\n')
			if err == nil {
				_, err = io.Copy(io.Discard, r) // until the server closes it
			}
			results <- result{status, err}
		}()
	}
	most := 0
	for range clients {
		var res result
		for waiting := true; waiting; {
			select {
			case res = <-results:
				waiting = false
			case <-time.After(time.Millisecond):
			}
			most = max(most, connections(t, d, "api"))
		}
		if res.err != nil || res.status != "HTTP/1.1 200 OK\r\n" {
			t.Fatalf("a client got %q, %v; want 200, then the connection closed", res.status, res.err)
		}
	}
	if most > limit {
		t.Errorf("%d connections open at once, more than the limit of %d", most, limit)
	}
	eventually(t, "every connection closed", func() bool { return connections(t, d, "api") == 0 })
}

// A client whose sequence number comes from a run whose clock was ahead
// (the clock stepped back across a restart) resumes with a Gap.
func TestResumeAcrossAClockStepBack(t *testing.T) {
	d, _ := runDaemon(t, Config{Runtime: onePod(), Listen: "127.0.0.1:0", Generator: pleg.Options{RelistPeriod: 20 * time.Millisecond}})
	ahead := uint64(time.Now().Add(time.Hour).UnixMicro())
	resp, err := http.Get(fmt.Sprintf("http://%s/v1/events?since=%d", d.Addr(), ahead))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	var gap api.Event
	if err != nil || json.Unmarshal([]byte(line), &gap) != nil || resp.StatusCode != 200 || gap.Type != api.TypeGap || gap.From != ahead+1 {
		t.Errorf("resuming from an hour ahead: %d %q %v; want a Gap from %d", resp.StatusCode, line, err, ahead+1)
	}
}

// pki is a CA with a server certificate for 127.0.0.1 and a client
// certificate, in files.
type pki struct {
	dir                       string
	caFile, certFile, keyFile string
	clientCert                tls.Certificate
	pool                      *x509.CertPool
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir(), pool: x509.NewCertPool()}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pleg test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	p.pool.AddCert(ca)
	issue := func(serial int64, tmpl *x509.Certificate) ([]byte, []byte) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl.SerialNumber, tmpl.NotBefore, tmpl.NotAfter = big.NewInt(serial), time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, _ := x509.MarshalECPrivateKey(key)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	}
	write := func(name string, data []byte) string {
		path := filepath.Join(p.dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	p.caFile = write("ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	cert, key := issue(2, &x509.Certificate{Subject: pkix.Name{CommonName: "pleg"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature})
	p.certFile, p.keyFile = write("server.pem", cert), write("server-key.pem", key)
	cert, key = issue(3, &x509.Certificate{Subject: pkix.Name{CommonName: "prometheus"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature})
	if p.clientCert, err = tls.X509KeyPair(cert, key); err != nil {
		t.Fatal(err)
	}
	return p
}

// A bcrypt hash of "fakepassword" (the exporter toolkit's own example).
const fakePasswordHash = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi"

// The web config file gives every listener TLS, client certificates and
// basic auth, the Prometheus exporters' way.
func TestWebConfig(t *testing.T) {
	p := newPKI(t)
	config := filepath.Join(p.dir, "web.yml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`tls_server_config:
  cert_file: %s
  key_file: %s
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: %s
basic_auth_users:
  alice: %s
`, p.certFile, p.keyFile, p.caFile, fakePasswordHash)), 0o600); err != nil {
		t.Fatal(err)
	}
	d, _ := runDaemon(t, Config{Runtime: onePod(), Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", WebConfigFile: config})

	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.pool, Certificates: certs}}}
	}
	do := func(c *http.Client, url, user, pass string) (int, error) {
		req, _ := http.NewRequest("GET", url, nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	for _, addr := range []string{d.Addr(), d.MetricsAddr()} {
		url := "https://" + addr + "/livez"
		if code, err := do(http.DefaultClient, "http://"+addr+"/livez", "alice", "fakepassword"); err == nil && code == 200 {
			t.Errorf("%s: plain HTTP answered 200", addr)
		}
		if _, err := do(client(), url, "alice", "fakepassword"); err == nil {
			t.Errorf("%s: a client without a certificate was let in", addr)
		}
		if code, err := do(client(p.clientCert), url, "", ""); err != nil || code != 401 {
			t.Errorf("%s: without a password: %d %v, want 401", addr, code, err)
		}
		if code, err := do(client(p.clientCert), url, "alice", "wrong"); err != nil || code != 401 {
			t.Errorf("%s: with a wrong password: %d %v, want 401", addr, code, err)
		}
		if code, err := do(client(p.clientCert), url, "alice", "fakepassword"); err != nil || code != 200 {
			t.Errorf("%s: with a certificate and the password: %d %v, want 200", addr, code, err)
		}
	}
	if code, err := do(client(p.clientCert), "https://"+d.Addr()+"/v1/pods", "alice", "fakepassword"); err != nil || code != 200 {
		t.Errorf("/v1/pods over TLS: %d %v", code, err)
	}

	// A config that does not hold fails at New, before anything runs.
	bad := filepath.Join(p.dir, "bad.yml")
	if err := os.WriteFile(bad, []byte("tls_server_config:\n  cert_file: /nonexistent.pem\n  key_file: /nonexistent.pem\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Runtime: onePod(), Listen: "127.0.0.1:0", WebConfigFile: bad, Logger: slog.New(slog.DiscardHandler)}); err == nil {
		t.Error("New with a web config whose files are missing succeeded")
	}
}

// addrListener is a listener that only has an address.
type addrListener struct {
	net.Listener
	addr net.Addr
}

func (l addrListener) Addr() net.Addr { return l.addr }

// The warning at start is for a listener that faces the network.
func TestLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want bool
	}{
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.1")}, true},
		{&net.TCPAddr{IP: net.ParseIP("::1")}, true},
		{&net.UnixAddr{Name: "/run/pleg/pleg.sock", Net: "unix"}, true},
		{&net.TCPAddr{IP: net.IPv4zero}, false},
		{&net.TCPAddr{IP: net.ParseIP("10.244.0.7")}, false},
	} {
		if got := loopback(addrListener{addr: tc.addr}); got != tc.want {
			t.Errorf("loopback(%v) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

// kubeletProbeTimeout is the kubelet's default timeoutSeconds: a probe
// that takes longer fails.
const kubeletProbeTimeout = time.Second

// listenerUnderTest is one listener of a daemon, reached as a client
// reaches it.
type listenerUnderTest struct {
	name string // the listener label of pleg_http_connections
	dial func() (net.Conn, error)
	base string
}

func (l listenerUnderTest) probeClient() *http.Client {
	return &http.Client{
		Timeout: kubeletProbeTimeout,
		Transport: &http.Transport{
			DisableKeepAlives: true, // as the kubelet's probes
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return l.dial()
			},
		},
	}
}

// holdConnections opens n connections to l, as one misbehaving client
// would, in the three ways a connection can be held without a handler
// running: idle between requests (one request answered, then nothing),
// silent (nothing sent) and slow (a request header that never ends).
func holdConnections(t *testing.T, l listenerUnderTest, n int) {
	t.Helper()
	for i := range n {
		c, err := l.dial()
		if err != nil {
			t.Fatalf("%s: connection %d: %v", l.name, i, err)
		}
		t.Cleanup(func() { _ = c.Close() })
		switch i % 3 {
		case 0:
			// A keep-alive connection past its one request: the answer
			// is read in the background (the connection may wait in the
			// accept queue first), then nothing.
			if _, err := fmt.Fprintf(c, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			go func() {
				if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
		case 1:
			// Silent.
		case 2:
			if _, err := fmt.Fprintf(c, "GET /livez HTTP/1.1\r\nHost: x\r\nX-Slow: "); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Issue 22 found about 290 idle keep-alive connections to the metrics
// listener (its cap 256) made /livez time out, 2 probes of 3 unanswered
// within 3 s: any process on the node could have the kubelet restart
// pleg over and over. Now one client holds every slot of every listener,
// idle, silent or in a request header that never ends, with more
// connections waiting behind them, and the probes, from the same client
// address (the kubelet's share the node's), are answered within the
// kubelet's timeout.
func TestProbesAnswerWithEveryConnectionHeld(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "api.sock")
	d, _ := runDaemon(t, Config{Runtime: onePod(), Listen: "unix://" + sock, MetricsListen: "127.0.0.1:0",
		Generator: pleg.Options{RelistPeriod: 20 * time.Millisecond}})
	metricsAddr := d.MetricsAddr()
	listeners := []listenerUnderTest{
		{name: "api", base: "http://pleg", dial: func() (net.Conn, error) { return net.Dial("unix", sock) }},
		{name: "metrics", base: "http://" + metricsAddr, dial: func() (net.Conn, error) { return net.Dial("tcp", metricsAddr) }},
	}
	eventually(t, "ready", func() bool {
		code, _ := get(t, listeners[1].probeClient(), listeners[1].base+"/readyz")
		return code == http.StatusOK
	})

	const held = DefaultMaxConnections + 34 // as the finding: 290 against 256
	for _, l := range listeners {
		holdConnections(t, l, held)
	}
	for _, l := range listeners {
		eventually(t, "every slot of "+l.name+" held", func() bool { return connections(t, d, l.name) == DefaultMaxConnections })
	}

	for _, l := range listeners {
		client := l.probeClient()
		for _, path := range []string{"/livez", "/readyz", "/livez", "/readyz"} {
			start := time.Now()
			resp, err := client.Get(l.base + path)
			if err != nil {
				t.Errorf("%s %s with every connection held: %v (the kubelet's probe times out after %v)", l.name, path, err, kubeletProbeTimeout)
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(body) != "ok\n" {
				t.Errorf("%s %s with every connection held: %d %q", l.name, path, resp.StatusCode, body)
			}
			t.Logf("%s %s answered in %v with every connection held", l.name, path, time.Since(start).Round(time.Microsecond))
		}
		if n := connections(t, d, l.name); n > DefaultMaxConnections {
			t.Errorf("%s: %d connections open, more than the cap of %d", l.name, n, DefaultMaxConnections)
		}
		if n := counter(t, d, "pleg_http_connections_evicted_total", l.name); n == 0 {
			t.Errorf("%s: no connection evicted, yet the probes got in past a full listener", l.name)
		}
	}
}

// counter reads a counter of d's registry by its listener label.
func counter(t *testing.T, d *Daemon, name, listener string) float64 {
	t.Helper()
	families, err := d.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, "listener") == listener {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{listener=%q}", name, listener)
	return 0
}

// streamHolderEnv makes the test binary hold event streams on the socket
// it names instead of running tests: TestStreamsPerUserOnTheSocket runs
// it as another user.
const streamHolderEnv = "PLEG_TEST_HOLD_STREAMS"

func TestMain(m *testing.M) {
	if sock := os.Getenv(streamHolderEnv); sock != "" {
		os.Exit(holdStreams(sock))
	}
	os.Exit(m.Run())
}

// holdStreams opens event streams on the API socket sock until one is
// refused, says on stdout how many it holds and the refusal, and keeps
// them until stdin closes.
func holdStreams(sock string) int {
	c := unixClient(sock)
	for n := 0; ; n++ {
		resp, err := c.Get("http://pleg/v1/events")
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			fmt.Printf("held %d, then %d %s\n", n, resp.StatusCode, strings.Join(strings.Fields(string(body)), " "))
			break
		}
		defer resp.Body.Close()
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// Issue 22 found that every client of the unix socket shared one stream
// quota, so one local user could take all of it. Now the quota is per
// user, told by the socket's peer credentials: another user holding its
// whole quota leaves root's untouched.
func TestStreamsPerUserOnTheSocket(t *testing.T) {
	if os.Getuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("running a client as another user needs root, which CI has")
		}
		t.Skip("running a client as another user needs root (CI=true makes this a failure)")
	}
	const nobody = 65534
	dir := t.TempDir()
	// The other user must reach the socket and run the holder.
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(dir, "api.sock")
	const perClient = 2
	runDaemon(t, Config{Runtime: onePod(), Listen: "unix://" + sock, ListenGroup: strconv.Itoa(nobody),
		MaxStreamsPerClient: perClient, Generator: pleg.Options{RelistPeriod: 20 * time.Millisecond}})

	holder := filepath.Join(dir, "holder")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyFile(t, self, holder, 0o755)
	cmd := exec.Command(holder)
	cmd.Env = append(os.Environ(), streamHolderEnv+"="+sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	said, err := bufio.NewReader(stdout).ReadString('\n')
	if want := fmt.Sprintf("held %d, then 429", perClient); err != nil || !strings.HasPrefix(said, want) ||
		!strings.Contains(said, fmt.Sprintf("from uid %d", nobody)) {
		t.Fatalf("the other user: %q, %v; want %q and its uid named", said, err, want)
	}

	// Root's own quota is whole.
	root := unixClient(sock)
	for i := range perClient {
		resp, err := root.Get("http://pleg/v1/events")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			t.Fatalf("root's stream %d while the other user holds its quota: %d %s", i+1, resp.StatusCode, body)
		}
	}
	if code, body := get(t, root, "http://pleg/v1/events"); code != http.StatusTooManyRequests || !strings.Contains(body, "from uid 0") {
		t.Errorf("root's stream past its quota: %d %s, want 429 naming uid 0", code, body)
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, mode); err != nil {
		t.Fatal(err)
	}
}
