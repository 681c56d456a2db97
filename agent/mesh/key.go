package mesh

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
)

// validKeySize reports whether n is an AES key size memberlist accepts.
func validKeySize(n int) bool {
	return n == 16 || n == 24 || n == 32
}

// LoadKey reads the mesh encryption key from path. The file holds either the
// raw key (16, 24 or 32 bytes, as in the shoal-mesh-key Secret) or the same
// key base64-encoded (standard or URL alphabet, padded or not, surrounding
// whitespace ignored). Base64 text is tried first: a random raw key is
// practically never valid base64 of a valid size.
func LoadKey(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading mesh key file %s: %w", path, err)
	}
	if key, ok := decodeBase64Key(bytes.TrimSpace(data)); ok {
		return key, nil
	}
	if validKeySize(len(data)) {
		return data, nil
	}
	return nil, fmt.Errorf("mesh key file %s holds %d bytes: want a raw AES key of 16, 24 or 32 bytes, or such a key base64-encoded", path, len(data))
}

// decodeBase64Key decodes text as a base64 key of a valid size.
func decodeBase64Key(text []byte) ([]byte, bool) {
	if len(text) == 0 {
		return nil, false
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		key := make([]byte, enc.DecodedLen(len(text)))
		n, err := enc.Decode(key, text)
		if err == nil && validKeySize(n) {
			return key[:n], true
		}
	}
	return nil, false
}
