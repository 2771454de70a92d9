package kubernetes

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// client is the little of the Kubernetes API the runtime uses (namespaces, service accounts,
// pods, nodes), plain JSON over HTTPS. Not client-go: a dozen REST calls do not justify its
// ~25 modules and ~15 MB in a binary every user downloads.
type client struct {
	// Kubeconfig is the file the settings came from; Server the API server's URL.
	Kubeconfig, Server string

	http  *http.Client
	token string
}

// kubeconfig is the part of a kubeconfig file the runtime reads.
type kubeconfig struct {
	CurrentContext string `yaml:"current-context"`
	Clusters       []struct {
		Name    string `yaml:"name"`
		Cluster struct {
			Server                   string `yaml:"server"`
			CertificateAuthority     string `yaml:"certificate-authority"`
			CertificateAuthorityData string `yaml:"certificate-authority-data"`
			InsecureSkipTLSVerify    bool   `yaml:"insecure-skip-tls-verify"`
		} `yaml:"cluster"`
	} `yaml:"clusters"`
	Users []struct {
		Name string `yaml:"name"`
		User struct {
			ClientCertificate     string `yaml:"client-certificate"`
			ClientCertificateData string `yaml:"client-certificate-data"`
			ClientKey             string `yaml:"client-key"`
			ClientKeyData         string `yaml:"client-key-data"`
			Token                 string `yaml:"token"`
			TokenFile             string `yaml:"tokenFile"`
		} `yaml:"user"`
	} `yaml:"users"`
	Contexts []struct {
		Name    string `yaml:"name"`
		Context struct {
			Cluster string `yaml:"cluster"`
			User    string `yaml:"user"`
		} `yaml:"context"`
	} `yaml:"contexts"`
}

// KubeconfigPath is the kubeconfig a runtime with no explicit one reads: $KUBECONFIG (its
// first file), else ~/.kube/config.
func KubeconfigPath() string {
	if v := os.Getenv("KUBECONFIG"); v != "" {
		return filepath.SplitList(v)[0]
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".kube", "config")
}

// errNoKubeconfig is loadClient's error when the kubeconfig file does not exist.
var errNoKubeconfig = errors.New("no kubeconfig")

// loadClient reads a kubeconfig's current context: its cluster's server and CA, its user's
// client certificate or bearer token. Exec and auth-provider plugins are not supported.
func loadClient(path string) (*client, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read kubeconfig %s: %w (set KUBECONFIG or --kubeconfig)", path, errNoKubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("read kubeconfig: %w", err)
	}
	var kc kubeconfig
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return nil, fmt.Errorf("read kubeconfig %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	file := func(p string) ([]byte, error) {
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		return os.ReadFile(p)
	}
	pick := func(inline, p string) ([]byte, error) {
		if inline != "" {
			return base64.StdEncoding.DecodeString(inline)
		}
		if p != "" {
			return file(p)
		}
		return nil, nil
	}
	var clusterName, userName string
	for _, c := range kc.Contexts {
		if c.Name == kc.CurrentContext {
			clusterName, userName = c.Context.Cluster, c.Context.User
		}
	}
	if clusterName == "" {
		return nil, fmt.Errorf("read kubeconfig %s: current-context %q names no context", path, kc.CurrentContext)
	}
	c := &client{Kubeconfig: path}
	tlsc := &tls.Config{MinVersion: tls.VersionTLS12}
	found := false
	for _, cl := range kc.Clusters {
		if cl.Name != clusterName {
			continue
		}
		found = true
		c.Server = strings.TrimRight(cl.Cluster.Server, "/")
		tlsc.InsecureSkipVerify = cl.Cluster.InsecureSkipTLSVerify
		ca, err := pick(cl.Cluster.CertificateAuthorityData, cl.Cluster.CertificateAuthority)
		if err != nil {
			return nil, fmt.Errorf("read kubeconfig %s: cluster %s: certificate authority: %w", path, clusterName, err)
		}
		if ca != nil {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(ca) {
				return nil, fmt.Errorf("read kubeconfig %s: cluster %s: no PEM certificate in its certificate authority", path, clusterName)
			}
			tlsc.RootCAs = pool
		}
	}
	if !found || c.Server == "" {
		return nil, fmt.Errorf("read kubeconfig %s: context %s names cluster %q, which has no server", path, kc.CurrentContext, clusterName)
	}
	for _, u := range kc.Users {
		if u.Name != userName {
			continue
		}
		crt, err := pick(u.User.ClientCertificateData, u.User.ClientCertificate)
		if err != nil {
			return nil, fmt.Errorf("read kubeconfig %s: user %s: client certificate: %w", path, userName, err)
		}
		key, err := pick(u.User.ClientKeyData, u.User.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("read kubeconfig %s: user %s: client key: %w", path, userName, err)
		}
		if crt != nil {
			pair, err := tls.X509KeyPair(crt, key)
			if err != nil {
				return nil, fmt.Errorf("read kubeconfig %s: user %s: %w", path, userName, err)
			}
			tlsc.Certificates = []tls.Certificate{pair}
		}
		c.token = u.User.Token
		if u.User.TokenFile != "" {
			t, err := file(u.User.TokenFile)
			if err != nil {
				return nil, fmt.Errorf("read kubeconfig %s: user %s: token file: %w", path, userName, err)
			}
			c.token = strings.TrimSpace(string(t))
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsc
	tr.Proxy = nil // the API server is reached directly, as kubectl does for 127.0.0.1
	c.http = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	return c, nil
}

// apiError is an answer of the API server other than success: its status code and message.
type apiError struct {
	Code    int
	Reason  string
	Message string
	Verb    string
	Path    string
}

// Error names the request and what the server said; a 403 says which permission is missing.
func (e *apiError) Error() string {
	if e.Code == http.StatusForbidden {
		return fmt.Sprintf("%s %s: forbidden (grant the verb and resource in RBAC, see docs/kubernetes.md): %s", e.Verb, e.Path, e.Message)
	}
	return fmt.Sprintf("%s %s: %d %s: %s", e.Verb, e.Path, e.Code, e.Reason, e.Message)
}

// isNotFound reports whether err is the API server's 404.
func isNotFound(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Code == http.StatusNotFound
}

// isConflict reports whether err is the API server's 409 (already exists).
func isConflict(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Code == http.StatusConflict
}

// unreachable is a request that never got an answer: the cluster is down or elsewhere.
type unreachable struct {
	Kubeconfig, Server string
	Err                error
}

func (e *unreachable) Error() string {
	return fmt.Sprintf("reach Kubernetes API server %s (kubeconfig %s): %v", e.Server, e.Kubeconfig, e.Err)
}

func (e *unreachable) Unwrap() error { return e.Err }

// do sends one request; in (if not nil) goes as JSON, a 2xx answer is decoded into out (if
// not nil).
func (c *client) do(ctx context.Context, verb, path string, query url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", verb, path, err)
		}
		body = bytes.NewReader(b)
	}
	u := c.Server + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, verb, u, body)
	if err != nil {
		return fmt.Errorf("build request %s %s: %w", verb, path, err)
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s %s: %w", verb, path, ctx.Err())
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return &unreachable{Kubeconfig: c.Kubeconfig, Server: c.Server, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read answer to %s %s: %w", verb, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var st struct {
			Reason, Message string
		}
		_ = json.Unmarshal(data, &st)
		if st.Message == "" {
			st.Message = strings.TrimSpace(string(data))
		}
		return &apiError{Code: resp.StatusCode, Reason: st.Reason, Message: st.Message, Verb: verb, Path: path}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("decode answer to %s %s: %w", verb, path, err)
		}
	}
	return nil
}
