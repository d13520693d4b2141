package redisnode

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/redisproc"
)

type pemFiles struct{ caCert, srvCert, srvKey, cliCert, cliKey string }

// makeCerts writes a throwaway CA, a server certificate (SAN 127.0.0.1 and
// localhost) and a client certificate, all ECDSA P-256, as PEM files in dir.
func makeCerts(t *testing.T, dir string) pemFiles {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		return k
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return p
	}
	writeKey := func(name string, k *ecdsa.PrivateKey) string {
		der, err := x509.MarshalECPrivateKey(k)
		require.NoError(t, err)
		return write(name, "EC PRIVATE KEY", der)
	}
	now := time.Now()
	caKey := newKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "quorumlock test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, k *ecdsa.PrivateKey) []byte {
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		require.NoError(t, err)
		return der
	}
	srvKey, cliKey := newKey(), newKey()
	return pemFiles{
		caCert:  write("ca.pem", "CERTIFICATE", caDER),
		srvCert: write("server.pem", "CERTIFICATE", leaf(2, "localhost", x509.ExtKeyUsageServerAuth, srvKey)),
		srvKey:  writeKey("server-key.pem", srvKey),
		cliCert: write("client.pem", "CERTIFICATE", leaf(3, "locker", x509.ExtKeyUsageClientAuth, cliKey)),
		cliKey:  writeKey("client-key.pem", cliKey),
	}
}

func TestTLS(t *testing.T) {
	redisproc.Require(t)
	f := makeCerts(t, t.TempDir())
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(f.caCert)
	require.NoError(t, err)
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	cli, err := tls.LoadX509KeyPair(f.cliCert, f.cliKey)
	require.NoError(t, err)
	adminTLS := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cli}, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	srv := redisproc.StartT(t, redisproc.Config{TLS: adminTLS, Args: []string{
		"--tls-cert-file", f.srvCert, "--tls-key-file", f.srvKey, "--tls-ca-cert-file", f.caCert, "--tls-auth-clients", "yes"}})
	admin := adminT(t, &redis.Options{Addr: srv.Addr(), TLSConfig: adminTLS})
	ctx := context.Background()

	q := url.Values{"ca_file": {f.caCert}, "cert_file": {f.cliCert}, "key_file": {f.cliKey}}
	n := dialT(t, "rediss://"+srv.Addr()+"?"+q.Encode())
	ok, err := n.Acquire(ctx, "tls-lock", "v", time.Minute)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = n.Extend(ctx, "tls-lock", "v", time.Minute)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "v", admin.Get(ctx, "tls-lock").Val())
	ok, err = n.Release(ctx, "tls-lock", "v", time.Minute)
	require.NoError(t, err)
	assert.True(t, ok)

	// localhost is in the certificate too.
	_, port, _ := net.SplitHostPort(srv.Addr())
	n = dialT(t, "rediss://localhost:"+port+"?"+q.Encode())
	_, err = n.Info(ctx)
	require.NoError(t, err)

	for name, tc := range map[string]struct {
		q    url.Values
		want string
	}{
		"no client certificate": {url.Values{"ca_file": {f.caCert}}, ""},
		"wrong server_name": {url.Values{"ca_file": {f.caCert}, "cert_file": {f.cliCert}, "key_file": {f.cliKey},
			"server_name": {"wrong.example"}}, "wrong.example"},
		"system roots only": {url.Values{"cert_file": {f.cliCert}, "key_file": {f.cliKey}}, "certificate"},
	} {
		n := dialT(t, "rediss://"+srv.Addr()+"?"+tc.q.Encode())
		var ok bool
		var err error
		for range 10 { // a starved machine can run out the 250ms dial timeout mid-handshake
			ok, err = n.Acquire(ctx, "tls-"+strings.ReplaceAll(name, " ", "-"), "v", time.Minute)
			if !errors.Is(err, context.DeadlineExceeded) {
				break
			}
		}
		require.Error(t, err, name)
		assert.False(t, ok)
		assert.Contains(t, err.Error(), tc.want, name)
		t.Logf("%s: %v", name, err)
	}
	assert.Equal(t, int64(0), admin.DBSize(ctx).Val(), "no refused connection set a key")
}
