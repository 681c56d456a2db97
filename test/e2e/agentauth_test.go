//go:build e2e

package e2e

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/keyutil"

	"github.com/shoal-io/shoal/coordinator/auth"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// agentAudience is the audience of the agents' tokens (backbone.md).
const agentAudience = "shoal-coordinator"

// agentTokenSeconds is the lifetime of the tokens the tests mint, as the
// agent DaemonSet's projected token.
const agentTokenSeconds = 3600

// TestAgentAuth proves coordinator/auth against a real kube-apiserver: a
// projected-style token bound to an agent pod authenticates as that pod on
// its node, and every other token is refused for the right reason.
func TestAgentAuth(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	nodes := requireSchedulableNodes(ctx, t, f, 2)
	nodeA, nodeB := nodes[0].Name, nodes[1].Name

	sa := createServiceAccount(ctx, t, f, "agent")
	podA := runPausePod(ctx, t, f, "agent-a", nodeA, sa.Name)
	podB := runPausePod(ctx, t, f, "agent-b", nodeB, sa.Name)
	tokenA := mintPodToken(ctx, t, f, sa.Name, podA, agentAudience)
	tokenB := mintPodToken(ctx, t, f, sa.Name, podB, agentAudience)
	wantUser := "system:serviceaccount:" + f.Namespace + ":" + sa.Name

	t.Run("pod-bound tokens authenticate as their pod and node", func(t *testing.T) {
		a := newAgentAuthenticator(f, sa.Name)
		for _, tc := range []struct {
			token string
			pod   *corev1.Pod
			node  string
		}{{tokenA, podA, nodeA}, {tokenB, podB, nodeB}} {
			id, err := a.Authenticate(ctx, tc.token)
			require.NoError(t, err)
			require.Equal(t, auth.Identity{
				Username: wantUser,
				NodeName: tc.node,
				PodName:  tc.pod.Name,
				PodUID:   string(tc.pod.UID),
			}, id)
			require.NoError(t, auth.CheckNode(id, tc.node))
		}
	})

	t.Run("a token claiming another node is refused", func(t *testing.T) {
		id, err := newAgentAuthenticator(f, sa.Name).Authenticate(ctx, tokenA)
		require.NoError(t, err)
		err = auth.CheckNode(id, nodeB)
		require.ErrorIs(t, err, auth.ErrForbidden)
		t.Logf("refused: %v", err)
		require.ErrorContains(t, err, nodeA)
		require.ErrorContains(t, err, nodeB)
	})

	t.Run("a token of another audience is refused", func(t *testing.T) {
		token := mintPodToken(ctx, t, f, sa.Name, podA, "not-"+agentAudience)
		_, err := newAgentAuthenticator(f, sa.Name).Authenticate(ctx, token)
		require.ErrorIs(t, err, auth.ErrUnauthenticated)
		t.Logf("refused: %v", err)
	})

	t.Run("an empty token is refused", func(t *testing.T) {
		_, err := newAgentAuthenticator(f, sa.Name).Authenticate(ctx, "")
		require.ErrorIs(t, err, auth.ErrUnauthenticated)
		t.Logf("refused: %v", err)
	})

	t.Run("a garbage token is refused", func(t *testing.T) {
		_, err := newAgentAuthenticator(f, sa.Name).Authenticate(ctx, "not.a.jwt")
		require.ErrorIs(t, err, auth.ErrUnauthenticated)
		t.Logf("refused: %v", err)
	})

	t.Run("a token that is not bound to a pod is forbidden", func(t *testing.T) {
		token := mintToken(ctx, t, f, sa.Name, authenticationv1.TokenRequestSpec{
			Audiences:         []string{agentAudience},
			ExpirationSeconds: new(int64(agentTokenSeconds)),
		})
		_, err := newAgentAuthenticator(f, sa.Name).Authenticate(ctx, token)
		require.ErrorIs(t, err, auth.ErrForbidden)
		t.Logf("refused: %v", err)
		require.ErrorContains(t, err, "not bound to a pod")
	})

	t.Run("a token of another service account is forbidden", func(t *testing.T) {
		_, err := newAgentAuthenticator(f, "shoal-agent").Authenticate(ctx, tokenA)
		require.ErrorIs(t, err, auth.ErrForbidden)
		t.Logf("refused: %v", err)
		require.ErrorContains(t, err, wantUser)
	})

	t.Run("an expired token is refused", func(t *testing.T) {
		keyFile := serviceAccountSigningKey(t, f)
		now := time.Now()
		// Control: the forgery is accepted while it has not expired, so the
		// refusal below is for the expiry and not for a bad signature.
		valid := forgeToken(t, keyFile, tokenA, func(claims map[string]any) {
			claims["iat"], claims["nbf"], claims["exp"] = now.Unix(), now.Unix(), now.Add(10*time.Minute).Unix()
		})
		id, err := newAgentAuthenticator(f, sa.Name).Authenticate(ctx, valid)
		require.NoError(t, err, "a forged token that has not expired must authenticate")
		require.Equal(t, nodeA, id.NodeName)

		// Past the apiserver's one-minute leeway.
		issued := now.Add(-2 * time.Hour)
		expired := forgeToken(t, keyFile, tokenA, func(claims map[string]any) {
			claims["iat"], claims["nbf"], claims["exp"] = issued.Unix(), issued.Unix(), issued.Add(time.Hour).Unix()
		})
		_, err = newAgentAuthenticator(f, sa.Name).Authenticate(ctx, expired)
		require.ErrorIs(t, err, auth.ErrUnauthenticated)
		t.Logf("refused: %v", err)
		require.ErrorContains(t, err, "expired")
	})

	// Last: it deletes pod B.
	t.Run("the token of a deleted pod is refused", func(t *testing.T) {
		deletePodAndWait(ctx, t, f, podB.Name)
		// The apiserver reuses a successful authentication for up to 10s;
		// a fresh Authenticator with its own cache off asks each time.
		a := newAgentAuthenticator(f, sa.Name)
		a.CacheTTL = -1
		var err error
		require.NoError(t, framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			_, err = a.Authenticate(ctx, tokenB)
			return err != nil, nil
		}), "the token of deleted pod %s still authenticates", podB.Name)
		require.ErrorIs(t, err, auth.ErrUnauthenticated)
		t.Logf("refused: %v", err)

		// Pod A is untouched.
		id, err := a.Authenticate(ctx, tokenA)
		require.NoError(t, err)
		require.Equal(t, podA.Name, id.PodName)
	})
}

