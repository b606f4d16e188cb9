package pgtopo

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSServer is a server that accepts TCP connections only over TLS, with a
// certificate for localhost and 127.0.0.1 signed by a CA made in the test.
//
// Its Server's URL uses sslmode=require (encrypted, unverified) rather than
// disable, since the server refuses plain connections; Exec uses that too.
type TLSServer struct {
	*Server
	// CAFile is the PEM file of the CA that signed the server's
	// certificate, readable by the test process.
	CAFile string
	// OtherCAFile is the PEM file of a second CA, unrelated to the
	// server, for tests that must see verification fail.
	OtherCAFile string
}

// NewTLS starts a server with ssl=on and a certificate (ECDSA P-256, valid
// for an hour, for DNS name localhost and IP 127.0.0.1) signed by a CA made
// for the test; ssl_cert_file and ssl_key_file are in the data directory,
// the key with mode 0600 and owned by the server's user. pg_hba.conf has
// `hostssl all all 127.0.0.1/32 trust` and no plain host lines, so a
// connection without TLS is refused. It is stopped and deleted when t ends.
func NewTLS(t testing.TB) *TLSServer {
	t.Helper()
	const hba = `local all all trust
hostssl all all 127.0.0.1/32 trust
`
	const conf = `ssl = on
ssl_cert_file = 'server.crt'
ssl_key_file = 'server.key'
`
	s := newServer(t, hba, conf)
	s.sslmode = "require"

	ca, caKey, caPEM := newCA(t, "pgtopo test CA")
	_, _, otherPEM := newCA(t, "pgtopo unrelated CA")
	certPEM, keyPEM := newServerCert(t, ca, caKey)

	if err := s.os.writeFile(filepath.Join(s.dataDir(), "server.crt"), certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.os.writeFile(filepath.Join(s.dataDir(), "server.key"), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ts := &TLSServer{Server: s, CAFile: filepath.Join(dir, "ca.pem"), OtherCAFile: filepath.Join(dir, "other-ca.pem")}
	if err := os.WriteFile(ts.CAFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ts.OtherCAFile, otherPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return ts
}

// VerifyFullURL is a URL of database db that verifies the server's
// certificate against CAFile and the host name localhost:
// postgres://postgres@localhost:PORT/db?sslmode=verify-full&sslrootcert=CAFILE
func (s *TLSServer) VerifyFullURL(db string) string {
	return fmt.Sprintf("postgres://postgres@localhost:%d/%s?sslmode=verify-full&sslrootcert=%s",
		s.port, url.PathEscape(db), url.QueryEscape(s.CAFile))
}

// newCA makes a self-signed CA certificate valid for an hour, and returns
// it, its key and its PEM.
func newCA(t testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// newServerCert makes a certificate for localhost and 127.0.0.1, valid for
// an hour and signed by ca, and returns its PEM and its key's.
func newServerCert(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		t.Fatal(err)
	}
	return n.Add(n, big.NewInt(1))
}
