// Package sfcclient is study C's REST client for the networking-sfc API: it reads the study's
// JSON chain description (source, destination, match_fields, and the chain as functions with
// a direction) and deploys it in the study's four timed steps — flow classifier (FC), port
// pairs (PP), port pair groups (PPG), port chain (PC) — against any networking-sfc endpoint,
// `sfclab serve` or a real Neutron.
package sfcclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
)

// Directions a chain element may have (study C): the function sends its output to the
// internal network (in), to the customer network (out), back where it came from (same), or
// only receives a copy (tap).
const (
	DirIn   = "in"
	DirOut  = "out"
	DirSame = "same"
	DirTap  = "tap"
)

// ChainFile is study C's JSON chain description. Lab is sfclab's addition: which lab's ports
// to use when several labs have nodes of the same names.
type ChainFile struct {
	Source      string         `json:"source"`
	Destination string         `json:"destination"`
	MatchFields map[string]any `json:"match_fields"`
	Chain       []Element      `json:"chain"`
	Lab         string         `json:"lab,omitempty"`
}

// Element is one function of the chain.
type Element struct {
	Name      string `json:"name"`
	Direction string `json:"direction"`
}

// LoadChainFile reads and checks a chain description; errors name the file and the element.
func LoadChainFile(path string) (*ChainFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read chain file: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f ChainFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w (fields: source, destination, match_fields, chain [{name, direction}], lab)", path, err)
	}
	if err := f.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &f, nil
}

// Check validates a chain description.
func (f *ChainFile) Check() error {
	if f.Source == "" || f.Destination == "" {
		return errors.New("source and destination must name the chain's end nodes")
	}
	if len(f.Chain) == 0 {
		return errors.New("chain is empty: list the functions to cross, each {\"name\": NODE, \"direction\": in|out|same|tap}")
	}
	prevTap := false
	for i, e := range f.Chain {
		if e.Name == "" {
			return fmt.Errorf("chain[%d]: name is empty", i)
		}
		if !slices.Contains([]string{DirIn, DirOut, DirSame, DirTap}, e.Direction) {
			return fmt.Errorf("chain[%d] (%s): direction %q is not one of in, out, same, tap", i, e.Name, e.Direction)
		}
		if e.Direction == DirTap && prevTap {
			return fmt.Errorf("chain[%d] (%s): two taps in a row are not supported by networking-sfc", i, e.Name)
		}
		prevTap = e.Direction == DirTap
	}
	return nil
}

// Client talks to a networking-sfc endpoint.
type Client struct {
	// Endpoint is the API's base URL, e.g. http://127.0.0.1:9696.
	Endpoint string
	// Token is sent as X-Auth-Token when set.
	Token string
	HTTP  *http.Client
}

// APIError is a non-2xx answer, with Neutron's error type and message when the body has them.
type APIError struct {
	Method, Path string
	Status       int
	Type         string
	Message      string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Status, e.Type, e.Message)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.Endpoint, "/")+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("X-Auth-Token", c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &APIError{Method: method, Path: path, Status: resp.StatusCode, Message: strings.TrimSpace(string(data))}
		var ne struct {
			NeutronError struct{ Type, Message string }
		}
		if json.Unmarshal(data, &ne) == nil && ne.NeutronError.Type != "" {
			e.Type, e.Message = ne.NeutronError.Type, ne.NeutronError.Message
		}
		return e
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return nil
}

// create POSTs one resource and returns its id and the request's round-trip time.
func (c *Client) create(ctx context.Context, plural, singular string, body map[string]any) (string, time.Duration, error) {
	var out map[string]map[string]any
	start := time.Now()
	err := c.do(ctx, http.MethodPost, "/v2.0/sfc/"+plural, map[string]any{singular: body}, &out)
	d := time.Since(start)
	if err != nil {
		return "", d, err
	}
	id, _ := out[singular]["id"].(string)
	if id == "" {
		return "", d, fmt.Errorf("create %s: the answer has no id", singular)
	}
	return id, d, nil
}

// Delete removes one resource.
func (c *Client) Delete(ctx context.Context, plural, id string) error {
	return c.do(ctx, http.MethodDelete, "/v2.0/sfc/"+plural+"/"+id, nil, nil)
}

// port is what the client needs of a Neutron port.
type port struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Host    string `json:"binding:host_id"`
	Network string `json:"network_id"`
}

// Ports lists the Neutron ports (of one lab when lab is not "").
func (c *Client) ports(ctx context.Context, lab string) ([]port, error) {
	var out struct {
		Ports []port `json:"ports"`
	}
	path := "/v2.0/ports"
	if lab != "" {
		path += "?sfclab%3Alab=" + url.QueryEscape(lab)
	}
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return out.Ports, nil
}