// newAgentAuthenticator is an Authenticator for agentAudience that accepts
// ServiceAccount sa of the test namespace.
func newAgentAuthenticator(f *framework.Framework, sa string) *auth.Authenticator {
	return &auth.Authenticator{
		Client:         f.Kube,
		Audience:       agentAudience,
		ServiceAccount: f.Namespace + ":" + sa,
	}
}

// createServiceAccount creates a ServiceAccount in the test namespace.
func createServiceAccount(ctx context.Context, t *testing.T, f *framework.Framework, name string) *corev1.ServiceAccount {
	t.Helper()
	sa, err := f.Kube.CoreV1().ServiceAccounts(f.Namespace).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return sa
}

// pausePod is a pod of the registry's pause image on nodeName (bypassing
// the scheduler) running as ServiceAccount serviceAccount.
func pausePod(f *framework.Framework, name, nodeName, serviceAccount string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeName:                      nodeName,
			ServiceAccountName:            serviceAccount,
			TerminationGracePeriodSeconds: new(int64(1)),
			Containers: []corev1.Container{{
				Name:  "pause",
				Image: f.Image("pause:3.10"),
			}},
		},
	}
}

// runPausePod creates a pausePod and waits until it is ready.
func runPausePod(ctx context.Context, t *testing.T, f *framework.Framework, name, nodeName, serviceAccount string) *corev1.Pod {
	t.Helper()
	_, err := f.Kube.CoreV1().Pods(f.Namespace).Create(ctx, pausePod(f, name, nodeName, serviceAccount), metav1.CreateOptions{})
	require.NoError(t, err)
	pods, err := f.WaitForPodsReady(ctx, f.Namespace, "app="+name, 1, podStartTimeout)
	require.NoError(t, err)
	return &pods[0]
}

// deletePodAndWait deletes a pod of the test namespace and waits until
// the API no longer has it.
func deletePodAndWait(ctx context.Context, t *testing.T, f *framework.Framework, name string) {
	t.Helper()
	pods := f.Kube.CoreV1().Pods(f.Namespace)
	require.NoError(t, pods.Delete(ctx, name, metav1.DeleteOptions{}))
	require.NoError(t, framework.WaitFor(ctx, podStartTimeout, func(ctx context.Context) (bool, error) {
		_, err := pods.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}), "pod %s not gone", name)
}

