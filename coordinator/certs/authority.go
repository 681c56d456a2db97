package certs

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Names, keys and defaults of the CA objects (docs/dev/backbone.md).
const (
	// DefaultSecretName is the Secret that holds the CA.
	DefaultSecretName = "shoal-ca"
	// DefaultConfigMapName is the ConfigMap that publishes the trust bundle.
	DefaultConfigMapName = "shoal-ca-bundle"
	// DefaultCAValidity is how long a new CA is valid.
	DefaultCAValidity = 365 * 24 * time.Hour
	// DefaultRotateBefore is how long before its expiry the CA is rotated.
	DefaultRotateBefore = 90 * 24 * time.Hour

	// CACommonName is the common name of every CA certificate.
	CACommonName = "shoal-ca"

	// SecretCertKey holds the current CA certificate (PEM), followed by
	// certificates of the same CA cross-signed by its predecessor.
	SecretCertKey = "tls.crt"
	// SecretKeyKey holds the current CA's private key (PEM, PKCS #8).
	SecretKeyKey = "tls.key"
	// SecretBundleKey holds the trust bundle: the current CA first, then the
	// previous CAs that have not expired (PEM).
	SecretBundleKey = "bundle.crt"
	// ConfigMapBundleKey is the ConfigMap key that holds the trust bundle.
	ConfigMapBundleKey = "ca.crt"
)

// managedByLabel marks the objects this package creates.
var managedByLabel = map[string]string{"app.kubernetes.io/managed-by": "shoal-coordinator"}

// backdate is how far NotBefore lies before the issuing time, so that a
// peer whose clock runs a little behind accepts a fresh certificate.
const backdate = time.Hour

// raceAttempts bounds the re-reads after losing a create or update race.
const raceAttempts = 5

// Authority keeps the coordinator's CA in a Secret and its trust bundle in
// a ConfigMap. The zero values of the optional fields select the defaults.
// An Authority holds no state between calls; Ensure may be called from
// several goroutines.
type Authority struct {
	// Client talks to the apiserver. Required.
	Client kubernetes.Interface
	// Namespace holds the Secret and the ConfigMap. Required.
	Namespace string
	// SecretName is the CA Secret; default DefaultSecretName.
	SecretName string
	// ConfigMapName is the bundle ConfigMap; default DefaultConfigMapName.
	ConfigMapName string
	// CAValidity is the lifetime of a new CA; default DefaultCAValidity.
	CAValidity time.Duration
	// RotateBefore: the CA is rotated once less than this remains of its
	// validity; default DefaultRotateBefore. It must be shorter than
	// CAValidity.
	RotateBefore time.Duration
	// Clock tells the time; default the real clock.
	Clock clock.PassiveClock
}

// Bundle is the CA state one Ensure call found or made.
type Bundle struct {
	// CACert is the current CA, which signs new certificates.
	CACert *x509.Certificate
	// CAKey is CACert's private key.
	CAKey crypto.Signer
	// Chain holds unexpired certificates of CACert's key cross-signed by
	// earlier CAs. A server sends them after its leaf so that clients that
	// trust only an earlier CA can still verify it.
	Chain []*x509.Certificate
	// Certs is the trust bundle: CACert first, then the earlier CAs that
	// have not expired.
	Certs []*x509.Certificate
	// BundlePEM is Certs, PEM encoded: the content of bundle.crt and of
	// the ConfigMap's ca.crt.
	BundlePEM []byte
}

// Pool returns a certificate pool holding the trust bundle.
func (b *Bundle) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	for _, c := range b.Certs {
		pool.AddCert(c)
	}
	return pool
}

// authorityConfig is an Authority with its defaults applied.
type authorityConfig struct {
	secretName    string
	configMapName string
	validity      time.Duration
	rotateBefore  time.Duration
	clock         clock.PassiveClock
}

