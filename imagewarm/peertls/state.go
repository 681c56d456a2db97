package peertls

import (
	"crypto"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// saved is the state file's content.
type saved struct {
	// Key is the private key, PKCS #8 PEM.
	Key []byte `json:"key"`
	// Chain and Bundle are as Install took them.
	Chain  []byte `json:"chain"`
	Bundle []byte `json:"bundle"`
}

// save writes the current key with chainPEM and bundlePEM to the state
// file, atomically (a temporary file renamed over it), readable by the
// agent only.
func (id *Identity) save(chainPEM, bundlePEM []byte) error {
	st := id.cur.Load()
	if st == nil {
		return errors.New("no certificate to save")
	}
	der, err := x509.MarshalPKCS8PrivateKey(st.cert.PrivateKey)
	if err != nil {
		return fmt.Errorf("encode peer key: %w", err)
	}
	data, err := json.Marshal(saved{
		Key:   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		Chain: chainPEM, Bundle: bundlePEM,
	})
	if err != nil {
		return err
	}
	dir := filepath.Dir(id.stateFile)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save peer certificate: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".peer-identity-*")
	if err != nil {
		return fmt.Errorf("save peer certificate: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("save peer certificate: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("save peer certificate: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save peer certificate: %w", err)
	}
	if err := os.Rename(tmp.Name(), id.stateFile); err != nil {
		return fmt.Errorf("save peer certificate: %w", err)
	}
	return nil
}

// load makes the saved identity current when it is still good: the key
// matches the certificate, which is for this node and has not expired.
// A missing file is no error.
func (id *Identity) load() error {
	data, err := os.ReadFile(id.stateFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var sv saved
	if err := json.Unmarshal(data, &sv); err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	block, _ := pem.Decode(sv.Key)
	if block == nil {
		return errors.New("state file: no key")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return fmt.Errorf("state file: key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return errors.New("state file: the key cannot sign")
	}
	id.mu.Lock()
	id.pending = signer
	id.mu.Unlock()
	if err := id.install(sv.Chain, sv.Bundle); err != nil {
		id.mu.Lock()
		id.pending = nil
		id.mu.Unlock()
		return err
	}
	return nil
}