// mintPodToken asks the TokenRequest API for a token of ServiceAccount sa
// (of the test namespace) for audience, bound to pod as a projected
// ServiceAccount token of that pod is.
func mintPodToken(ctx context.Context, t *testing.T, f *framework.Framework, sa string, pod *corev1.Pod, audience string) string {
	t.Helper()
	return mintToken(ctx, t, f, sa, authenticationv1.TokenRequestSpec{
		Audiences:         []string{audience},
		ExpirationSeconds: new(int64(agentTokenSeconds)),
		BoundObjectRef: &authenticationv1.BoundObjectReference{
			Kind:       "Pod",
			APIVersion: "v1",
			Name:       pod.Name,
			UID:        pod.UID,
		},
	})
}

// mintToken asks the TokenRequest API for a token of ServiceAccount sa of
// the test namespace.
func mintToken(ctx context.Context, t *testing.T, f *framework.Framework, sa string, spec authenticationv1.TokenRequestSpec) string {
	t.Helper()
	tr, err := f.Kube.CoreV1().ServiceAccounts(f.Namespace).CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	require.NoError(t, err, "token request for service account %s", sa)
	require.NotEmpty(t, tr.Status.Token)
	return tr.Status.Token
}

// serviceAccountSigningKey returns the file of the key the local cluster's
// apiserver signs ServiceAccount tokens with (test/cluster's
// --service-account-signing-key-file). On any other cluster t is skipped.
func serviceAccountSigningKey(t *testing.T, f *framework.Framework) string {
	t.Helper()
	cfg := localCluster(t, f)
	path := filepath.Join(cfg.PKIDir(), "sa.key")
	_, err := os.Stat(path)
	require.NoError(t, err, "the local cluster's service-account signing key")
	return path
}

// decodeJWT returns the header and the claims of a JWT, unverified.
func decodeJWT(t *testing.T, token string) (header, claims map[string]any) {
	t.Helper()
	parts := strings.Split(token, ".")
	require.Len(t, parts, 3, "a JWT has three parts")
	for i, dst := range []*map[string]any{&header, &claims} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		require.NoError(t, err)
		d := json.NewDecoder(strings.NewReader(string(raw)))
		d.UseNumber()
		require.NoError(t, d.Decode(dst))
	}
	return header, claims
}

// forgeToken signs, with the key in keyFile, a JWT with the header and
// claims of model (a real token of the cluster) changed by edit and a new
// jti. Every claim the apiserver checks (iss, aud, sub, kubernetes.io's
// namespace, pod, node and serviceaccount) is copied unless edit changes
// it.
func forgeToken(t *testing.T, keyFile, model string, edit func(claims map[string]any)) string {
	t.Helper()
	header, claims := decodeJWT(t, model)
	jti := make([]byte, 16)
	_, err := rand.Read(jti)
	require.NoError(t, err)
	claims["jti"] = hex.EncodeToString(jti)
	edit(claims)

	pemBytes, err := os.ReadFile(keyFile)
	require.NoError(t, err)
	key, err := keyutil.ParsePrivateKeyPEM(pemBytes)
	require.NoError(t, err)

	enc := func(v any) string {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signingInput := enc(header) + "." + enc(claims)
	digest := sha256.Sum256([]byte(signingInput))
	var sig []byte
	switch k := key.(type) {
	case *rsa.PrivateKey:
		require.Equal(t, "RS256", header["alg"], "the model token's algorithm")
		sig, err = rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, digest[:])
		require.NoError(t, err)
	case *ecdsa.PrivateKey:
		require.Equal(t, "ES256", header["alg"], "the model token's algorithm")
		r, s, err := ecdsa.Sign(rand.Reader, k, digest[:])
		require.NoError(t, err)
		sig = make([]byte, 64) // JWS: r and s, 32 bytes each, big-endian
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
	default:
		require.FailNow(t, fmt.Sprintf("unsupported signing key %T in %s", key, keyFile))
	}
	return signingInput + "." + base64.RawURLEncoding.EncodeToString(sig)
}