func (a *Authority) config() (authorityConfig, error) {
	c := authorityConfig{
		secretName:    a.SecretName,
		configMapName: a.ConfigMapName,
		validity:      a.CAValidity,
		rotateBefore:  a.RotateBefore,
		clock:         a.Clock,
	}
	if a.Client == nil || a.Namespace == "" {
		return c, errors.New("certs.Authority needs a Client and a Namespace")
	}
	if c.secretName == "" {
		c.secretName = DefaultSecretName
	}
	if c.configMapName == "" {
		c.configMapName = DefaultConfigMapName
	}
	if c.validity == 0 {
		c.validity = DefaultCAValidity
	}
	if c.rotateBefore == 0 {
		c.rotateBefore = DefaultRotateBefore
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.validity < 0 || c.rotateBefore < 0 || c.rotateBefore >= c.validity {
		return c, fmt.Errorf("certs.Authority: RotateBefore (%s) must be shorter than CAValidity (%s)", c.rotateBefore, c.validity)
	}
	return c, nil
}

// Ensure returns the current CA, creating it when the Secret is missing.
// With mayRotate (the leader) it also rotates a CA that is within
// RotateBefore of its expiry, drops expired certificates from the bundle
// and replaces an unusable Secret. It then writes the bundle to the
// ConfigMap when that differs. A replica that loses a create or update race
// re-reads the Secret and uses the winner's CA.
func (a *Authority) Ensure(ctx context.Context, mayRotate bool) (*Bundle, error) {
	cfg, err := a.config()
	if err != nil {
		return nil, err
	}
	var b *Bundle
	err = retryOnRace(func() error {
		var err error
		b, err = a.ensureSecret(ctx, cfg, mayRotate)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ensure CA Secret %s/%s: %w", a.Namespace, cfg.secretName, err)
	}
	err = retryOnRace(func() error { return a.ensureConfigMap(ctx, cfg, b, mayRotate) })
	if err != nil {
		return nil, fmt.Errorf("ensure CA bundle ConfigMap %s/%s: %w", a.Namespace, cfg.configMapName, err)
	}
	return b, nil
}

// retryOnRace calls f again, a bounded number of times, while it fails
// because another writer got there first.
func retryOnRace(f func() error) error {
	var err error
	for range raceAttempts {
		err = f()
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return err
}

func (a *Authority) ensureSecret(ctx context.Context, cfg authorityConfig, mayRotate bool) (*Bundle, error) {
	log := klog.FromContext(ctx).WithValues("secret", klog.KRef(a.Namespace, cfg.secretName))
	secrets := a.Client.CoreV1().Secrets(a.Namespace)
	now := cfg.clock.Now()

	sec, err := secrets.Get(ctx, cfg.secretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		b, err := newGeneration(now, cfg.validity, nil, nil)
		if err != nil {
			return nil, err
		}
		data, err := b.secretData()
		if err != nil {
			return nil, err
		}
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: cfg.secretName, Namespace: a.Namespace, Labels: managedByLabel},
			Type:       corev1.SecretTypeOpaque,
			Data:       data,
		}
		if _, err := secrets.Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create: %w", err)
		}
		log.Info("Created CA", "serial", b.CACert.SerialNumber.Text(16), "notAfter", b.CACert.NotAfter)
		return b, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get: %w", err)
	}

	cur, perr := bundleFromSecret(sec, now)
	var next *Bundle
	switch {
	case perr != nil && !mayRotate:
		return nil, fmt.Errorf("no usable CA: %w", perr)
	case perr != nil:
		log.Error(perr, "CA Secret is unusable; replacing it with a new CA")
		// Keep trusting whatever earlier CAs can still be read.
		prev, _ := parseCerts(sec.Data[SecretBundleKey])
		next, err = newGeneration(now, cfg.validity, nil, prev)
		if err != nil {
			return nil, err
		}
	case !mayRotate:
		return cur, nil
	case cur.CACert.NotAfter.Sub(now) < cfg.rotateBefore:
		next, err = newGeneration(now, cfg.validity, cur, nil)
		if err != nil {
			return nil, err
		}
		log.Info("Rotating CA", "oldSerial", cur.CACert.SerialNumber.Text(16), "oldNotAfter", cur.CACert.NotAfter,
			"newSerial", next.CACert.SerialNumber.Text(16), "newNotAfter", next.CACert.NotAfter, "bundleSize", len(next.Certs))
	default:
		// Nothing to rotate; write back only what expired and was dropped.
		next = cur
	}

	data, err := next.secretData()
	if err != nil {
		return nil, err
	}
	if next == cur {
		if bytes.Equal(sec.Data[SecretCertKey], data[SecretCertKey]) && bytes.Equal(sec.Data[SecretBundleKey], data[SecretBundleKey]) {
			return cur, nil
		}
		// Keep the stored key bytes: only the certificates changed.
		data[SecretKeyKey] = sec.Data[SecretKeyKey]
	}
	sec = sec.DeepCopy()
	if sec.Data == nil {
		sec.Data = map[string][]byte{}
	}
	for k, v := range data {
		sec.Data[k] = v
	}
	if _, err := secrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("update: %w", err)
	}
	if next == cur {
		log.Info("Dropped expired certificates from the CA bundle", "bundleSize", len(next.Certs))
	} else {
		log.Info("Stored new CA", "serial", next.CACert.SerialNumber.Text(16), "notAfter", next.CACert.NotAfter)
	}
	return next, nil
}

// ensureConfigMap publishes b's bundle. The leader writes whenever the
// ConfigMap differs. Other replicas only create it, or write it when it
// does not trust their current CA: a replica that read the Secret just
// before the leader rotated must not put the older bundle back.
func (a *Authority) ensureConfigMap(ctx context.Context, cfg authorityConfig, b *Bundle, leader bool) error {
	cms := a.Client.CoreV1().ConfigMaps(a.Namespace)
	want := string(b.BundlePEM)
	cm, err := cms.Get(ctx, cfg.configMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: cfg.configMapName, Namespace: a.Namespace, Labels: managedByLabel},
			Data:       map[string]string{ConfigMapBundleKey: want},
		}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create: %w", err)
		}
		klog.FromContext(ctx).Info("Published CA bundle", "configMap", klog.KObj(cm), "certs", len(b.Certs))
		return nil
	}
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	have := cm.Data[ConfigMapBundleKey]
	if have == want {
		return nil
	}
	if !leader {
		certs, _ := parseCerts([]byte(have))
		if slices.ContainsFunc(certs, b.CACert.Equal) {
			return nil
		}
	}
	cm = cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[ConfigMapBundleKey] = want
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update: %w", err)
	}
	klog.FromContext(ctx).Info("Published CA bundle", "configMap", klog.KObj(cm), "certs", len(b.Certs))
	return nil
}

