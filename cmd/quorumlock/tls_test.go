package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/redisproc"
)

// tlsFiles writes a throwaway CA, a server certificate for 127.0.0.1 and a
// client certificate (ECDSA P-256, PEM) into dir.
func tlsFiles(t *testing.T, dir string) (ca, srvCert, srvKey, cliCert, cliKey string) {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	writeKey := func(name string, k *ecdsa.PrivateKey) string {
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return write(name, "EC PRIVATE KEY", der)
	}
	now := time.Now()
	caKey := newKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "quorumlock test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(serial int64, usage x509.ExtKeyUsage, k *ecdsa.PrivateKey) []byte {
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "quorumlock test"},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	sk, ck := newKey(), newKey()
	return write("ca.pem", "CERTIFICATE", caDER),
		write("server.pem", "CERTIFICATE", leaf(2, x509.ExtKeyUsageServerAuth, sk)), writeKey("server-key.pem", sk),
		write("client.pem", "CERTIFICATE", leaf(3, x509.ExtKeyUsageClientAuth, ck)), writeKey("client-key.pem", ck)
}

// TestCommandsOverTLS: run, status and doctor on three masters that take
// TLS only and require a client certificate, through rediss:// URLs with
// ca_file, cert_file and key_file, and an ACL user's password.
func TestCommandsOverTLS(t *testing.T) {
	redisproc.Require(t)
	ca, srvCert, srvKey, cliCert, cliKey := tlsFiles(t, t.TempDir())
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(caPEM)
	cli, err := tls.LoadX509KeyPair(cliCert, cliKey)
	if err != nil {
		t.Fatal(err)
	}
	ready := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cli}, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	q := url.Values{"ca_file": {ca}, "cert_file": {cliCert}, "key_file": {cliKey}}
	var urls []string
	for range 3 {
		srv := redisproc.StartT(t, redisproc.Config{TLS: ready, Args: []string{
			"--tls-cert-file", srvCert, "--tls-key-file", srvKey, "--tls-ca-cert-file", ca, "--tls-auth-clients", "yes"}})
		a := admin(t, &redis.Options{Addr: srv.Addr(), TLSConfig: ready})
		for _, cmd := range [][]any{{"ACL", "SETUSER", "operator", "on", ">Tls-pw-5", "~*", "+@all"}, {"ACL", "SETUSER", "default", "off"}} {
			if err := a.Do(t.Context(), cmd...).Err(); err != nil {
				t.Fatal(err)
			}
		}
		urls = append(urls, "rediss://operator:Tls-pw-5@"+srv.Addr()+"?"+q.Encode())
		t.Cleanup(func() {
			if t.Failed() { // the server's side of a failure
				b, _ := os.ReadFile(filepath.Join(srv.Dir(), "redis.log"))
				t.Logf("%s (pid %d, running %v) log:\n%s", srv.Addr(), srv.PID(), srv.Running(), b)
			}
		})
	}
	t.Setenv(envNodes, strings.Join(urls, ","))
	t.Setenv(envNodesFile, "")
	c := libClient(t, "tls", urls)
	m, err := c.NewMutex("jobs:tls")
	if err != nil {
		t.Fatal(err)
	}
	// --wait: a TLS handshake on a busy machine can outlast the lock's
	// 250ms dial timeout; run then retries.
	code, out, stderr := runMain(t, "run", "--wait", "20s", "jobs:tls", "--", "true")
	if code != 0 {
		t.Fatalf("run over TLS: exit %d\n%s%s", code, out, stderr)
	}
	lease, err := m.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	unlockAtEnd(t, lease)
	waitOnAll(t, urls, "jobs:tls", 1)
	code, out, stderr = runMain(t, "status", "jobs:tls")
	if code != exitOK || !strings.Contains(out, `lock "jobs:tls": held by `+lease.Token()+" on a quorum (3 of 3)") {
		t.Errorf("status over TLS: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = runMain(t, "doctor")
	if code != exitOK || strings.Count(out, " ok    version ") != 3 {
		t.Errorf("doctor over TLS: exit %d\n%s%s", code, out, stderr)
	}
	if strings.Contains(out+stderr, "Tls-pw-5") {
		t.Errorf("the output shows the password")
	}
}
