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
	if want := "cache is not ready: the first relist is not written to the cache yet\n"; code != 500 || body != want {
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
func connections(t *testing.T, d *Daemon, listener string) int {
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
		t.Cleanup(func() { c.Close() })
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