// newGeneration makes a new CA. When prev is set, its CA cross-signs the
// new one (if prev's CA is still valid) and its bundle stays trusted;
// extra certificates are trusted too. Expired certificates are dropped.
func newGeneration(now time.Time, validity time.Duration, prev *Bundle, extra []*x509.Certificate) (*Bundle, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: CACommonName},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse new CA: %w", err)
	}

	var chain, trusted []*x509.Certificate
	if prev != nil {
		if now.Before(prev.CACert.NotAfter) {
			cross, err := crossSign(now, ca, prev.CACert, prev.CAKey)
			if err != nil {
				return nil, err
			}
			chain = append(chain, cross)
		}
		trusted = append(trusted, prev.Certs...)
	}
	trusted = append(trusted, extra...)
	return newBundle(now, ca, key, chain, trusted), nil
}

// crossSign issues a certificate for ca's subject and key signed by parent,
// valid no longer than either of them.
func crossSign(now time.Time, ca, parent *x509.Certificate, parentKey crypto.Signer) (*x509.Certificate, error) {
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	notAfter := ca.NotAfter
	if parent.NotAfter.Before(notAfter) {
		notAfter = parent.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		RawSubject:            ca.RawSubject,
		SubjectKeyId:          ca.SubjectKeyId,
		NotBefore:             now.Add(-backdate),
		NotAfter:              notAfter,
		KeyUsage:              ca.KeyUsage,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, ca.PublicKey, parentKey)
	if err != nil {
		return nil, fmt.Errorf("cross-sign new CA with the previous one: %w", err)
	}
	cross, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse cross-signed CA: %w", err)
	}
	return cross, nil
}

// newBundle assembles a Bundle: ca first in the trust bundle, then the
// other certificates that have not expired, without duplicates; chain
// keeps only unexpired certificates.
func newBundle(now time.Time, ca *x509.Certificate, key crypto.Signer, chain, others []*x509.Certificate) *Bundle {
	b := &Bundle{CACert: ca, CAKey: key, Certs: []*x509.Certificate{ca}}
	for _, c := range chain {
		if now.Before(c.NotAfter) {
			b.Chain = append(b.Chain, c)
		}
	}
	for _, c := range others {
		if now.Before(c.NotAfter) && !slices.ContainsFunc(b.Certs, c.Equal) {
			b.Certs = append(b.Certs, c)
		}
	}
	b.BundlePEM = encodeCerts(b.Certs)
	return b
}

// bundleFromSecret reads the CA Secret, dropping expired certificates
// other than the current CA.
func bundleFromSecret(sec *corev1.Secret, now time.Time) (*Bundle, error) {
	certs, err := parseCerts(sec.Data[SecretCertKey])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", SecretCertKey, err)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%s: no certificate", SecretCertKey)
	}
	ca := certs[0]
	if !ca.IsCA {
		return nil, fmt.Errorf("%s: certificate is not a CA", SecretCertKey)
	}
	key, err := parseKey(sec.Data[SecretKeyKey])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", SecretKeyKey, err)
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(ca.PublicKey) {
		return nil, fmt.Errorf("%s does not match the certificate in %s", SecretKeyKey, SecretCertKey)
	}
	trusted, err := parseCerts(sec.Data[SecretBundleKey])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", SecretBundleKey, err)
	}
	return newBundle(now, ca, key, certs[1:], trusted), nil
}

// secretData encodes b as the CA Secret's data.
func (b *Bundle) secretData() (map[string][]byte, error) {
	keyDER, err := x509.MarshalPKCS8PrivateKey(b.CAKey)
	if err != nil {
		return nil, fmt.Errorf("encode CA key: %w", err)
	}
	return map[string][]byte{
		SecretCertKey:   encodeCerts(append([]*x509.Certificate{b.CACert}, b.Chain...)),
		SecretKeyKey:    pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		SecretBundleKey: b.BundlePEM,
	}, nil
}

func encodeCerts(certs []*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, c := range certs {
		// Writing to a bytes.Buffer does not fail.
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return buf.Bytes()
}

// parseCerts reads every CERTIFICATE block of data, ignoring other blocks.
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return certs, nil
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return certs, fmt.Errorf("parse certificate: %w", err)
		}
		certs = append(certs, c)
	}
}

// parseKey reads a PEM private key in PKCS #8, SEC 1 or PKCS #1 form.
func parseKey(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM private key")
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("unexpected PEM block %q", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("parse private key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("private key of type %T cannot sign", key)
	}
	return signer, nil
}

// randomSerial returns a random positive 128-bit serial number.
func randomSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("random serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}
