package satoken

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	jose "github.com/go-jose/go-jose/v4"
)

// LoadPublicKeys reads the keys that verify tokens from PEM files, as
// kube-apiserver's --service-account-key-file: public keys (PKIX or
// PKCS#1), private keys (their public halves) and certificates, RSA or
// ECDSA; a file may hold several blocks.
func LoadPublicKeys(files ...string) ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("%w: cannot read key file: %w", ErrInvalidConfig, err)
		}
		found, err := parsePublicKeys(data)
		if err != nil {
			return nil, fmt.Errorf("%w: key file %s: %w", ErrInvalidConfig, file, err)
		}
		keys = append(keys, found...)
	}
	return keys, nil
}

func parsePublicKeys(data []byte) ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		var pub crypto.PublicKey
		switch block.Type {
		case "PUBLIC KEY":
			k, err := x509.ParsePKIXPublicKey(block.Bytes)
			if err != nil {
				return nil, err
			}
			pub = k
		case "RSA PUBLIC KEY":
			k, err := x509.ParsePKCS1PublicKey(block.Bytes)
			if err != nil {
				return nil, err
			}
			pub = k
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, err
			}
			pub = c.PublicKey
		case "RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY":
			k, err := parsePrivateKey(block)
			if err != nil {
				return nil, err
			}
			pub = k.Public()
		default:
			continue
		}
		if _, err := algorithmFor(pub); err != nil {
			return nil, err
		}
		keys = append(keys, pub)
	}
	if len(keys) == 0 {
		return nil, errors.New("no public key, private key or certificate in PEM form")
	}
	return keys, nil
}

// LoadSigningKey reads the private key that signs tokens (RSA or ECDSA,
// PEM), as kube-apiserver's --service-account-signing-key-file.
func LoadSigningKey(file string) (crypto.Signer, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot read signing key: %w", ErrInvalidConfig, err)
	}
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, fmt.Errorf("%w: no private key in %s", ErrInvalidConfig, file)
		}
		switch block.Type {
		case "RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY":
			k, err := parsePrivateKey(block)
			if err != nil {
				return nil, fmt.Errorf("%w: signing key %s: %w", ErrInvalidConfig, file, err)
			}
			if _, err := algorithmFor(k.Public()); err != nil {
				return nil, fmt.Errorf("%w: signing key %s: %w", ErrInvalidConfig, file, err)
			}
			return k, nil
		}
	}
}

// EnsureSigningKey loads the signing key in file, first writing a new RSA
// key there (mode 0600) when the file does not exist. kgate dev uses it.
func EnsureSigningKey(file string) (crypto.Signer, error) {
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, fmt.Errorf("cannot generate a signing key: %w", err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, fmt.Errorf("cannot encode the signing key: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return nil, fmt.Errorf("cannot write the signing key: %w", err)
		}
		if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			return nil, fmt.Errorf("cannot write the signing key: %w", err)
		}
	}
	return LoadSigningKey(file)
}

func parsePrivateKey(block *pem.Block) (crypto.Signer, error) {
	switch block.Type {
	case "RSA PRIVATE KEY":
		return x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		return x509.ParseECPrivateKey(block.Bytes)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported private key %T", k)
	}
	return s, nil
}

// algorithmFor is the JWS algorithm kube-apiserver signs with for a key:
// RS256 for RSA, ES256/384/512 for the ECDSA curves.
func algorithmFor(pub crypto.PublicKey) (jose.SignatureAlgorithm, error) {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return jose.RS256, nil
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return jose.ES256, nil
		case elliptic.P384():
			return jose.ES384, nil
		case elliptic.P521():
			return jose.ES512, nil
		}
		return "", fmt.Errorf("unsupported ECDSA curve %s", k.Curve.Params().Name)
	}
	return "", fmt.Errorf("unsupported key type %T", pub)
}

// keyID is kube-apiserver's key id: the unpadded base64url SHA-256 of the
// public key's PKIX DER.
func keyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}
